"""Region writes (issue 42): a 128 MiB region PUT into a sharded zstd
float32 array through the service, against zarr-python 3 and tensorstore
writing the same region to an identical store in-process; and the peak RSS
of the server during a 1 GiB PUT.

    BENCH_SERVER_BIN=target/ci/zarr-serve .venv-test/bin/python bench/writes.py [--runs 3] [--skip-big]

Each run makes three identical empty arrays (shape 4096 x 8192 float32,
shards 1024 x 2048, inner chunks 256 x 256, zstd level 3, the same
random data), then writes the whole array: the service from a body sent
over loopback by `requests` (wall time from the first byte sent to the
answer; the client shares the 2 cores), zarr-python with `a[...] = data`,
tensorstore with `write(...).result()`. Prints MB/s of each and the
service's ratios, and the server's CPU seconds per GB. One server serves
every run, warmed by one untimed PUT of the same size first, as a
long-running service is (the libraries are warm in-process after their
first run too).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import requests
import tensorstore as ts
import zarr
from zarr.codecs import ZstdCodec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "writes"))
from server import Server  # noqa: E402

SHAPE, SHARDS, CHUNKS = (4096, 8192), (1024, 2048), (256, 256)


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def make(root, name, shape=SHAPE, shards=SHARDS):
    group = zarr.open_group(str(root), mode="a")
    return group.create_array(name, shape=shape, chunks=CHUNKS, shards=shards, dtype="float32",
                              compressors=ZstdCodec(level=3), fill_value=0)


def one_run(tmp, data, server):
    root = tmp / "data.zarr"
    for name in ["service", "zarr", "tensorstore"]:
        shutil.rmtree(root / name, ignore_errors=True)
        make(root, name)
    mib = data.nbytes / 2**20
    body = data.tobytes()
    cpu0, t0 = cpu_seconds(server.proc.pid), time.perf_counter()
    r = server.put("service", ":,:", body)
    service_s, cpu = time.perf_counter() - t0, cpu_seconds(server.proc.pid) - cpu0
    assert r.status_code == 200, r.text
    a = zarr.open_array(str(root / "zarr"), mode="r+")
    c0, t0 = time.process_time(), time.perf_counter()
    a[...] = data
    zarr_s, zarr_cpu = time.perf_counter() - t0, time.process_time() - c0
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(root / "tensorstore")}}).result()
    c0, t0 = time.process_time(), time.perf_counter()
    t.write(data).result()
    ts_s, ts_cpu = time.perf_counter() - t0, time.process_time() - c0
    back = zarr.open_array(str(root / "service"), mode="r")[...]
    assert np.array_equal(back, data), "the service's write does not read back"
    gb = data.nbytes / 1e9
    return mib / service_s, mib / zarr_s, mib / ts_s, cpu / gb, zarr_cpu / gb, ts_cpu / gb


def big_put(tmp):
    """Peak RSS of the server during a 1 GiB PUT (shape 16384 x 16384)."""
    root = tmp / "big.zarr"
    shutil.rmtree(root, ignore_errors=True)
    make(root, "big", shape=(16384, 16384), shards=(1024, 4096))
    data = np.random.default_rng(1).random((16384, 16384), dtype=np.float32)
    server = Server(tmp, root, extra="max_request_bytes = 1073741824")
    try:
        before = peak_rss_mib(server.proc.pid)
        t0 = time.perf_counter()
        r = server.put("big", ":,:", data.tobytes())
        elapsed = time.perf_counter() - t0
        assert r.status_code == 200, r.text
        peak = peak_rss_mib(server.proc.pid)
    finally:
        server.stop()
    return before, peak, elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-big", action="store_true")
    args = parser.parse_args()
    data = np.random.default_rng(0).random(SHAPE, dtype=np.float32)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        root = tmp / "data.zarr"
        make(root, "warm-up")
        server = Server(tmp, root, extra="read_concurrency = 8\nmax_request_bytes = 2147483648")
        try:
            assert server.put("warm-up", ":,:", data.tobytes()).status_code == 200
            for run in range(args.runs):
                s, z, t, cpu, zcpu, tcpu = one_run(tmp, data, server)
                rows.append((s, z, t, cpu, zcpu, tcpu))
                print(f"run {run + 1}: MB/s service {s:6.1f} | zarr-python {z:6.1f} | tensorstore {t:6.1f}"
                      f" | ratios {s / z:.2f} {s / t:.2f} | CPU s/GB: server {cpu:.2f}, zarr-python {zcpu:.2f},"
                      f" tensorstore {tcpu:.2f}", flush=True)
        finally:
            server.stop()
        med = [statistics.median(c) for c in zip(*rows)]
        print(f"median: MB/s service {med[0]:.1f}, zarr-python {med[1]:.1f}, tensorstore {med[2]:.1f};"
              f" ratios {med[0] / med[1]:.2f} and {med[0] / med[2]:.2f}; CPU s/GB server {med[3]:.2f},"
              f" zarr-python {med[4]:.2f}, tensorstore {med[5]:.2f}")
        if not args.skip_big:
            before, peak, elapsed = big_put(tmp)
            print(f"1 GiB PUT: {elapsed:.1f} s, server peak RSS {peak:.0f} MiB (at start {before:.0f} MiB)")


if __name__ == "__main__":
    main()
