#!/usr/bin/env python3
"""Map tiles against xpublish-tiles (issue 28) and titiler-xarray (issue 45): the same
data, the same tile list.

    tiles_peer.py --data bench-data --bin target/dist/zarr-serve
                  [--duration 20] [--runs 3] [--conns 32] [--workers 1,2]
                  [--peers xpublish,titiler]

Run by bench/tiles_peer.sh (which makes the venv and the data). Steps:

1. the tile list: every WebMercatorQuad tile at zooms 2 and 3 and a fixed random
   sample (seed 28) of 80 tiles at each of zooms 4, 5, 6 (all intersect the
   global grid): DATA/map_tiles.txt, one "z/row/col" a line
2. zarr-serve (a copy of --bin), xpublish-tiles and titiler-xarray (each under
   uvicorn, 1 worker) on free loopback ports, all serving DATA/map.zarr; variable
   t2m, latest time step (zarr-serve's and xpublish-tiles' default for an unselected
   time dimension; titiler-xarray is asked for it: `sel=time=...`), viridis, 256 px,
   the same fixed colour range (zarr-serve and titiler `rescale`, xpublish-tiles
   `colorscalerange`). titiler's tile paths are z/column/row: it gets the same
   list in that order (DATA/map_tiles_xy.txt)
3. a few tiles from each peer and zarr-serve: valid 256x256 PNGs? how far apart are
   their pixels?
4. per server: one pass of the list to warm up (8 concurrent clients; every
   answer must be a 200 PNG), then --runs wrk runs of --duration seconds at
   --conns connections cycling through the list (bench/wrk_tile_list.lua), with
   the server's CPU seconds (utime+stime of the process and all its descendants,
   i.e. uvicorn's worker processes) read from /proc before and after each run.
   Each peer runs once per --workers value (a fresh uvicorn each time).

Prints a table; writes DATA/tiles_peer.md and DATA/tiles_peer.json.
Everything listens on 127.0.0.1 and is stopped at the end. Never runs cargo.
"""
import argparse
import concurrent.futures as cf
import hashlib
import io
import json
import os
import random
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VARIABLE = "t2m"
PNG_SIG = b"\x89PNG\r\n\x1a\n"
# tiles compared pixel by pixel: polar, mid-latitude, the lon 0 seam of the 0..360
# grid (cols 2^(z-1)-1 and 2^(z-1)), the +-180 edge, and each zoom
COMPARE = ["2/0/1", "2/1/1", "2/1/2", "3/2/5", "3/3/0", "3/4/7", "4/7/7", "4/7/8",
           "5/11/16", "5/20/31", "6/25/40", "6/31/32"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid):
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cpu_by_pid(pid):
    """utime+stime of a process and of each of its living descendants."""
    tck = os.sysconf("SC_CLK_TCK")
    out = {}
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[p] = (int(fields[11]) + int(fields[12])) / tck
        except (OSError, IndexError, ValueError):
            pass
    return out


def system_busy_seconds():
    """CPU seconds all processes spent busy since boot (/proc/stat, every core)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal
    return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    total = 0
    for p in descendants(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def get(url, timeout=60):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def tile_list(path, xy_path):
    rng = random.Random(28)
    tiles = []
    for z in (2, 3):
        n = 2 ** z
        tiles += [(z, r, c) for r in range(n) for c in range(n)]
    for z in (4, 5, 6):
        n = 2 ** z
        tiles += sorted(rng.sample([(z, r, c) for r in range(n) for c in range(n)], 80))
    with open(path, "w") as f:
        for z, r, c in tiles:
            f.write(f"{z}/{r}/{c}\n")
    with open(xy_path, "w") as f:
        for z, r, c in tiles:
            f.write(f"{z}/{c}/{r}\n")
    return [f"{z}/{r}/{c}" for z, r, c in tiles]


class Proc:
    """A server on a free loopback port; stop() ends it and its children. A tile
    server has a `prefix` and a `query` around each tile of the list file
    `list_name`."""

    list_name = "map_tiles.txt"

    def url(self, tile):
        return self.base + self.prefix + tile + self.query

    def start(self, cmd, env, cwd, probe):
        self.logf = open(self.logpath, "w")
        self.p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=self.logf, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        deadline = time.time() + 90
        while True:
            if self.p.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.p.returncode}; see {self.logpath}")
            try:
                if get(self.base + probe, timeout=5)[0] == 200:
                    return
            except Exception:
                pass
            if time.time() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not answer in 90 s; see {self.logpath}")
            time.sleep(0.2)

    def stop(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)  # its own session: the server and its workers
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait(timeout=5)
        self.logf.close()


class ZarrServe(Proc):
    def __init__(self, binary, data, rescale):
        self.name = "zarr-serve"
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.logpath = os.path.join(data, "tiles_peer-zarr-serve.log")
        self.prefix = "/v1/datasets/map/tiles/WebMercatorQuad/"
        self.query = f"?variable={VARIABLE}&colormap=viridis&rescale={rescale}"
        env = dict(os.environ, ZARR_SERVE_LOG_LEVEL="warn")
        # cwd = the data dir: no config/default.toml there, only the built-in defaults
        self.start([binary, "--listen", f"127.0.0.1:{self.port}",
                    "--dataset", f"map={os.path.join(data, 'map.zarr')}"],
                   env, data, "/readyz")


class Uvicorn(Proc):
    """A peer: an ASGI app of bench/ under uvicorn with `workers` workers."""

    prefix = "/tiles/WebMercatorQuad/"

    def serve(self, python, data, label, app, workers, probe, **env):
        self.name = f"{label} ({workers} worker{'s' if workers > 1 else ''})"
        self.workers = workers
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.logpath = os.path.join(data, f"tiles_peer-{app.split('_')[1]}-w{workers}.log")
        env = dict(os.environ, TILES_BENCH_ZARR=os.path.join(data, "map.zarr"), PYTHONWARNINGS="ignore", **env)
        self.start([python, "-m", "uvicorn", "--app-dir", HERE, f"{app}:app",
                    "--host", "127.0.0.1", "--port", str(self.port), "--workers", str(workers),
                    "--no-access-log", "--log-level", "warning"],
                   env, data, probe)


class XpublishTiles(Uvicorn):
    def __init__(self, python, data, rescale, workers):
        # f=image/png is required: xpublish-tiles 0.12.0 answers 500 without it
        # (its default format skips validation and reaches Pillow as "image/png")
        self.query = (f"?variables={VARIABLE}&style=raster/viridis&colorscalerange={rescale}"
                      "&width=256&height=256&f=image/png")
        # NUMBA_NUM_THREADS limited to the cores, as xpublish-tiles' deployment notes advise
        self.serve(python, data, "xpublish-tiles", "tiles_xpublish_app", workers, "/tiles/tileMatrixSets",
                   NUMBA_NUM_THREADS=str(os.cpu_count() or 2))


class Titiler(Uvicorn):
    """titiler-xarray (bench/tiles_titiler_app.py): tile paths are z/column/row."""

    list_name = "map_tiles_xy.txt"

    def __init__(self, python, data, rescale, workers, time_step):
        self.query = (f".png?variable={VARIABLE}&sel=time={time_step}&colormap_name=viridis"
                      f"&rescale={rescale}&tilesize=256")
        self.serve(python, data, "titiler-xarray", "tiles_titiler_app", workers, "/healthz")

    def url(self, tile):
        z, r, c = tile.split("/")
        return f"{self.base}{self.prefix}{z}/{c}/{r}{self.query}"


def latest_time_step(data):
    """The store's last time label, as titiler-xarray's `sel=time=` takes it."""
    import xarray as xr
    ds = xr.open_zarr(os.path.join(data, "map.zarr"), consolidated=False, chunks=None)
    return str(ds["time"].values[-1].astype("datetime64[s]"))


def check_png(status, ctype, body):
    if status != 200:
        return f"status {status}: {body[:200]!r}"
    if not body.startswith(PNG_SIG):
        return f"not a PNG ({ctype})"
    im = Image.open(io.BytesIO(body))
    if im.size != (256, 256):
        return f"size {im.size}"
    return None


def warm(server, tiles):
    """One pass of the list, 8 concurrent clients; every answer checked."""
    t0 = time.time()
    problems = {}
    sizes = []
    with cf.ThreadPoolExecutor(8) as ex:
        for tile, (st, ct, body) in zip(tiles, ex.map(lambda t: get(server.url(t)), tiles)):
            bad = check_png(st, ct, body)
            if bad:
                problems[tile] = bad
            sizes.append(len(body))
    dt = time.time() - t0
    return {"seconds": dt, "tiles_per_s": len(tiles) / dt, "problems": problems,
            "mean_bytes": statistics.mean(sizes)}


def rgba(body):
    return np.asarray(Image.open(io.BytesIO(body)).convert("RGBA")).astype(np.int16)


def compare(a, b, tiles, tol):
    rows = []
    for t in tiles:
        ra, rb = get(a.url(t)), get(b.url(t))
        ea, eb = check_png(*ra), check_png(*rb)
        if ea or eb:
            rows.append({"tile": t, "error": f"{a.name}: {ea}; {b.name}: {eb}"})
            continue
        pa, pb = rgba(ra[2]), rgba(rb[2])
        ta, tb = pa[..., 3] == 0, pb[..., 3] == 0
        both = ~ta & ~tb
        d = np.abs(pa[..., :3] - pb[..., :3]).max(axis=-1)
        rows.append({
            "tile": t,
            "bytes": [len(ra[2]), len(rb[2])],
            "transparent": [float(ta.mean()), float(tb.mean())],
            "alpha_mismatch": float((ta != tb).mean()),
            "rgb_over_tol": float((d[both] > tol).mean()) if both.any() else 0.0,
            "rgba_over_tol": float(((ta != tb) | (both & (d > tol))).mean()),
            "mean_abs_rgb": float(d[both].mean()) if both.any() else 0.0,
        })
    return rows


def wrk(server, list_path, duration, conns, threads, encoding=None):
    env = dict(os.environ, WRK_DONE_LUA=os.path.join(HERE, "wrk_done.lua"), TILE_LIST=list_path,
               TILE_PREFIX=server.prefix, TILE_QUERY=server.query, TILE_ENCODING=encoding or "")
    cmd = ["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{duration}s", "--timeout", "10s",
           "--latency", "-s", os.path.join(HERE, "wrk_tile_list.lua"), server.base]
    c0, s0, w0 = cpu_by_pid(server.p.pid), system_busy_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=duration + 120)
    c1, s1, w1 = cpu_by_pid(server.p.pid), system_busy_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN)
    per_process = {q: c1[q] - c0.get(q, 0.0) for q in c1}
    r = {"cmd": " ".join(cmd)}
    for line in p.stdout.splitlines():
        if line.startswith("WRKJSON "):
            r.update(json.loads(line[8:]))
        elif line.startswith("WRKCHECK "):
            r.update(json.loads(line[9:]))
        elif "Non-2xx or 3xx responses" in line:
            r["non_2xx"] = int(line.split(":")[1])
    if "requests" not in r:
        raise RuntimeError("wrk failed: " + (p.stdout + p.stderr)[-2000:])
    r.setdefault("non_2xx", 0)
    r["tiles_per_s"] = r["requests"] / (r["duration_us"] / 1e6)
    r["cpu_s"] = sum(per_process.values())
    # per process, busiest first: shows how uvicorn's workers shared the connections
    r["cpu_s_by_process"] = sorted((round(v, 1) for v in per_process.values()), reverse=True)
    r["cpu_s_per_1000"] = r["cpu_s"] * 1000 / max(1, r["requests"])
    r["wrk_cpu_s"] = (w1.ru_utime + w1.ru_stime) - (w0.ru_utime + w0.ru_stime)
    # CPU that neither the server nor wrk used during the run: other load on the machine
    r["other_cpu_s"] = max(0.0, (s1 - s0) - r["cpu_s"] - r["wrk_cpu_s"])
    r["loadavg_1m_after"] = os.getloadavg()[0]
    r["bytes_per_tile"] = r["bytes"] / max(1, r["requests"])
    r["socket_errors"] = sum(v for k, v in r["errors"].items() if k != "status")
    r["rss_mib_after"] = rss_mib(server.p.pid)
    return r


def bench(server, tiles, list_path, args):
    list_path = os.path.join(os.path.dirname(list_path), server.list_name)
    log(f"{server.name}: warm-up pass of {len(tiles)} tiles ...")
    w = warm(server, tiles)
    log(f"  {w['seconds']:.1f} s ({w['tiles_per_s']:.0f} tiles/s at 8 clients), "
        f"{len(w['problems'])} bad answers, {w['mean_bytes']:.0f} B/tile")
    for t, why in list(w["problems"].items())[:5]:
        log(f"  BAD {t}: {why}")
    runs = []
    for i in range(args.runs):
        r = wrk(server, list_path, args.duration, args.conns, args.threads, args.accept_encoding)
        log(f"  run {i + 1}: {r['tiles_per_s']:.1f} tiles/s, p50 {r['latency_us']['p50'] / 1000:.1f} ms, "
            f"p99 {r['latency_us']['p99'] / 1000:.1f} ms, non-2xx {r['non_2xx']}, not PNG {r['not_png']}, "
            f"socket errors {r['socket_errors']}, CPU {r['cpu_s_per_1000']:.2f} s/1000 tiles, "
            f"other load {r['other_cpu_s']:.1f} CPU s"
            + (f", CPU s by process {r['cpu_s_by_process']}" if len(r["cpu_s_by_process"]) > 1 else ""))
        runs.append(r)
    return {"server": server.name, "warmup": w, "runs": runs}


def snapshot(binary, data):
    dst = os.path.join(data, "zarr-serve.tiles-snapshot")
    shutil.copy2(binary, dst + ".tmp")
    os.replace(dst + ".tmp", dst)
    ver = subprocess.run([dst, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    return dst, {"path": os.path.abspath(binary), "version": ver,
                 "sha256": hashlib.sha256(open(dst, "rb").read()).hexdigest()[:16]}


def table(results, compare_rows, args, meta):
    out = ["# Map tiles: zarr-serve against xpublish-tiles (issue 28) and titiler-xarray (issue 45)", "",
           f"{meta['ntiles']} tiles (WebMercatorQuad z2-z6, {meta['list']}), variable `{VARIABLE}` "
           f"of `map.zarr` (721x1440 float32 per step, chunks 1x256x256, zstd), viridis, "
           f"range {args.rescale}; wrk -t{args.threads} -c{args.conns} -d{args.duration}s, "
           f"{args.runs} runs after a warm-up pass; {os.cpu_count()} cores shared by server and wrk.",
           f"zarr-serve: {meta['zarr_serve']['version']} ({meta['zarr_serve']['path']}, "
           f"sha256 {meta['zarr_serve']['sha256']}); xpublish-tiles {meta['xpublish_tiles']}, "
           f"xpublish {meta['xpublish']}, titiler-xarray {meta['titiler_xarray']}, "
           f"uvicorn {meta['uvicorn']}, Python {meta['python']}.", "",
           "| server | run | tiles/s | p50 ms | p99 ms | non-2xx | not PNG | socket errors | CPU s / 1000 tiles | bytes/tile | other load CPU s |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    means, cpus = {}, {}
    for res in results:
        for i, r in enumerate(res["runs"], 1):
            out.append(f"| {res['server']} | {i} | {r['tiles_per_s']:.1f} | {r['latency_us']['p50'] / 1000:.1f} "
                       f"| {r['latency_us']['p99'] / 1000:.1f} | {r['non_2xx']} | {r['not_png']} "
                       f"| {r['socket_errors']} | {r['cpu_s_per_1000']:.2f} | {r['bytes_per_tile']:.0f} "
                       f"| {r['other_cpu_s']:.1f} |")
        tps = [r["tiles_per_s"] for r in res["runs"]]
        means[res["server"]] = statistics.mean(tps)
        cpus[res["server"]] = statistics.mean(r["cpu_s_per_1000"] for r in res["runs"])
        out.append(f"| {res['server']} | mean | {statistics.mean(tps):.1f} | "
                   f"{statistics.mean(r['latency_us']['p50'] for r in res['runs']) / 1000:.1f} | "
                   f"{statistics.mean(r['latency_us']['p99'] for r in res['runs']) / 1000:.1f} | "
                   f"{sum(r['non_2xx'] for r in res['runs'])} | {sum(r['not_png'] for r in res['runs'])} | "
                   f"{sum(r['socket_errors'] for r in res['runs'])} | "
                   f"{statistics.mean(r['cpu_s_per_1000'] for r in res['runs']):.2f} | "
                   f"{statistics.mean(r['bytes_per_tile'] for r in res['runs']):.0f} | "
                   f"{statistics.mean(r['other_cpu_s'] for r in res['runs']):.1f} |")
    out.append("")
    zs = means.get("zarr-serve")
    for name, m in means.items():
        if name != "zarr-serve" and zs:
            out.append(f"- ratio zarr-serve / {name}: **{zs / m:.1f}x** tiles/s (mean of runs); "
                       f"server CPU a tile, {name} / zarr-serve: {cpus[name] / cpus['zarr-serve']:.1f}x")
    zruns = results[0]["runs"]
    for res in results:
        if any(len(r["cpu_s_by_process"]) > 1 for r in res["runs"]):
            out.append(f"- {res['server']}: server CPU seconds by process per run (uvicorn's master and "
                       f"helper at ~0; its workers share the listening socket, so wrk's connections "
                       f"may land unevenly on them): "
                       + "; ".join(str(r["cpu_s_by_process"]) for r in res["runs"]))
    out.append(f"- other load: CPU seconds used during the runs by neither the server nor wrk "
               f"(of {os.cpu_count()} x {args.duration} s per run); above a few seconds the run was disturbed")
    out.append(f"- issue 28 target (>= 100x xpublish-tiles, p99 < 50 ms): worst zarr-serve p99 "
               f"{max(r['latency_us']['p99'] for r in zruns) / 1000:.1f} ms")
    out.append("- warm-up pass (8 concurrent clients, first requests included): " + ", ".join(
        f"{res['server']} {res['warmup']['seconds']:.1f} s, {len(res['warmup']['problems'])} bad"
        for res in results))
    for peer, peer_rows in compare_rows.items():
        out += ["", f"Pixel agreement of zarr-serve (zs) with {peer} (RGB tolerance {args.tol} per channel; "
                "'over tol' counts pixels opaque in both whose RGB differs by more; 'RGBA over tol' "
                "also counts pixels transparent in one only):", "",
                "| tile | bytes zs / peer | transparent zs / peer | alpha mismatch | RGB over tol | RGBA over tol | mean abs RGB diff |",
                "|---|---|---|---:|---:|---:|---:|"]
        for c in peer_rows:
            if "error" in c:
                out.append(f"| {c['tile']} | error: {c['error']} | | | | | |")
                continue
            out.append(f"| {c['tile']} | {c['bytes'][0]} / {c['bytes'][1]} | {c['transparent'][0]:.3f} / "
                       f"{c['transparent'][1]:.3f} | {c['alpha_mismatch']:.4f} | {c['rgb_over_tol']:.4f} | "
                       f"{c['rgba_over_tol']:.4f} | {c['mean_abs_rgb']:.2f} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "dist", "zarr-serve"))
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--conns", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workers", default="1,2", help="uvicorn worker counts to try, comma-separated")
    ap.add_argument("--peers", default="xpublish,titiler", help="peers to run, comma-separated")
    ap.add_argument("--rescale", default="235,315", help="colour range given to both servers")
    ap.add_argument("--accept-encoding", default=None,
                    help="Accept-Encoding header wrk sends (default none, as wrk does)")
    ap.add_argument("--tol", type=int, default=8, help="per-channel RGB tolerance of the pixel comparison")
    args = ap.parse_args()
    data = os.path.abspath(args.data)
    if not os.path.isfile(os.path.join(data, "map.zarr", "zarr.json")):
        sys.exit(f"{data}/map.zarr missing: run bench/make_map_data.py {data}")
    list_path = os.path.join(data, "map_tiles.txt")
    tiles = tile_list(list_path, os.path.join(data, "map_tiles_xy.txt"))
    binary, zmeta = snapshot(args.bin, data)
    import importlib.metadata as md
    meta = {"zarr_serve": zmeta, "ntiles": len(tiles),
            "list": "all of z2 and z3, 80 seeded random tiles each at z4, z5, z6",
            "xpublish_tiles": md.version("xpublish-tiles"), "xpublish": md.version("xpublish"),
            "titiler_xarray": md.version("titiler-xarray"),
            "uvicorn": md.version("uvicorn"), "python": sys.version.split()[0]}
    t0 = time.time()
    results = []
    workers = [int(w) for w in args.workers.split(",") if w]
    step = latest_time_step(data)
    makers = {
        "xpublish": lambda w: XpublishTiles(sys.executable, data, args.rescale, w),
        "titiler": lambda w: Titiler(sys.executable, data, args.rescale, w, step),
    }
    peers = [p for p in args.peers.split(",") if p]
    zs = ZarrServe(binary, data, args.rescale)
    peer = None
    rows = {}
    try:
        results.append(bench(zs, tiles, list_path, args))
        for name in peers:
            for w in workers:
                peer = makers[name](w)
                if peer.name not in rows and w == workers[0]:
                    log(f"zarr-serve on {zs.base}, {peer.name} on {peer.base}; comparing {len(COMPARE)} tiles ...")
                    rows[peer.name] = compare(zs, peer, COMPARE, args.tol)
                    for c in rows[peer.name]:
                        log("  " + json.dumps(c))
                results.append(bench(peer, tiles, list_path, args))
                peer.stop()
                peer = None
    finally:
        if peer:
            peer.stop()
        zs.stop()
    md_text = table(results, rows, args, meta)
    md_text += f"\nRun time {time.time() - t0:.0f} s.\n"
    print(md_text)
    with open(os.path.join(data, "tiles_peer.md"), "w") as f:
        f.write(md_text)
    with open(os.path.join(data, "tiles_peer.json"), "w") as f:
        json.dump({"meta": meta, "args": vars(args), "compare": rows, "results": results}, f, indent=1)
    log(f"wrote {data}/tiles_peer.md and {data}/tiles_peer.json")


if __name__ == "__main__":
    main()
