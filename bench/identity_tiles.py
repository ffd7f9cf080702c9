"""Map tiles with a valid JWT on every request against the same tiles
anonymous (issue 41: token verification must not be the bottleneck).

    .venv-test/bin/python bench/identity_tiles.py [--runs 3] [--duration 10] [--conns 16]

One zarr-serve serves the shipped `sample/climate.zarr` twice: `open`
(readable by anyone) and `guarded` (read = ["authenticated"], with an OIDC
issuer served here: discovery and an RS256 key set). wrk cycles through the
same tile list on each, alternating open and guarded runs, the guarded runs
sending `Authorization: Bearer <JWT>` (one token, as a client does). Prints
tiles/s, p50/p99 and the server's CPU seconds per 1000 tiles for each run,
and the ratio of the medians. The server binary is BENCH_SERVER_BIN
(default target/dist/zarr-serve).
"""
import argparse
import http.server
import json
import os
import re
import socket
import statistics
import subprocess
import tempfile
import threading
import time

import jwt
import requests
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("BENCH_SERVER_BIN", os.path.join(ROOT, "target", "release", "zarr-serve"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def issuer(jwk):
    """Serve discovery and the key set on a free port; its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    docs = {
        "/.well-known/openid-configuration": {"issuer": url, "jwks_uri": f"{url}/jwks"},
        "/jwks": {"keys": [jwk]},
    }

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(docs.get(self.path, {})).encode()
            self.send_response(200 if self.path in docs else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return url


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tiles():
    """Every tile of z0-z3 and the z4 tiles over the grid's middle."""
    out = [f"{z}/{y}/{x}" for z in range(4) for y in range(2 ** z) for x in range(2 ** z)]
    out += [f"4/{y}/{x}" for y in range(4, 12) for x in range(16)]
    return out


def wrk(url_prefix, tile_list, auth, duration, conns, pid, query="?variable=tas&rescale=220,320"):
    env = dict(os.environ, TILE_LIST=tile_list, TILE_PREFIX=url_prefix, TILE_QUERY=query,
               TILE_AUTH=auth or "", WRK_DONE_LUA=os.path.join(ROOT, "bench", "wrk_done.lua"))
    base = re.match(r"(http://[^/]+)", url_prefix).group(1)
    before = cpu_seconds(pid)
    out = subprocess.run(["wrk", "-t", "2", "-c", str(conns), "-d", f"{duration}s", "--latency",
                          "-s", os.path.join(ROOT, "bench", "wrk_tile_list.lua"), base],
                         env=env, capture_output=True, text=True, check=True).stdout
    cpu = cpu_seconds(pid) - before
    summary = json.loads(re.search(r"WRKJSON (.*)", out).group(1))
    check = json.loads(re.search(r"WRKCHECK (.*)", out).group(1))
    assert check["non_200"] == 0 and check["not_png"] == 0, check
    n = summary["requests"]
    return {"tiles_per_s": n / (summary["duration_us"] / 1e6), "p50_ms": summary["latency_us"]["p50"] / 1000,
            "p99_ms": summary["latency_us"]["p99"] / 1000, "cpu_s_per_1000": cpu / n * 1000}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--conns", type=int, default=16)
    args = ap.parse_args()

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key))
    jwk.update(kid="bench", use="sig", alg="RS256")
    iss = issuer(jwk)
    now = int(time.time())
    token = jwt.encode({"iss": iss, "aud": "zarr-serve", "sub": "bench", "exp": now + 3600}, key, "RS256",
                       headers={"kid": "bench"})

    port = free_port()
    climate = os.path.join(ROOT, "sample", "climate.zarr")
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "config.toml")
        with open(config, "w") as f:
            f.write(f'listen = "127.0.0.1:{port}"\nlog_level = "warn"\n'
                    f'[auth.oidc]\nissuer = "{iss}"\naudience = "zarr-serve"\n'
                    f'[datasets.open]\nurl = "{climate}"\n'
                    f'[datasets.guarded]\nurl = "{climate}"\nread = ["authenticated"]\n')
        tile_list = os.path.join(tmp, "tiles.txt")
        with open(tile_list, "w") as f:
            f.write("\n".join(tiles()) + "\n")
        server = subprocess.Popen([BIN, "--config", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(100):
                try:
                    requests.get(f"{base}/healthz", timeout=1)
                    break
                except requests.RequestException:
                    time.sleep(0.1)
            headers = {"Authorization": f"Bearer {token}"}
            assert requests.get(f"{base}/v1/datasets/guarded/nodes", timeout=10).status_code == 401
            assert requests.get(f"{base}/v1/datasets/guarded/nodes", headers=headers, timeout=10).status_code == 200
            prefix = f"{base}/v1/datasets/{{}}/tiles/WebMercatorQuad/"
            # One warm-up pass each (tiles cached in the decoded-chunk cache alike).
            wrk(prefix.format("open"), tile_list, None, 3, args.conns, server.pid)
            wrk(prefix.format("guarded"), tile_list, f"Bearer {token}", 3, args.conns, server.pid)
            runs = {"anonymous": [], "JWT": []}
            for _ in range(args.runs):
                runs["anonymous"].append(wrk(prefix.format("open"), tile_list, None, args.duration, args.conns,
                                             server.pid))
                runs["JWT"].append(wrk(prefix.format("guarded"), tile_list, f"Bearer {token}", args.duration,
                                       args.conns, server.pid))
        finally:
            server.terminate()
            server.wait()
    print(f"tiles of sample/climate.zarr, wrk {args.conns} connections, {args.duration} s a run, {args.runs} runs each")
    print(f"{'run':<10} {'tiles/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'CPU s/1000':>11}")
    for name, rs in runs.items():
        for r in rs:
            print(f"{name:<10} {r['tiles_per_s']:>9.0f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} "
                  f"{r['cpu_s_per_1000']:>11.3f}")
    a = statistics.median(r["tiles_per_s"] for r in runs["anonymous"])
    j = statistics.median(r["tiles_per_s"] for r in runs["JWT"])
    ca = statistics.median(r["cpu_s_per_1000"] for r in runs["anonymous"])
    cj = statistics.median(r["cpu_s_per_1000"] for r in runs["JWT"])
    print(f"median tiles/s: anonymous {a:.0f}, JWT {j:.0f}: JWT/anonymous = {j / a:.3f}")
    print(f"median server CPU s per 1000 tiles: anonymous {ca:.3f}, JWT {cj:.3f}: ratio {cj / ca:.3f}")


if __name__ == "__main__":
    main()
