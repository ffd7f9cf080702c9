"""Icechunk writes (issue 43): a 128 MiB region written and committed
through the service, against icechunk-python + zarr-python writing the same
region to an identical repository in-process and committing.

    BENCH_SERVER_BIN=target/ci/zarr-serve .venv-dap/bin/python bench/icechunk_writes.py [--runs 3]

Each run makes two identical repositories (an array of shape 4096 x 8192
float32, chunks 512 x 1024, zstd level 3, empty), then writes the whole
array: the service from a body sent over loopback (wall time from the first
byte sent to the answer, which comes after the commit; the client shares
the 2 cores), icechunk-python with `a[...] = data` and `session.commit`.
One server serves every run, warmed by one untimed write and commit of the
same size. Dirty pages are written out (`sync`) before each timed write,
so that neither side pays for the other's writeback. Prints MB/s of each,
the ratio, and CPU seconds per GB (the
server's from /proc; the in-process writer's own). Both repositories are
read back and compared with the data.
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

import icechunk as ic
import numpy as np
import requests
import zarr
from zarr.codecs import ZstdCodec

SHAPE, CHUNKS = (4096, 8192), (512, 1024)


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def make(path):
    shutil.rmtree(path, ignore_errors=True)
    repo = ic.Repository.create(ic.local_filesystem_storage(str(path)))
    session = repo.writable_session("main")
    root = zarr.open_group(session.store, mode="w", zarr_format=3)
    root.create_array("a", shape=SHAPE, chunks=CHUNKS, dtype="float32", compressors=ZstdCodec(level=3), fill_value=0)
    session.commit("empty")
    return repo


def start(tmp, repos):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp / "config.toml"
    text = f'listen = "127.0.0.1:{port}"\nmax_request_bytes = 2147483648\nread_concurrency = 8\n'
    for name, path in repos.items():
        text += f'\n[datasets.{name}]\nurl = "icechunk+file://{path}"\nwritable = true\nwrite = ["*"]\n'
    config.write_text(text)
    server = subprocess.Popen([os.environ.get("BENCH_SERVER_BIN", "target/ci/zarr-serve"), "--config", str(config)],
                              stdout=open(tmp / "server.log", "w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            requests.get(f"{url}/healthz", timeout=1)
            return server, url
        except requests.RequestException:
            time.sleep(0.1)
    raise RuntimeError("the server did not start")


def put(url, name, body):
    r = requests.put(f"{url}/v1/datasets/{name}/data/a", params={"select": ":,:"}, data=body,
                     headers={"Content-Type": "application/octet-stream", "X-Commit-Message": "bench"}, timeout=600)
    assert r.status_code == 200, r.text


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    data = np.random.default_rng(0).random(SHAPE, dtype=np.float32)
    body = data.tobytes()
    mib, gb = data.nbytes / 2**20, data.nbytes / 1e9
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        repos = {"warm": tmp / "warm", "service": tmp / "service"}
        make(repos["warm"])
        server, url = start(tmp, repos)
        try:
            put(url, "warm", body)
            for run in range(args.runs):
                make(repos["service"])
                peer = make(tmp / "peer")
                pid = server.pid
                os.sync()  # neither side pays for the other's writeback
                cpu0, t0 = cpu_seconds(pid), time.perf_counter()
                put(url, "service", body)
                service_s, service_cpu = time.perf_counter() - t0, cpu_seconds(pid) - cpu0
                os.sync()
                c0, t0 = time.process_time(), time.perf_counter()
                session = peer.writable_session("main")
                zarr.open_group(session.store, mode="r+")["a"][...] = data
                session.commit("bench")
                peer_s, peer_cpu = time.perf_counter() - t0, time.process_time() - c0
                for path in [repos["service"], tmp / "peer"]:
                    repo = ic.Repository.open(ic.local_filesystem_storage(str(path)))
                    back = zarr.open_group(repo.readonly_session(branch="main").store, mode="r")["a"][...]
                    assert np.array_equal(back, data), f"{path} does not read back"
                rows.append((mib / service_s, mib / peer_s, service_cpu / gb, peer_cpu / gb))
                s, p, sc, pc = rows[-1]
                print(f"run {run + 1}: MB/s service {s:6.1f} | icechunk-python {p:6.1f} | ratio {s / p:.2f}"
                      f" | CPU s/GB: server {sc:.2f}, icechunk-python {pc:.2f}", flush=True)
        finally:
            server.kill()
            server.wait()
    med = [statistics.median(c) for c in zip(*rows)]
    print(f"median: MB/s service {med[0]:.1f}, icechunk-python {med[1]:.1f}; ratio {med[0] / med[1]:.2f};"
          f" CPU s/GB server {med[2]:.2f}, icechunk-python {med[3]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
