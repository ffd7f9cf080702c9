#!/usr/bin/env python3
"""The measurements of the performance issue; bench/run.sh prepares and calls this.

Usage: python bench/bench.py [--data bench-data] [--bin target/dist/zarr-serve]
                             [--duration 10] [--warmup 3] [--conns 32] [--threads 2]
                             [--skip-peers]

Needs: curl, wrk, nginx on PATH; DATA/bench.zarr (make_data.py) and DATA/static/tiles
(make_static.py). Everything listens on 127.0.0.1 only, every child process has a
time limit, and every server started here is stopped here (by its pid).
Writes DATA/results.json (raw) and DATA/results.md (the table, also printed).
"""
import argparse
import hashlib
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
REGION = "100:356,200:712,300:812"
REGION_BYTES = 256 * 512 * 512 * 2
VOLUME_BYTES = 512 * 1024 * 1024 * 2
ECON_PREFIXES = ("zarr_serve_store_", "zarr_serve_cache_", "zarr_serve_stream_errors_total",
                 "zarr_serve_chunks_decoded_total")


def log(*a):
    print("[bench]", *a, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmHWM", "VmRSS"):
                    out[k + "_mib"] = int(v.split()[0]) / 1024
    except OSError:
        pass
    return out


def cpu_seconds(pid, with_children=False):
    """utime+stime of a process (and of its direct children, e.g. nginx workers)."""
    tck = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    if with_children:
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                            pids.append(int(d))
                except (OSError, IndexError, ValueError):
                    pass
    total = 0.0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tck
        except (OSError, IndexError, ValueError):
            pass
    return total


def http_text(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def metrics(base):
    vals = {}
    for line in http_text(base + "/metrics").splitlines():
        if not line or line.startswith("#") or not line.startswith(ECON_PREFIXES):
            continue
        name, _, value = line.rpartition(" ")
        try:
            vals[name] = float(value)
        except ValueError:
            pass
    return vals


def delta(a, b):
    """Counter deltas (gauges: the value after)."""
    out = {}
    for k in sorted(set(a) | set(b)):
        if "_total" in k:
            d = b.get(k, 0) - a.get(k, 0)
            out[k] = int(d) if d == int(d) else d
        else:
            out[k + " (after)"] = b.get(k, 0)
    return out


def curl(url, timeout=180, out="/dev/null", headers=()):
    """One GET with curl writing to nowhere; returns time, size, status, Content-Length
    and Content-Encoding."""
    fmt = "%{time_total} %{time_starttransfer} %{size_download} %{http_code} %header{content-length} " \
          "ce=%header{content-encoding}"
    extra = [a for h in headers for a in ("-H", h)]
    p = subprocess.run(["curl", "-s", "-o", out, "--max-time", str(timeout), "-w", fmt, *extra, url],
                       capture_output=True, text=True, timeout=timeout + 10)
    parts = p.stdout.split()
    r = {"curl_exit": p.returncode}
    if len(parts) >= 4:
        r.update(time_s=float(parts[0]), ttfb_s=float(parts[1]), size=int(parts[2]), status=int(parts[3]),
                 content_length=int(parts[4]) if len(parts) > 4 and parts[4].isdigit() else None,
                 content_encoding=parts[-1][3:] if parts[-1].startswith("ce=") else None)
    return r


def curl_sha256(url, timeout=180):
    p = subprocess.Popen(["curl", "-s", "--max-time", str(timeout), url], stdout=subprocess.PIPE)
    h, n = hashlib.sha256(), 0
    for block in iter(lambda: p.stdout.read(1 << 20), b""):
        h.update(block)
        n += len(block)
    p.wait(timeout=30)
    return h.hexdigest(), n


def curl_post(url, body_path, timeout=180):
    """One POST of a JSON file; returns time, size, status and the body's sha256."""
    p = subprocess.run(["curl", "-s", "--max-time", str(timeout), "-H", "Content-Type: application/json",
                        "--data-binary", "@" + body_path, "-w", "\n%{time_total} %{http_code}", url],
                       capture_output=True, timeout=timeout + 10)
    body, _, tail = p.stdout.rpartition(b"\n")
    t, status = tail.decode().split()
    return {"time_s": float(t), "status": int(status), "size": len(body),
            "sha256": hashlib.sha256(body).hexdigest()}


def points_reference(data):
    """What an ideal reader of the benchmark points touches: distinct inner
    chunks (each decoded once) and shards (each index read once)."""
    sys.path.insert(0, HERE)
    import numpy as np
    import peers
    pts = peers.bench_points()
    chunks = {tuple(p) for p in (pts // np.array([32, 64, 64])).tolist()}
    shards = {tuple(p) for p in (pts // np.array([128, 512, 512])).tolist()}
    body = os.path.join(data, "points.json")
    with open(body, "w") as f:
        json.dump({"points": pts.tolist()}, f)
    return body, {"points": len(pts), "inner_chunks": len(chunks), "shards": len(shards)}


def curl_bytes(url):
    return subprocess.run(["curl", "-s", "--max-time", "20", url], capture_output=True, timeout=30).stdout


def curl_bytes_encoded(url, encoding="zstd"):
    """The body as sent with `Accept-Encoding: encoding`, not decoded."""
    return subprocess.run(["curl", "-s", "--max-time", "20", "-H", f"Accept-Encoding: {encoding}", url],
                          capture_output=True, timeout=30).stdout


class Server:
    """zarr-serve on a free loopback port, fresh process each time."""
    count = 0

    def __init__(self, binary, data, logdir):
        Server.count += 1
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.logpath = os.path.join(logdir, f"zarr-serve-{Server.count}.log")
        env = dict(os.environ, ZARR_SERVE_LOG_LEVEL="warn", ZARR_SERVE_MAX_RESPONSE_BYTES="4294967296")
        self.logf = open(self.logpath, "w")
        # cwd = data dir: no config/default.toml there, so only built-in defaults + env + flags.
        self.p = subprocess.Popen([binary, "--listen", f"127.0.0.1:{self.port}",
                                   "--dataset", f"bench={os.path.join(data, 'bench.zarr')}",
                                   "--dataset", f"twins={os.path.join(data, 'twins.zarr')}"],
                                  cwd=data, env=env, stdout=self.logf, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while True:
            if self.p.poll() is not None:
                raise RuntimeError(f"zarr-serve exited with {self.p.returncode}; see {self.logpath}")
            try:
                if http_text(self.base + "/readyz", timeout=2).strip():
                    break
            except Exception:
                if time.time() > deadline:
                    self.stop()
                    raise RuntimeError("zarr-serve did not become ready in 30 s")
                time.sleep(0.1)

    def status(self):
        return proc_status(self.p.pid)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=5)
        self.logf.close()

    def log_issues(self):
        with open(self.logpath, errors="replace") as f:
            lines = [l.rstrip() for l in f if any(w in l for w in ("WARN", "ERROR", "panic"))]
        return lines[:20]


class Nginx:
    def __init__(self, data):
        self.dir = os.path.join(data, "nginx")
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        user = ""
        if os.geteuid() == 0:  # workers would drop to 'nobody'; run them as the current user
            import grp
            import pwd
            user = f"user {pwd.getpwuid(os.getuid()).pw_name} {grp.getgrgid(os.getgid()).gr_name};"
        d, t = self.dir, os.path.join(self.dir, "tmp")
        conf = f"""# generated by bench/bench.py
{user}
worker_processes auto;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 1000000;
    keepalive_timeout 65;
    types {{ application/json json; }}
    default_type application/octet-stream;
    client_body_temp_path {t}/body;
    proxy_temp_path {t}/proxy;
    fastcgi_temp_path {t}/fastcgi;
    uwsgi_temp_path {t}/uwsgi;
    scgi_temp_path {t}/scgi;
    server {{
        listen 127.0.0.1:{self.port};
        root {data};
        location / {{ }}
    }}
}}
"""
        self.conf = os.path.join(self.dir, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.p = subprocess.Popen(["nginx", "-e", os.path.join(d, "error.log"), "-p", d, "-c", self.conf],
                                  stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "stderr.log"), "w"))
        deadline = time.time() + 15
        while True:
            if self.p.poll() is not None:
                raise RuntimeError(f"nginx exited with {self.p.returncode}; see {d}/error.log")
            try:
                http_text(self.base + "/bench.zarr/zarr.json", timeout=2)
                break
            except Exception:
                if time.time() > deadline:
                    self.stop()
                    raise RuntimeError("nginx did not answer in 15 s")
                time.sleep(0.1)

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGQUIT)  # graceful shutdown of master and workers
            try:
                self.p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=5)


def wrk_cpu(args, script, url, env_extra, duration, pid, children=False):
    """wrk run plus the server's CPU seconds per request during it."""
    c0 = cpu_seconds(pid, children)
    r = wrk(args, script, url, env_extra, duration)
    c1 = cpu_seconds(pid, children)
    if r.get("requests"):
        r["server_cpu_s"] = c1 - c0
        r["server_cpu_us_per_req"] = (c1 - c0) * 1e6 / r["requests"]
    return r


def wrk(args, script, url, env_extra, duration):
    env = dict(os.environ, WRK_DONE_LUA=os.path.join(HERE, "wrk_done.lua"), **env_extra)
    cmd = ["wrk", "-t", str(args.threads), "-c", str(args.conns), "-d", f"{duration}s",
           "--timeout", "5s", "--latency", "-s", os.path.join(HERE, script), url]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=duration + 60)
    r = {"cmd": " ".join(cmd[:-1]) + " " + url}
    for line in p.stdout.splitlines():
        if line.startswith("WRKJSON "):
            r.update(json.loads(line[8:]))
        elif "Non-2xx or 3xx responses" in line:
            r["non_2xx"] = int(line.split(":")[1])
    if "requests" not in r:
        r["error"] = (p.stdout + p.stderr)[-2000:]
        return r
    r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
    r["bytes_per_request"] = r["bytes"] / max(1, r["requests"])
    r["error_count"] = sum(r["errors"].values())
    return r


def snapshot_binary(binary, data):
    """Copy the binary once, so every server of this run is the same build."""
    deadline = time.time() + 300
    while not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        if time.time() > deadline:
            raise RuntimeError(f"{binary} missing for 5 minutes")
        log(f"waiting for {binary} (being rebuilt?)")
        time.sleep(10)
    time.sleep(1)
    while time.time() - os.path.getmtime(binary) < 5:  # let a running link finish
        time.sleep(2)
    dst = os.path.join(data, "zarr-serve.snapshot")
    shutil.copy2(binary, dst + ".tmp")
    os.replace(dst + ".tmp", dst)
    h = hashlib.sha256(open(dst, "rb").read()).hexdigest()
    ver = subprocess.run([dst, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    return dst, {"path": binary, "sha256": h[:16], "mtime": time.ctime(os.path.getmtime(binary)),
                 "version": ver}


def region_reference(data):
    """From the shard indexes on disk: the stored bytes of the inner chunks the bulk region
    touches, the number of those chunks and of shards (what an ideal reader fetches)."""
    sys.path.insert(0, HERE)
    import floor
    rng = [range(lo // c, (hi - 1) // c + 1) for (lo, hi), c in zip(floor.REGION, floor.INNER)]
    total, nchunks, indexes = 0, 0, {}
    for chunk in itertools.product(*rng):
        shard = tuple(c // p for c, p in zip(chunk, floor.PER_SHARD))
        if shard not in indexes:
            with open(floor.shard_path(data, shard), "rb") as f:
                f.seek(-floor.index_bytes(), os.SEEK_END)
                indexes[shard] = floor.shard_index(f.read())
        per = floor.PER_SHARD
        i = ((chunk[0] % per[0]) * per[1] + chunk[1] % per[1]) * per[2] + chunk[2] % per[2]
        off, nb = indexes[shard][i]
        if off != 2**64 - 1:
            total += nb
            nchunks += 1
    return {"inner_chunks": nchunks, "shards": len(indexes), "stored_bytes": total,
            "index_bytes_per_shard": floor.index_bytes()}


def tile_url(base, r, c):
    return f"{base}/v1/datasets/bench/data/tiles?select={r*256}:{(r+1)*256},{c*256}:{(c+1)*256}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "zarr-serve"))
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--skip-peers", action="store_true")
    args = ap.parse_args()
    data = os.path.abspath(args.data)
    logdir = os.path.join(data, "logs")
    os.makedirs(logdir, exist_ok=True)
    res = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "params": vars(args), "notes": []}
    res["machine"] = {"nproc": os.cpu_count(),
                      "loadavg_at_start": open("/proc/loadavg").read().split()[:3]}
    binary, res["binary"] = snapshot_binary(os.path.abspath(args.bin), data)
    log("binary", res["binary"])
    running = []

    def start_server():
        s = Server(binary, data, logdir)
        running.append(s)
        return s

    try:
        # ---- peers in-process (nothing else of ours running) ----
        if not args.skip_peers:
            log("peers (tensorstore, zarr-python) ...")
            p = subprocess.run([sys.executable, os.path.join(HERE, "peers.py"), "--data", data,
                                "--n", str(args.n)], capture_output=True, text=True, timeout=600)
            sys.stderr.write(p.stderr)
            res["peers"] = json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr[-2000:]}

        # ---- the least CPU any server needs for the bulk reads, on these cores ----
        log("floor: decode, send and receive alone ...")
        p = subprocess.run([sys.executable, os.path.join(HERE, "floor.py"), "--data", data,
                            "--n", str(max(3, args.n))], capture_output=True, text=True, timeout=600)
        res["floor"] = json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr[-2000:]}

        # ---- bulk: fresh server, cold then warm; store economy around the first two ----
        log("bulk region over HTTP ...")
        s = start_server()
        url = f"{s.base}/v1/datasets/bench/data/volume?select={REGION}"
        m0 = metrics(s.base)
        cold = curl(url)
        m1 = metrics(s.base)
        warm = [curl(url)]
        m2 = metrics(s.base)
        # The server's CPU (all its threads, /proc) around exactly one request each.
        for _ in range(max(5, args.n - 1)):
            c0 = cpu_seconds(s.p.pid)
            warm.append(curl(url))
            warm[-1]["server_cpu_s"] = cpu_seconds(s.p.pid) - c0
        cpus = [w["server_cpu_s"] for w in warm if "server_cpu_s" in w]
        cpu_warm = sum(cpus) / len(cpus) if cpus else None
        # What Python requests (and most HTTP libraries) send unasked.
        accepting = [curl(url, headers=["Accept-Encoding: gzip, deflate"]) for _ in range(args.n)]
        sha, nbytes = curl_sha256(url)
        res["bulk"] = {"url": url, "cold": cold, "warm": warm, "accepting_gzip": accepting,
                       "sha256": sha, "sha_bytes": nbytes,
                       "server_cpu_s_per_warm_request": cpu_warm,
                       "rss_after": s.status()}
        res["economy"] = {"bulk_cold": delta(m0, m1), "bulk_warm": delta(m1, m2)}
        res["economy_reference"] = region_reference(data)
        res["bulk"]["log_issues"] = s.log_issues()
        s.stop()

        # ---- tiles: economy on a fresh server, then throughput ----
        log("tiles: store economy, correctness, wrk ...")
        s = start_server()
        steps = [("tile_cold", 5, 7), ("tile_warm_same", 5, 7), ("tile_warm_other_same_shard", 5, 6),
                 ("tile_new_shard_warm_server", 20, 9)]
        prev = metrics(s.base)
        for name, r, c in steps:
            rr = curl(tile_url(s.base, r, c))
            cur = metrics(s.base)
            res["economy"][name] = dict(delta(prev, cur), _tile=[r, c], _status=rr.get("status"))
            prev = cur
        bad = []
        for r, c in [(0, 0), (5, 7), (31, 31), (13, 22), (31, 0)]:
            want = open(os.path.join(data, "static", "tiles", f"{r}_{c}.bin"), "rb").read()
            for url in (tile_url(s.base, r, c), f"{s.base}/v1/datasets/bench/v2/tiles/{r}.{c}"):
                got = curl_bytes(url)
                if got != want:
                    bad.append([url, len(got)])
        res["tiles_check_mismatches"] = bad
        wrk(args, "wrk_tiles.lua", s.base, {"TILE_MODE": "zarr"}, args.warmup)
        res["tiles_zarr"] = wrk_cpu(args, "wrk_tiles.lua", s.base, {"TILE_MODE": "zarr"}, args.duration,
                                    s.p.pid)
        res["tiles_zarr"]["rss_after"] = s.status()
        wrk(args, "wrk_tiles.lua", s.base, {"TILE_MODE": "v2"}, args.warmup)
        res["tiles_v2_view"] = wrk_cpu(args, "wrk_tiles.lua", s.base, {"TILE_MODE": "v2"}, args.duration,
                                       s.p.pid)
        png = curl_bytes(tile_url(s.base, 5, 7) + "&format=png&colormap=viridis")
        res["tiles_png_bytes"] = len(png)
        if png[:8] != b"\x89PNG\r\n\x1a\n":
            res["tiles_check_mismatches"].append(["png", png[:64].decode("latin-1")])
        wrk(args, "wrk_tiles.lua", s.base, {"TILE_MODE": "png"}, args.warmup)
        res["tiles_png"] = wrk_cpu(args, "wrk_tiles.lua", s.base, {"TILE_MODE": "png"}, args.duration,
                                   s.p.pid)
        # As a browser asks for it: compressed in transit.
        res["tiles_png_zstd_bytes"] = len(curl_bytes_encoded(tile_url(s.base, 5, 7) + "&format=png&colormap=viridis"))
        res["tiles_png_zstd"] = wrk_cpu(args, "wrk_tiles.lua", s.base, {"TILE_MODE": "png", "TILE_ENCODING": "zstd"},
                                        args.duration, s.p.pid)
        log("metadata: wrk ...")
        node = "/v1/datasets/bench/nodes/volume"
        res["node_doc_bytes"] = len(curl_bytes(s.base + node))
        wrk(args, "wrk_path.lua", s.base, {"WRK_PATH": node}, max(1, args.warmup - 1))
        res["meta_zarr"] = wrk_cpu(args, "wrk_path.lua", s.base, {"WRK_PATH": node}, args.duration, s.p.pid)
        res["meta_zarr"]["rss_after"] = s.status()
        res["tiles_zarr"]["log_issues"] = s.log_issues()
        s.stop()

        # ---- 10,000 points by POST (fresh server): store economy, decodes, then warm ----
        log("points: 10,000 random points of the volume ...")
        body, ref = points_reference(data)
        s = start_server()
        url = f"{s.base}/v1/datasets/bench/data/volume?format=binary"
        m0 = metrics(s.base)
        cold = curl_post(url, body)
        m1 = metrics(s.base)
        warm = [curl_post(url, body) for _ in range(max(3, args.n))]
        res["points"] = {"reference": ref, "cold": cold, "warm": warm, "economy_cold": delta(m0, m1),
                         "log_issues": s.log_issues()}
        s.stop()

        # ---- reduce=mean over the whole 1 GiB volume (fresh server): time and peak RSS ----
        log("reduce=mean over the whole volume ...")
        s = start_server()
        url = f"{s.base}/v1/datasets/bench/data/volume?reduce=mean&format=json"
        runs = []
        for _ in range(max(3, args.n)):
            t0 = time.perf_counter()
            body = http_text(url, timeout=300)
            runs.append({"time_s": time.perf_counter() - t0, "value": json.loads(body)["data"]})
        res["reduce_mean"] = {"runs": runs, "rss_after": s.status(), "log_issues": s.log_issues()}
        s.stop()

        # ---- format=json of a 256 MiB region (fresh server): text rate and peak RSS ----
        log("json: a 256 MiB region as JSON ...")
        s = start_server()
        url = f"{s.base}/v1/datasets/bench/data/volume?select=0:128&format=json"
        runs = [curl(url, timeout=300) for _ in range(2)]
        res["json_region"] = {"runs": runs, "rss_after": s.status(), "log_issues": s.log_issues()}
        s.stop()

        # ---- Zarr v2 zstd against the same data and chunks as v3 zstd (fresh server) ----
        log("v2 vs v3: whole 64 MiB twins ...")
        s = start_server()
        twins = {}
        for name in ("v3_zstd", "v2_zstd"):
            twins[name] = {"sha256": curl_sha256(f"{s.base}/v1/datasets/twins/data/{name}")[0], "warm": []}
        for _ in range(max(3, args.n)):
            for name in ("v3_zstd", "v2_zstd"):
                twins[name]["warm"].append(curl(f"{s.base}/v1/datasets/twins/data/{name}"))
        res["twins"] = twins
        s.stop()

        # ---- nginx: the same tiles as files, and the zarr.json documents ----
        log("nginx: tiles and zarr.json ...")
        ng = Nginx(data)
        try:
            if curl_bytes(ng.base + "/static/tiles/5_7.bin") != \
                    open(os.path.join(data, "static", "tiles", "5_7.bin"), "rb").read():
                res["notes"].append("nginx returned unexpected bytes for a tile")
            wrk(args, "wrk_tiles.lua", ng.base, {"TILE_MODE": "static"}, args.warmup)
            res["tiles_nginx"] = wrk_cpu(args, "wrk_tiles.lua", ng.base, {"TILE_MODE": "static"},
                                         args.duration, ng.p.pid, children=True)
            zj = "/bench.zarr/volume/zarr.json"
            res["zarr_json_bytes"] = len(curl_bytes(ng.base + zj))
            wrk(args, "wrk_path.lua", ng.base, {"WRK_PATH": zj}, max(1, args.warmup - 1))
            res["meta_nginx"] = wrk_cpu(args, "wrk_path.lua", ng.base, {"WRK_PATH": zj}, args.duration,
                                        ng.p.pid, children=True)
        finally:
            ng.stop()

        # ---- whole volume: fresh server, N GETs (best time, as the peers'
        # best of N), RSS sampled over all of them ----
        log("memory: whole volume stream ...")
        s = start_server()
        before = s.status()
        samples = []
        stop_ev = threading.Event()

        def sampler():
            while not stop_ev.is_set():
                st = s.status()
                if st:
                    samples.append(st.get("VmRSS_mib", 0))
                time.sleep(0.05)
        th = threading.Thread(target=sampler, daemon=True)
        th.start()
        runs = []
        for _ in range(args.n):
            c0 = cpu_seconds(s.p.pid)
            run = curl(f"{s.base}/v1/datasets/bench/data/volume", timeout=300)
            run["server_cpu_s"] = cpu_seconds(s.p.pid) - c0
            runs.append(run)
        stop_ev.set()
        th.join()
        ok = [r for r in runs if r.get("status") == 200 and r.get("time_s")]
        whole = min(ok, key=lambda r: r["time_s"]) if ok else runs[0]
        res["memory"] = {"before": before, "after": s.status(), "whole": whole, "whole_runs": runs,
                         "rss_samples_max_mib": max(samples) if samples else None,
                         "log_issues": s.log_issues()}
        s.stop()
    finally:
        for s in running:
            try:
                s.stop()
            except Exception:
                pass

    res["machine"]["loadavg_at_end"] = open("/proc/loadavg").read().split()[:3]
    res["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    with open(os.path.join(data, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    sys.path.insert(0, HERE)
    import report
    md = report.render(res)
    with open(os.path.join(data, "results.md"), "w") as f:
        f.write(md)
    print(md)


if __name__ == "__main__":
    main()
