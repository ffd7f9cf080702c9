"""What the HTTP test files share: the server under test, the fixture
dataset and its manifest, and the expected values of its arrays."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_URL = os.environ.get("TEST_SERVER_URL", "http://127.0.0.1:8080").rstrip("/")
DATASET = os.environ.get("TEST_FIXTURE_DATASET", "fixtures")
FIXTURES = Path(os.environ.get("ZARR_FIXTURES", REPO_ROOT / "tests" / "fixtures" / "interop"))
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
DS_URL = f"{BASE_URL}/v1/datasets/{quote(DATASET, safe='')}"
# NumPy types of the real (bool, integer, float) data types.
REAL = {
    "bool": "|b1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
    "float16": "<f2", "float32": "<f4", "float64": "<f8",
}


def expected(entry) -> np.ndarray:
    """The values zarr-python read from a real-typed manifest array."""
    raw = (FIXTURES / entry["expected"]).read_bytes()
    return np.frombuffer(raw, dtype=REAL[entry["data_type"]]).reshape(entry["shape"])
