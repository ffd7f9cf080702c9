"""The service started on a directory for the write tests (no Zarr
library here: the tests run it under zarr-python 3 and 2.18)."""
import io
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import requests

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("ZS_SERVER_BIN", str(ROOT / "target" / "ci" / "zarr-serve"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """The service on `root`, writable by anyone as `w`, read-only as `ro`."""

    def __init__(self, tmp, root, extra=""):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = tmp / f"config-{self.port}.toml"
        keys = {"slab_bytes": "1048576", "max_request_bytes": "67108864", "metadata_ttl_secs": "0"}
        for line in extra.splitlines():
            if "=" in line:
                key, value = line.split("=", 1)
                keys[key.strip()] = value.strip()
        settings = "\n".join(f"{k} = {v}" for k, v in keys.items())
        config.write_text(f"""
listen = "127.0.0.1:{self.port}"
{settings}
[datasets.w]
url = "{root}"
writable = true
write = ["*"]

[datasets.ro]
url = "{root}"
""")
        self.log = open(tmp / f"server-{self.port}.log", "w")
        self.proc = subprocess.Popen([BIN, "--config", str(config)], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                requests.get(f"{self.url}/healthz", timeout=1)
                return
            except requests.RequestException:
                time.sleep(0.1)
        raise RuntimeError("the server did not start")

    def put(self, path, select, body, content_type="application/octet-stream", ds="w", headers=None):
        h = {"Content-Type": content_type, **(headers or {})}
        return requests.put(f"{self.url}/v1/datasets/{ds}/data/{path}", params={"select": select}, data=body,
                            headers=h, timeout=120)

    def read(self, path, select=""):
        r = requests.get(f"{self.url}/v1/datasets/w/data/{path}", params={"select": select, "format": "npy"},
                         timeout=120)
        assert r.status_code == 200, r.text
        return np.load(io.BytesIO(r.content))

    def stop(self, kill=False):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.log.close()


