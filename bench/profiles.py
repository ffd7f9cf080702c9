#!/usr/bin/env python3
"""The two build profiles on the same requests (issue 45): Cargo.toml's `release` (what
the quick start's `cargo run --release` builds: optimised, no optimisation across crates)
against `dist` (fat LTO, one code-generation unit: the Dockerfile and the benchmarks).

    python bench/profiles.py release=target/release/zarr-serve dist=target/dist/zarr-serve
                             [--runs 3] [--duration 10]

Any two binaries can be set against each other the same way (NAME=PATH, the second over
the first in the ratios): the code before and after a change, say.

Run with .venv-tiles-bench's Python after bench/tiles_peer.sh and bench/edr_peer.sh have
made their data: bench-data/map.zarr with its tile list, and .cache/bench-edr (the EDR
store and its position and area lists). One server at a time, the two binaries
alternating, --runs rounds of:

  tiles     wrk -t2 -c32 over bench-data/map_tiles.txt (PNG, viridis, fixed range), after
            one untimed pass (what bench/tiles_peer.sh asks)
  position  wrk -t1 -c1 over the EDR position list (each a 10-year daily series)
  area      wrk -t1 -c1 over the EDR area list (a year of ~200 cells)
  bulk      curl of the binary region time 365:1460 of the EDR store (284 MB) to /dev/null
  dap2      the same region as a DAP2 .dods hyperslab, curl to /dev/null
  icechunk  curl of the binary region select=0:32 (128 MiB) of bench/icechunk_peer.sh's
            Icechunk repository (.cache/bench-icechunk/repo), when it has been made

and prints, per profile, the median of the runs: requests (or MB) a second and the
server's CPU seconds a request (or a GB), from /proc; then dist / release. Everything
listens on 127.0.0.1. Never runs cargo.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

from tiles_peer import HERE, ROOT, Proc, cpu_by_pid, free_port, get

EDR_DATA = os.path.join(ROOT, ".cache", "bench-edr")
ICECHUNK_DATA = os.path.join(ROOT, ".cache", "bench-icechunk")
BULK = "/v1/datasets/edr/data/tas?select=365:1460,:,:&format=binary"
DODS = "/v1/datasets/edr/dap.dods?tas[365:1459][0:179][0:359]"
ICECHUNK = "/v1/datasets/icechunk/data/field?select=0:32&format=binary"


class Server(Proc):
    def __init__(self, name, binary, tiles_data, edr_store):
        self.name = name
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.logpath = os.path.join(tiles_data, f"profiles-{name}.log")
        env = dict(os.environ, ZARR_SERVE_LOG_LEVEL="warn")
        datasets = ["--dataset", f"map={os.path.join(tiles_data, 'map.zarr')}",
                    "--dataset", f"edr={edr_store}"]
        if has_icechunk():
            datasets += ["--dataset", f"icechunk=icechunk+file://{ICECHUNK_DATA}/repo"]
        self.start([binary, "--listen", f"127.0.0.1:{self.port}", *datasets], env, tiles_data, "/readyz")


def has_icechunk():
    return os.path.exists(os.path.join(ICECHUNK_DATA, "complete"))


def cpu(server):
    return sum(cpu_by_pid(server.p.pid).values())


def wrk(server, script, env, conns, threads, duration):
    env = dict(os.environ, WRK_DONE_LUA=os.path.join(HERE, "wrk_done.lua"), **env)
    cmd = ["wrk", "-t", str(threads), "-c", str(conns), "-d", f"{duration}s", "--timeout", "60s",
           "-s", os.path.join(HERE, script), server.base]
    c0 = cpu(server)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=duration + 120).stdout
    c1 = cpu(server)
    r = {}
    for line in out.splitlines():
        for tag in ("WRKJSON ", "WRKCHECK "):
            if line.startswith(tag):
                r.update(json.loads(line[len(tag):]))
    if not r.get("requests") or r.get("bad", 0) + r.get("not_png", 0) + r.get("non_200", 0):
        raise RuntimeError(f"{server.name}: wrk {script}: {out[-1500:]}")
    n = r["requests"]
    return n / (r["duration_us"] / 1e6), (c1 - c0) / n


def tiles(server, args):
    env = {"TILE_LIST": os.path.join(args.tiles_data, "map_tiles.txt"),
           "TILE_PREFIX": "/v1/datasets/map/tiles/WebMercatorQuad/",
           "TILE_QUERY": "?variable=t2m&colormap=viridis&rescale=235,315", "TILE_ENCODING": ""}
    return wrk(server, "wrk_tile_list.lua", env, 32, 2, args.duration)


def edr(query):
    def run(server, args):
        env = {"EDR_LIST": os.path.join(EDR_DATA, f"{query}.zs.list")}
        return wrk(server, "wrk_edr_list.lua", env, 1, 1, args.duration)
    return run


def download(path):
    """One GET of `path` to /dev/null: MB/s and the server's CPU-s a GB."""
    def run(server, args):
        c0 = cpu(server)
        t0 = time.perf_counter()
        out = subprocess.run(["curl", "-gs", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                              server.base + path], capture_output=True, text=True, timeout=600).stdout
        wall = time.perf_counter() - t0
        c1 = cpu(server)
        code, size = out.split()
        if code != "200":
            raise RuntimeError(f"{server.name}: {path} answered {code}")
        gb = int(size) / 1e9
        return gb * 1e3 / wall, (c1 - c0) / gb
    return run


MEASURES = [("tiles", "tiles/s", "CPU-s/1000 tiles", 1000, tiles),
            ("position", "req/s", "CPU-ms/req", 1000, edr("position")),
            ("area", "req/s", "CPU-ms/req", 1000, edr("area")),
            ("bulk", "MB/s", "CPU-s/GB", 1, download(BULK)),
            ("dap2", "MB/s", "CPU-s/GB", 1, download(DODS))]
if has_icechunk():
    MEASURES.append(("icechunk", "MB/s", "CPU-s/GB", 1, download(ICECHUNK)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binaries", nargs=2, metavar="NAME=PATH", help="the two binaries, the second over the first")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--tiles-data", default=os.path.join(ROOT, "bench-data"))
    args = ap.parse_args()
    stores = glob.glob(os.path.join(EDR_DATA, "edr-365x45x45.zarr"))
    if not stores or not os.path.isfile(os.path.join(args.tiles_data, "map_tiles.txt")):
        sys.exit("run bench/tiles_peer.sh and bench/edr_peer.sh first (their data)")
    binaries = dict(b.split("=", 1) for b in args.binaries)
    a, b = binaries
    figures = {p: {m[0]: [] for m in MEASURES} for p in binaries}
    for run in range(args.runs):
        for profile, binary in binaries.items():
            server = Server(profile, binary, args.tiles_data, stores[0])
            try:
                tiles(server, args)  # the untimed pass
                for name, _, _, scale, measure in MEASURES:
                    rate, cost = measure(server, args)
                    figures[profile][name].append((rate, cost * scale))
                    print(f"  run {run + 1} {profile:10} {name:9} {rate:9.1f} {cost * scale:9.3f}",
                          file=sys.stderr, flush=True)
            finally:
                server.stop()
    print(f"Two binaries on the same requests ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
          f"{args.runs} alternating runs, medians): {a} = {binaries[a]}, {b} = {binaries[b]}\n")
    print(f"| workload | rate | {a} | {b} | {b} / {a} | server CPU | {a} | {b} | {b} / {a} |")
    print("|---|---|---:|---:|---:|---|---:|---:|---:|")
    for name, rate_unit, cost_unit, _, _ in MEASURES:
        r = [statistics.median(v[i] for v in figures[a][name]) for i in (0, 1)]
        d = [statistics.median(v[i] for v in figures[b][name]) for i in (0, 1)]
        print(f"| {name} | {rate_unit} | {r[0]:.1f} | {d[0]:.1f} | {d[0] / r[0]:.3f} | {cost_unit} | "
              f"{r[1]:.3f} | {d[1]:.3f} | {d[1] / r[1]:.3f} |")
    print("\neach run: " + "; ".join(f"{p} {n} " + " / ".join(f"{v[0]:.1f}" for v in figures[p][n])
                                     for p in binaries for n in figures[p]))


if __name__ == "__main__":
    main()
