"""WMTS GetTile against the tile route (issue 44: GetTile within 5% of the
tile route's rate).

    BENCH_SERVER_BIN=target/ci/zarr-serve .venv-test/bin/python bench/wmts_tiles.py [--runs 3] [--duration 10] [--conns 16]

One zarr-serve serves the shipped `sample/climate.zarr`. wrk cycles through
the same WebMercatorQuad tiles (z0-z2, the zooms the WMTS capabilities list
for this 2-degree grid) as tile-route URLs and as key-value WMTS GetTile
URLs, alternating runs; every answer must be a 200 PNG, and a few tiles are
checked byte for byte first. Prints tiles/s, p50/p99 and the server's CPU
seconds per 1000 tiles of each run, and the ratios of the medians. The
server binary is BENCH_SERVER_BIN (default target/dist/zarr-serve).
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

import requests

from identity_tiles import ROOT, free_port, wrk

BIN = os.environ.get("BENCH_SERVER_BIN", os.path.join(ROOT, "target", "release", "zarr-serve"))
STYLE = "viridis"


def tiles():
    return [(z, y, x) for z in range(3) for y in range(2 ** z) for x in range(2 ** z)]


def wmts_query(z, y, x):
    return (f"SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=tas&STYLE={STYLE}&FORMAT=image/png"
            f"&TILEMATRIXSET=WebMercatorQuad&TILEMATRIX={z}&TILEROW={y}&TILECOL={x}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--conns", type=int, default=16)
    args = ap.parse_args()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    climate = os.path.join(ROOT, "sample", "climate.zarr")
    with tempfile.TemporaryDirectory() as tmp:
        lists = {"tile route": os.path.join(tmp, "route.txt"), "WMTS GetTile": os.path.join(tmp, "wmts.txt")}
        with open(lists["tile route"], "w") as f:
            f.write("".join(f"{z}/{y}/{x}\n" for z, y, x in tiles()))
        with open(lists["WMTS GetTile"], "w") as f:
            f.write("".join(wmts_query(*t) + "\n" for t in tiles()))
        server = subprocess.Popen([BIN, "--listen", f"127.0.0.1:{port}", "--dataset", f"climate={climate}"],
                                  env=dict(os.environ, ZARR_SERVE_LOG_LEVEL="warn"),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    requests.get(f"{base}/healthz", timeout=1)
                    break
                except requests.RequestException:
                    time.sleep(0.1)
            route_prefix = f"{base}/v1/datasets/climate/tiles/WebMercatorQuad/"
            route_query = f"?variable=tas&colormap={STYLE}"
            for t in [(0, 0, 0), (2, 1, 3)]:
                a = requests.get(f"{route_prefix}{t[0]}/{t[1]}/{t[2]}{route_query}", timeout=30)
                b = requests.get(f"{base}/v1/datasets/climate/wmts?{wmts_query(*t)}", timeout=30)
                assert a.status_code == b.status_code == 200 and a.content == b.content, t
            prefixes = {"tile route": (route_prefix, route_query),
                        "WMTS GetTile": (f"{base}/v1/datasets/climate/wmts?", "")}

            def run(name, duration):
                prefix, query = prefixes[name]
                return wrk(prefix, lists[name], None, duration, args.conns, server.pid, query=query)

            for name in prefixes:
                run(name, 3)  # warm-up
            runs = {name: [] for name in prefixes}
            for _ in range(args.runs):
                for name in prefixes:
                    runs[name].append(run(name, args.duration))
        finally:
            server.terminate()
            server.wait()
    print(f"WebMercatorQuad z0-z2 of sample/climate.zarr, wrk {args.conns} connections, {args.duration} s a run")
    print(f"{'run':<13} {'tiles/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'CPU s/1000':>11}")
    for name, rs in runs.items():
        for r in rs:
            print(f"{name:<13} {r['tiles_per_s']:>9.0f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} "
                  f"{r['cpu_s_per_1000']:>11.3f}")
    rate = {name: statistics.median(r["tiles_per_s"] for r in rs) for name, rs in runs.items()}
    cpu = {name: statistics.median(r["cpu_s_per_1000"] for r in rs) for name, rs in runs.items()}
    print(f"median tiles/s: tile route {rate['tile route']:.0f}, WMTS {rate['WMTS GetTile']:.0f}: "
          f"WMTS/route = {rate['WMTS GetTile'] / rate['tile route']:.3f}")
    print(f"median server CPU s per 1000 tiles: tile route {cpu['tile route']:.3f}, WMTS {cpu['WMTS GetTile']:.3f}: "
          f"ratio {cpu['WMTS GetTile'] / cpu['tile route']:.3f}")


if __name__ == "__main__":
    main()
