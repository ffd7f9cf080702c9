#!/usr/bin/env python3
"""In-process peers of zarr-serve on the benchmark data: tensorstore and zarr-python.

Usage: python bench/peers.py [--data DIR] [--n 3] [--no-whole] [--tiles 200]

For each library, in its own subprocess (so peak RSS is per library and per read):
  region  volume[100:356, 200:712, 300:812]   (128 MiB decoded)  best of N
  whole   volume[...]                         (1 GiB decoded)    best of N   (--no-whole skips)
          both also with the process's CPU-s (all threads, time.process_time) of each read
  tile    single 256x256 inner chunks of tiles, random, one thread: median and p99 µs
  points  volume.vindex[10,000 seeded random points] (bench_points), best of N
  mean    volume read whole, then numpy.mean in float64 (what reduce=mean answers), best of N
Prints one JSON document: MB/s = decoded output bytes / 1e6 / best wall time, the
sha256 of the decoded region (C order, little-endian) so the HTTP output can be
checked against it, and each worker's peak RSS (ru_maxrss).
Page cache is whatever it is (warm after make_data.py); no library cache is enabled.
"""
import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
import warnings

REGION = (slice(100, 356), slice(200, 712), slice(300, 812))
REGION_STR = "100:356,200:712,300:812"
VOLUME_SHAPE = (512, 1024, 1024)
N_POINTS = 10_000


def bench_points():
    """The points of the point-selection benchmark: seeded, uniform over the volume."""
    import numpy as np
    rng = np.random.default_rng(13)
    return np.stack([rng.integers(0, n, size=N_POINTS) for n in VOLUME_SHAPE], axis=1)


def worker(lib, what, data, n, ntiles):
    warnings.filterwarnings("ignore")
    import numpy as np
    path = os.path.join(data, "bench.zarr")
    if lib == "tensorstore":
        import tensorstore as ts

        def open_(name):
            return ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": os.path.join(path, name)}},
                           read=True).result()

        def read(arr, sel):
            return arr[sel].read().result()

        def vindex(arr, pts):
            return arr.vindex[tuple(pts.T)].read().result()
        import importlib.metadata
        version = importlib.metadata.version("tensorstore")
    else:
        import zarr

        def open_(name):
            return zarr.open_array(os.path.join(path, name), mode="r")

        def read(arr, sel):
            return arr[sel]

        def vindex(arr, pts):
            return arr.vindex[tuple(pts.T)]
        version = zarr.__version__

    out = {"lib": lib, "version": version, "what": what}
    if what in ("region", "whole"):
        arr = open_("volume")
        sel = REGION if what == "region" else (slice(None),) * 3
        times, cpus = [], []
        res = None
        for _ in range(n):
            res = None
            c0, t0 = time.process_time(), time.perf_counter()
            res = read(arr, sel)
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        res = np.ascontiguousarray(res, dtype="<u2")
        out.update(times_s=times, best_s=min(times), bytes=res.nbytes,
                   mb_per_s=res.nbytes / 1e6 / min(times), shape=list(res.shape),
                   cpu_s=cpus, least_cpu_s=min(cpus))
        if what == "region":
            out["sha256"] = hashlib.sha256(res.data).hexdigest()
    elif what == "mean":
        arr = open_("volume")
        times, value = [], None
        for _ in range(n):
            t0 = time.perf_counter()
            whole = read(arr, (slice(None),) * 3)
            value = float(np.mean(whole, dtype="float64"))
            del whole
            times.append(time.perf_counter() - t0)
        out.update(times_s=times, best_s=min(times), mean=value)
    elif what == "points":
        arr = open_("volume")
        pts = bench_points()
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            res = vindex(arr, pts)
            times.append(time.perf_counter() - t0)
        res = np.ascontiguousarray(res, dtype="<u2")
        out.update(times_s=times, best_s=min(times), points=len(pts), sha256=hashlib.sha256(res.data).hexdigest())
    else:  # tile
        arr = open_("tiles")
        rng = np.random.default_rng(7)
        rc = rng.integers(0, 32, size=(ntiles, 2))
        lat = []
        for r, c in rc:
            t0 = time.perf_counter()
            read(arr, (slice(r * 256, (r + 1) * 256), slice(c * 256, (c + 1) * 256)))
            lat.append(time.perf_counter() - t0)
        lat_us = sorted(x * 1e6 for x in lat[len(lat) // 10:])  # first 10% = warm-up
        out.update(reads=len(lat_us), p50_us=lat_us[len(lat_us) // 2],
                   p99_us=lat_us[min(len(lat_us) - 1, int(len(lat_us) * 0.99))])
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench-data"))
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--no-whole", action="store_true")
    ap.add_argument("--tiles", type=int, default=200)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--worker", nargs=2, metavar=("LIB", "WHAT"))
    a = ap.parse_args()
    data = os.path.abspath(a.data)
    if a.worker:
        worker(a.worker[0], a.worker[1], data, a.n, a.tiles)
        return
    results = {"region": REGION_STR, "n": a.n, "peers": []}
    whats = ["region"] + ([] if a.no_whole else ["whole"]) + (["tile"] if a.tiles else []) + ["points"] + ([] if a.no_whole else ["mean"])
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    for lib in ("tensorstore", "zarr-python"):
        for what in whats:
            cmd = [sys.executable, os.path.abspath(__file__), "--data", data, "--n", str(a.n),
                   "--tiles", str(a.tiles), "--worker", lib, what]
            t0 = time.perf_counter()
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env)
                if p.returncode != 0:
                    raise RuntimeError(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}")
                r = json.loads(p.stdout.strip().splitlines()[-1])
            except Exception as e:  # keep going: one failing peer must not lose the others
                r = {"lib": lib, "what": what, "error": str(e)}
            r["wall_s"] = time.perf_counter() - t0
            results["peers"].append(r)
            print(f"  peers: {lib} {what}: " + (f"{r['mb_per_s']:.0f} MB/s" if "mb_per_s" in r else
                  f"p50 {r['p50_us']:.0f} µs" if "p50_us" in r else
                  f"{r['best_s']:.2f} s" if "best_s" in r else r.get("error", "?")), file=sys.stderr)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
