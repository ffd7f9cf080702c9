"""A 128 MiB region from an Icechunk repository (issue 31), three ways, in one run:

  - zarr-serve serving the Icechunk repository (`icechunk+file://`),
  - zarr-serve serving the same array stored as plain Zarr v3 (the same chunks,
    the same codecs, written by the same zarr-python call),
  - icechunk-python + zarr-python reading the region in-process.

    bench/icechunk_peer.sh            (wraps this: the venv, the binary, three runs)
    python bench/icechunk_peer.py --bin target/dist/zarr-serve --data .cache/bench-icechunk

The array: `field` float32 (64, 1024, 1024) = 256 MiB decoded, chunks (8, 256, 256)
(2 MiB), zstd level 3, smooth values with noise (compresses to about 60%); the region
`select=0:32` is 128 MiB. Before timing, each server's answer is compared with
zarr-python's read of the plain store, byte for byte.

For each way: the wall time of READS reads (each its own request; the client reads
the body into one preallocated buffer), their median and MB/s; for the server, its
CPU seconds for exactly those requests (utime + stime of every thread, from /proc,
before and after); for in-process, the process's CPU seconds. The ratios the issue
names: Icechunk served / plain served (target at least 0.9) and Icechunk served /
icechunk-python in-process (target at least 1.0), as throughput, wall clock.
"""
import argparse
import http.client
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

import icechunk as ic
import numpy as np
import zarr
from zarr.codecs import ZstdCodec

SHAPE = (64, 1024, 1024)
CHUNKS = (8, 256, 256)
REGION = (slice(0, 32),)
SELECT = "0:32"


def make_data(root):
    marker = os.path.join(root, "complete")
    if os.path.exists(marker):
        return
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    rng = np.random.default_rng(31)
    y, x = np.mgrid[0:SHAPE[1], 0:SHAPE[2]].astype("float32") / 64.0
    planes = [(np.sin(x + t / 5) * np.cos(y - t / 7) * 20 + rng.standard_normal(x.shape).astype("float32"))
              .astype("float32") for t in range(SHAPE[0])]
    data = np.stack(planes)

    def write(store):
        array = zarr.create_array(store, name="field", shape=SHAPE, chunks=CHUNKS, dtype="float32",
                                  compressors=[ZstdCodec(level=3)], fill_value=0.0, zarr_format=3,
                                  dimension_names=["t", "y", "x"])
        array[:] = data

    write(zarr.storage.LocalStore(os.path.join(root, "plain.zarr")))
    repo = ic.Repository.create(ic.local_filesystem_storage(os.path.join(root, "repo")))
    session = repo.writable_session("main")
    write(session.store)
    session.commit("bench data")
    open(marker, "w").close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """utime + stime of every thread of `pid`."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick


def fetch(port, path, buffer):
    """GET `path`, reading the body into `buffer`; returns its length."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn.request("GET", path)
    response = conn.getresponse()
    if response.status != 200:
        raise SystemExit(f"{path}: {response.status} {response.read()[:300]!r}")
    view = memoryview(buffer)
    got = 0
    while True:
        n = response.readinto(view[got:])
        if not n:
            break
        got += n
    conn.close()
    return got


def served(args, port, dataset, buffer, reads):
    path = f"/v1/datasets/{dataset}/data/field?select={SELECT}&format=binary"
    fetch(port, path, buffer)  # warm-up
    walls = []
    before = cpu_seconds(args.pid)
    for _ in range(reads):
        start = time.perf_counter()
        n = fetch(port, path, buffer)
        walls.append(time.perf_counter() - start)
    cpu = cpu_seconds(args.pid) - before
    return walls, cpu, n


def in_process(root, reads):
    repo = ic.Repository.open(ic.local_filesystem_storage(os.path.join(root, "repo")))
    array = zarr.open_array(repo.readonly_session(branch="main").store, path="field", mode="r")
    array[REGION]  # warm-up
    walls = []
    cpu0 = time.process_time()
    for _ in range(reads):
        start = time.perf_counter()
        out = array[REGION]
        walls.append(time.perf_counter() - start)
    return walls, time.process_time() - cpu0, out.nbytes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--reads", type=int, default=5)
    args = parser.parse_args()
    root = os.path.abspath(args.data)
    make_data(root)
    want = zarr.open_array(zarr.storage.LocalStore(os.path.join(root, "plain.zarr")), path="field", mode="r")[REGION]
    buffer = bytearray(want.nbytes)
    port = free_port()
    server = subprocess.Popen([args.bin, "--listen", f"127.0.0.1:{port}",
                               "--dataset", f"icechunk=icechunk+file://{root}/repo",
                               "--dataset", f"plain={root}/plain.zarr"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    args.pid = server.pid
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        for dataset in ("icechunk", "plain"):
            n = fetch(port, f"/v1/datasets/{dataset}/data/field?select={SELECT}&format=binary", buffer)
            if n != want.nbytes or bytes(buffer) != want.tobytes():
                raise SystemExit(f"{dataset}: the served region differs from zarr-python's read")
        rows = {}
        # Alternate, so drift in the machine's load touches each alike.
        rows["zarr-serve, Icechunk"] = served(args, port, "icechunk", buffer, args.reads)
        rows["zarr-serve, plain Zarr v3"] = served(args, port, "plain", buffer, args.reads)
        rows["icechunk-python + zarr-python"] = in_process(root, args.reads)
    finally:
        server.kill()
        server.wait()
    mb = want.nbytes / 1e6
    print(f"region {SELECT} of {SHAPE} float32 = {want.nbytes / 2**20:.0f} MiB, chunks {CHUNKS}, zstd 3; "
          f"{args.reads} reads each after one warm-up")
    print(f"{'way':34} {'median s':>9} {'MB/s':>7} {'CPU s/read':>11} {'CPU s/GB':>9}")
    medians = {}
    for name, (walls, cpu, _) in rows.items():
        median = statistics.median(walls)
        medians[name] = median
        print(f"{name:34} {median:9.3f} {mb / median:7.0f} {cpu / len(walls):11.3f} {cpu / len(walls) / (mb / 1000):9.2f}")
    ice, plain, python = (medians[k] for k in rows)
    print(f"Icechunk served / plain served (throughput): {plain / ice:.2f}x (target >= 0.9)")
    print(f"Icechunk served / icechunk-python in-process (throughput): {python / ice:.2f}x (target >= 1.0)")


if __name__ == "__main__":
    sys.exit(main())
