"""Contract 3.1 over HTTP: the arrays zarr-python 3.4 and zarrs wrote with every
codec, data type and chunk grid they write (tests/fixtures/codecs), read from a
*running* zarr-serve as .npy (zfp and zfpy arrays as binary too) and through
the Zarr v2 view by the zarr-python of this interpreter (CI runs it under zarr-python 3 and 2.18), byte for byte
against what zarr-python 3.4 / zarrs read back.

    TEST_SERVER_URL=http://127.0.0.1:8080 pytest tests/python/test_codecs_http.py

The server must serve tests/fixtures/codecs/data.zarr as dataset `codecs`
(scripts/ci/lib.sh's start_server does).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
import requests
import zarr

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_URL = os.environ.get("TEST_SERVER_URL", "http://127.0.0.1:8080").rstrip("/")
CORPUS = REPO_ROOT / "tests" / "fixtures" / "codecs"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())

DTYPES = {
    "bool": "|b1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
    "float16": "<f2", "float32": "<f4", "float64": "<f8",
    "complex64": "<c8", "complex128": "<c16",
    "numpy.datetime64": "<M8[s]", "numpy.timedelta64": "<m8[s]",
}


def metadata_text(entry) -> str:
    node = CORPUS / "data.zarr" / entry["path"]
    return "".join(p.read_text() for p in (node / "zarr.json", node / ".zarray") if p.exists())


def zfp(entry) -> bool:
    return "zfp" in metadata_text(entry)


def rectilinear(entry) -> bool:
    return "rectilinear" in metadata_text(entry)


READABLE = [a for a in MANIFEST["arrays"] if a["data_type"] in DTYPES]
IN_VIEW = [a for a in READABLE if not rectilinear(a)]
ZFP = [a for a in MANIFEST["arrays"] if zfp(a)]


def expected(entry) -> np.ndarray:
    raw = (CORPUS / entry["expected"]).read_bytes()
    return np.frombuffer(raw, dtype=DTYPES[entry["data_type"]]).reshape(tuple(entry["shape"]))


def test_the_corpus_has_every_kind():
    assert len(READABLE) > 100 and len(IN_VIEW) > 80 and len(ZFP) > 20
    assert all(a in READABLE for a in ZFP)
    assert any(rectilinear(a) for a in READABLE)


@pytest.mark.parametrize("entry", READABLE, ids=[a["path"] for a in READABLE])
def test_region_npy_matches(entry):
    resp = requests.get(f"{BASE_URL}/v1/datasets/codecs/data/{entry['path']}?format=npy", timeout=30)
    assert resp.status_code == 200, resp.text
    got = np.load(io.BytesIO(resp.content))
    want = expected(entry)
    assert got.shape == want.shape
    assert got.tobytes() == np.ascontiguousarray(want).astype(got.dtype).tobytes()


@pytest.mark.parametrize("entry", IN_VIEW, ids=[a["path"] for a in IN_VIEW])
def test_v2_view_reads_as_stored(entry):
    arr = zarr.open_array(f"{BASE_URL}/v1/datasets/codecs/v2/{entry['path']}", mode="r")
    got = np.asarray(arr[...])
    want = expected(entry)
    assert got.shape == want.shape
    assert np.ascontiguousarray(got).astype(want.dtype).tobytes() == want.tobytes()


@pytest.mark.parametrize("entry", ZFP, ids=[a["path"] for a in ZFP])
def test_zfp_arrays_read_as_libzfp_decodes(entry):
    """zfp and zfpy arrays (lossy or not) come back byte for byte as
    zarr-python + zfpy (or zarrs + libzfp) read them, as binary too."""
    resp = requests.get(f"{BASE_URL}/v1/datasets/codecs/data/{entry['path']}", timeout=30)
    assert resp.status_code == 200, resp.text
    assert resp.content == np.ascontiguousarray(expected(entry)).tobytes()
