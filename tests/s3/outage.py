#!/usr/bin/env python3
"""Stop and restart the S3 server (moto) under a running zarr-serve.

    python tests/s3/outage.py --bin target/release/zarr-serve --fixtures DIR/data.zarr

Starts moto on a free port, uploads the fixtures, starts zarr-serve with the
fixtures on S3 and the local sample dataset, then:
  1. reads a region (200);
  2. stops moto: the same dataset answers 503 with Retry-After (or 504),
     /readyz answers 503 naming it, the local dataset still answers 200;
  3. starts moto again on the same port and uploads the fixtures again (moto
     keeps objects in memory): the service recovers without a restart (200,
     /readyz 200).
Exits non-zero with the failed check. Needs AWS_* variables as in test-all.sh
(the endpoint is set here).
"""
import argparse
import http.client
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ARRAY = "zarr_python/shard_3d"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path)
    r = c.getresponse()
    return r.status, dict(r.getheaders()), r.read()


def wait(port, path="/", timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            return get(port, path)
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing answers on port {port}")


def start_moto(port, fixtures):
    moto = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "moto_server"),
                             "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait(port)
    subprocess.run([sys.executable, os.path.join(HERE, "upload.py"), f"http://127.0.0.1:{port}",
                    "outage", "data.zarr", fixtures], check=True, stdout=subprocess.DEVNULL)
    return moto


def check(what, cond, detail=""):
    print(f"{'ok' if cond else 'FAILED'}: {what} {detail}", flush=True)
    if not cond:
        raise SystemExit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--fixtures", required=True)
    a = ap.parse_args()
    s3_port, port = free_port(), free_port()
    env = dict(os.environ, AWS_ENDPOINT=f"http://127.0.0.1:{s3_port}", AWS_ALLOW_HTTP="true",
               ZARR_SERVE_STORE_TIMEOUT_SECS="3", ZARR_SERVE_STORE_RETRIES="1")
    moto = start_moto(s3_port, a.fixtures)
    server = subprocess.Popen([a.bin, "--listen", f"127.0.0.1:{port}", "--dataset", "s3=s3://outage/data.zarr",
                               "--dataset", f"local={os.path.join(ROOT, 'sample', 'sample.zarr')}"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait(port, "/healthz")
        region = f"/v1/datasets/s3/data/{ARRAY}?select=0:2"
        status, _, before = get(port, region)
        check("region read with the store up", status == 200, f"({status})")

        moto.send_signal(signal.SIGTERM)
        moto.wait(30)
        # A different region: its chunks are not in any cache.
        status, headers, body = get(port, f"/v1/datasets/s3/data/{ARRAY}?select=2:4")
        check("store down: 503 with Retry-After, or 504",
              (status == 503 and "retry-after" in {k.lower() for k in headers}) or status == 504,
              f"({status} {body[:120]!r})")
        status, _, body = get(port, "/readyz")
        check("store down: /readyz 503 naming the dataset", status == 503 and b"s3" in body, f"({status})")
        status, _, _ = get(port, "/v1/datasets/local/nodes/")
        check("store down: the other dataset still served", status == 200, f"({status})")

        moto = start_moto(s3_port, a.fixtures)
        deadline, status = time.time() + 20, None
        while time.time() < deadline:
            status, _, after = get(port, region)
            if status == 200:
                break
            time.sleep(0.5)
        check("store back: the service recovers by itself", status == 200 and after == before, f"({status})")
        status, _, body = get(port, "/readyz")
        check("store back: /readyz 200", status == 200, f"({status} {body[:120]!r})")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
        moto.kill()


if __name__ == "__main__":
    main()
