#!/usr/bin/env python3
"""Load, flood and drain tests of zarr-serve on loopback (issue 4, part 7).

    python tests/load/run.py --bin target/release/zarr-serve --data DIR [--duration 60] [--json out.json]

DIR holds load.zarr (tests/load/make_data.py). Three phases, each against fresh processes:

  load   wrk, 64 connections, `mix.lua` (35% node documents, 45% tiles, 10% 8 MiB regions,
         10% JSON regions) for --duration seconds. Passes with zero socket errors, zero
         non-2xx answers, resident memory flat after warm-up (the median of the last third of
         the run at most 10% (and 32 MiB) above the median of the first third; warm-up runs the
         mix until the caches, as /metrics reports them, stop growing),
         and RSS 10 s after the load within 64 MiB of start-up RSS plus the cache and
         buffer-pool budgets. bench/soak.sh runs this phase for 20 minutes.
  flood  64 threads asking for 64 MiB regions and for the whole 128 MiB volume, which the
         server's limit (100 MB for this test) refuses, for --flood seconds. Every answer
         must be 200 (with every byte), 413 or 503, and peak RSS under 1 GiB.
  drain  nginx (Debian) balancing two replicas; wrk through nginx at 64 connections;
         SIGTERM to one replica a third of the way in. Passes with zero failed requests,
         the drained replica exiting 0, and the other one answering the rest.

Prints a report and exits non-zero when a phase fails. Needs wrk and nginx on PATH
(or in /usr/sbin).
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
WRK_DONE_LUA = os.path.join(HERE, "..", "..", "bench", "wrk_done.lua")
FLOOD_LIMIT = 100_000_000  # bytes: the whole volume (134 MB) is over it, a 64 MiB region under it


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"nothing ready on port {port}")


class Server:
    def __init__(self, binary, data, logdir, name, env_extra=None):
        self.port = free_port()
        self.log = open(os.path.join(logdir, f"{name}.log"), "w")
        env = dict(os.environ, **(env_extra or {}))
        self.p = subprocess.Popen([binary, "--listen", f"127.0.0.1:{self.port}",
                                   "--dataset", f"load={os.path.join(data, 'load.zarr')}"],
                                  stdout=self.log, stderr=subprocess.STDOUT, env=env)
        wait_ready(self.port, self.p)

    def rss_mib(self):
        try:
            with open(f"/proc/{self.p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return None

    def cached_mib(self):
        """Bytes held by the byte-weighted caches (zarr_serve_cache_size of the shard-index
        and decoded-chunk caches in /metrics), in MiB."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request("GET", "/metrics")
        held = 0
        for line in c.getresponse().read().decode().splitlines():
            for cache in ("shard_index", "decoded_chunk"):
                if line.startswith(f'zarr_serve_cache_size{{cache="{cache}"}} '):
                    held += int(line.split()[1])
        return held / 2**20

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
        self.log.close()


class RssSampler(threading.Thread):
    """RSS of a server every `every` seconds: list of (seconds since start, MiB)."""

    def __init__(self, server, every=0.5):
        super().__init__(daemon=True)
        self.server, self.every, self.samples = server, every, []
        self.stopped = threading.Event()
        self.t0 = time.time()

    def run(self):
        while not self.stopped.is_set():
            rss = self.server.rss_mib()
            if rss is not None:
                self.samples.append((time.time() - self.t0, rss))
            self.stopped.wait(self.every)

    def stop(self):
        self.stopped.set()
        self.join()


def wrk(port, duration, conns=64, threads=2, prefix="/v1/datasets/load", seed=4242):
    cmd = ["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{duration}s", "--timeout", "10s",
           "-s", os.path.join(HERE, "mix.lua"), f"http://127.0.0.1:{port}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60,
                         env=dict(os.environ, LOAD_PREFIX=prefix, WRK_DONE_LUA=WRK_DONE_LUA, LOAD_SEED=str(seed)))
    for line in out.stdout.splitlines():
        if line.startswith("WRKJSON "):
            return json.loads(line[len("WRKJSON "):])
    raise RuntimeError(f"wrk printed no summary: {out.stdout[-500:]} {out.stderr[-500:]}")


def wrk_failures(r):
    return sum(r["errors"].values())


def default_budgets_mib():
    """What the server may keep between requests by default (config keys
    shard_index_cache_bytes, decoded_chunk_cache_bytes, buffer_pool_bytes), in MiB,
    from the shipped config file (src/config.rs tests that the built-in defaults equal it)."""
    with open(os.path.join(HERE, "..", "..", "config", "default.toml"), "rb") as f:
        config = tomllib.load(f)
    keys = ("shard_index_cache_bytes", "decoded_chunk_cache_bytes", "buffer_pool_bytes")
    return sum(config[k] for k in keys) / 2**20


CACHE_BUDGETS_MIB = default_budgets_mib()
# RSS after the load may exceed start-up RSS plus those budgets by at most this.
AFTER_LOAD_SLACK_MIB = 64


def warm_up(server, round_seconds=3, max_rounds=10):
    """Runs the mix until the caches stop growing (by less than 1 MiB in a round), so that
    filling them up to their budgets is not taken for growth. Returns the MiB they hold.
    Each round draws other requests (its own seed): replaying one seeded sequence would
    revisit the same chunks, stop the warm-up early and leave the caches to fill during
    the measured load."""
    held = 0.0
    for round_ in range(max_rounds):
        wrk(server.port, round_seconds, seed=1000 + round_)
        before, held = held, server.cached_mib()
        if held - before < 1:
            break
    return held


def phase_load(args, logdir):
    server = Server(args.bin, args.data, logdir, "load")
    try:
        start_rss = server.rss_mib()
        cached_after_warm_up = warm_up(server)
        warm_up_rss = server.rss_mib()
        sampler = RssSampler(server)
        sampler.start()
        r = wrk(server.port, args.duration)
        sampler.stop()
        cached_after_load = server.cached_mib()
        time.sleep(10)
        after_rss = server.rss_mib()
    finally:
        server.stop()
    rss = [m for _, m in sampler.samples]
    third = max(1, len(rss) // 3)
    first, last = max(rss[:third]), max(rss[-third:])
    # Growth is judged on medians: RSS follows the requests in flight (a few
    # 8 MiB regions at once, more or less), so one third's peak is noise; a
    # leak raises the median too.
    first_median, last_median = statistics.median(rss[:third]), statistics.median(rss[-third:])
    flat = last_median - first_median <= max(0.10 * first_median, 32)
    returned = after_rss <= start_rss + CACHE_BUDGETS_MIB + AFTER_LOAD_SLACK_MIB
    # wrk counts answers of status 400 and above as errors.status.
    ok = wrk_failures(r) == 0 and r["requests"] > 0 and flat and returned
    # Peak RSS per sixth of the run, to show the trend of a long soak.
    sixth = max(1, len(rss) // 6)
    trend = [round(max(rss[i:i + sixth])) for i in range(0, len(rss), sixth)]
    return ok, {
        "requests": r["requests"], "req_per_s": r["requests"] / (r["duration_us"] / 1e6),
        "errors": r["errors"],
        "p50_ms": r["latency_us"]["p50"] / 1000, "p99_ms": r["latency_us"]["p99"] / 1000,
        "bytes": r["bytes"], "rss_start_mib": start_rss, "rss_after_warm_up_mib": warm_up_rss,
        "cached_after_warm_up_mib": round(cached_after_warm_up, 1),
        "cached_after_load_mib": round(cached_after_load, 1), "rss_first_third_peak_mib": first,
        "rss_last_third_peak_mib": last, "rss_first_third_median_mib": first_median,
        "rss_last_third_median_mib": last_median, "rss_peak_mib": max(rss), "rss_trend_mib": trend,
        "rss_10s_after_mib": after_rss,
        "rss_after_limit_mib": start_rss + CACHE_BUDGETS_MIB + AFTER_LOAD_SLACK_MIB,
        "rss_samples": len(rss), "exit_code": server.p.returncode,
    }


def flood_client(port, stop, counts, lock, errors):
    paths = ["/v1/datasets/load/data/volume?format=binary",
             "/v1/datasets/load/data/volume?select=64:192&format=binary"]
    expected = {paths[1]: 128 * 512 * 512 * 2}
    i = 0
    while not stop.is_set():
        path = paths[i % 2]
        i += 1
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            c.request("GET", path)
            resp = c.getresponse()
            got = 0
            while True:
                block = resp.read(1 << 20)
                if not block:
                    break
                got += len(block)
            c.close()
            status = resp.status
            if status == 200 and got != expected.get(path, -1):
                status = f"200 short ({got} bytes)"
        except OSError as e:
            status = f"error: {e}"
        with lock:
            counts[status] = counts.get(status, 0) + 1
            if status not in (200, 413, 503):
                errors.append(f"{path}: {status}")


def phase_flood(args, logdir):
    server = Server(args.bin, args.data, logdir, "flood",
                    {"ZARR_SERVE_MAX_RESPONSE_BYTES": str(FLOOD_LIMIT)})
    counts, errors, lock, stop = {}, [], threading.Lock(), threading.Event()
    try:
        sampler = RssSampler(server, every=0.2)
        sampler.start()
        clients = [threading.Thread(target=flood_client, args=(server.port, stop, counts, lock, errors))
                   for _ in range(64)]
        for t in clients:
            t.start()
        time.sleep(args.flood)
        stop.set()
        for t in clients:
            t.join(120)
        sampler.stop()
        # Still serving afterwards.
        c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        c.request("GET", "/v1/datasets/load/nodes/volume")
        after = c.getresponse().status
    finally:
        server.stop()
    peak = max(m for _, m in sampler.samples)
    ok = not errors and counts.get(200, 0) > 0 and counts.get(413, 0) > 0 and peak < 1024 and after == 200
    return ok, {"answers": {str(k): v for k, v in sorted(counts.items(), key=str)}, "unexpected": errors[:5],
                "rss_peak_mib": peak, "served_after": after}


NGINX_CONF = """
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp;
  uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;
  upstream replicas {{
    server 127.0.0.1:{a} max_fails=1 fail_timeout=30s;
    server 127.0.0.1:{b} max_fails=1 fail_timeout=30s;
    keepalive 32;
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://replicas;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_next_upstream error timeout http_502 http_503;
      proxy_next_upstream_tries 2;
    }}
  }}
}}
"""


def nginx_bin():
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if not found:
        raise RuntimeError("nginx not found (Debian package nginx-light or nginx)")
    return found


def phase_drain(args, logdir):
    a = Server(args.bin, args.data, logdir, "replica-a")
    b = Server(args.bin, args.data, logdir, "replica-b")
    d = tempfile.mkdtemp(prefix="zs-nginx-", dir=logdir)
    os.makedirs(os.path.join(d, "tmp"))
    port = free_port()
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(d=d, a=a.port, b=b.port, port=port))
    ng = subprocess.Popen([nginx_bin(), "-e", os.path.join(d, "error.log"), "-p", d, "-c", conf,
                           "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, ng)
        result = {}

        def term_a():
            time.sleep(args.drain / 3)
            result["sigterm_at_s"] = round(args.drain / 3, 1)
            t0 = time.time()
            a.p.send_signal(signal.SIGTERM)
            result["a_exit"] = a.p.wait(60)
            result["a_drain_s"] = round(time.time() - t0, 2)

        killer = threading.Thread(target=term_a)
        killer.start()
        r = wrk(port, args.drain)
        killer.join()
        after = wrk(port, 2)  # all on b now
    finally:
        ng.send_signal(signal.SIGQUIT)
        try:
            ng.wait(10)
        except subprocess.TimeoutExpired:
            ng.kill()
        a.stop()
        b.stop()
    ok = wrk_failures(r) == 0 and wrk_failures(after) == 0 and result.get("a_exit") == 0 and r["requests"] > 0
    return ok, {"requests": r["requests"], "errors": r["errors"], "requests_after": after["requests"],
                "errors_after": after["errors"], **result}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--duration", type=int, default=60, help="seconds of the load phase")
    ap.add_argument("--flood", type=int, default=15, help="seconds of the flood phase")
    ap.add_argument("--drain", type=int, default=15, help="seconds of load during the drain phase")
    ap.add_argument("--phases", default="load,flood,drain")
    ap.add_argument("--json")
    args = ap.parse_args()
    args.bin, args.data = os.path.abspath(args.bin), os.path.abspath(args.data)
    os.environ["PATH"] += ":/usr/sbin"
    logdir = tempfile.mkdtemp(prefix="zs-load-")
    report, failed = {}, []
    for name in args.phases.split(","):
        fn = {"load": phase_load, "flood": phase_flood, "drain": phase_drain}[name]
        t0 = time.time()
        ok, figures = fn(args, logdir)
        figures["seconds"] = round(time.time() - t0, 1)
        report[name] = {"ok": ok, **figures}
        print(f"{name}: {'ok' if ok else 'FAILED'} {json.dumps(figures)}", flush=True)
        if not ok:
            failed.append(name)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if failed:
        print(f"failed: {', '.join(failed)}; server logs in {logdir}")
        sys.exit(1)
    shutil.rmtree(logdir, ignore_errors=True)


if __name__ == "__main__":
    main()
