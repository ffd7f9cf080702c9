"""Strings, bytes and datetimes (contract 2.2) against a *running* zarr-serve:
every array of the manifest's "typed" list (written by zarr-python 3 as Zarr v3
and v2, by zarr-python 2.18 and by xarray; see tests/fixtures/generate.py), whole
and through selections, in JSON, .npy and binary, compared with what
zarr-python 3 reads from the store.

    TEST_SERVER_URL=http://127.0.0.1:8080 pytest tests/python/test_types_http.py
"""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_URL = os.environ.get("TEST_SERVER_URL", "http://127.0.0.1:8080").rstrip("/")
DATASET = os.environ.get("TEST_FIXTURE_DATASET", "fixtures")
FIXTURES = Path(os.environ.get("ZARR_FIXTURES", REPO_ROOT / "tests" / "fixtures" / "interop"))
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
TYPED = MANIFEST["typed"]
DS_URL = f"{BASE_URL}/v1/datasets/{quote(DATASET, safe='')}"
TEXT = {"string", "fixed_length_utf32"}
BYTES = {"null_terminated_bytes", "variable_length_bytes"}
TIMES = {"numpy.datetime64", "numpy.timedelta64"}
NUMERIC = {"int16": "<i2", "int32": "<i4", "int64": "<i8", "float64": "<f8", "float32": "<f4"}


def same_values(got: list, want: list, data_type: str) -> bool:
    """Equal element by element; numbers compared in the array's own type
    (JSON writes float32 in its shortest form), NaN equal to NaN."""
    if data_type not in NUMERIC:
        return got == want
    g = np.array(got, dtype=NUMERIC[data_type])
    w = np.array(want, dtype=NUMERIC[data_type])
    return g.shape == w.shape and bool(np.array_equal(g, w, equal_nan=g.dtype.kind == "f"))


def cases(entry):
    yield "whole", None, entry["whole"]
    for sel in entry["selections"]:
        yield f"select={sel['select']!r}", sel["select"], sel


def get(path, select=None, fmt=None, headers=None):
    params = {}
    if select is not None:
        params["select"] = select
    if fmt is not None:
        params["format"] = fmt
    return requests.get(f"{DS_URL}/data/{path}", params=params, headers=headers or {}, timeout=30)


def flat(data, ndim):
    if ndim == 0:
        return [data]
    assert isinstance(data, list), data
    return [x for item in data for x in flat(item, ndim - 1)]


def ids(entries):
    return [e["path"] for e in entries]


@pytest.mark.parametrize("entry", TYPED, ids=ids(TYPED))
def test_node_document(entry):
    doc = requests.get(f"{DS_URL}/nodes/{entry['path']}", timeout=30).json()
    assert doc["readable"] is True, doc.get("unreadable_reason")
    assert doc["data_type"] == entry["data_type_json"]
    assert doc["shape"] == entry["whole"]["shape"]
    assert doc["zarr_format"] == (2 if "zarr-v2" in entry["features"] else 3)


@pytest.mark.parametrize("entry", TYPED, ids=ids(TYPED))
def test_json(entry):
    for label, select, want in cases(entry):
        r = get(entry["path"], select, "json")
        assert r.status_code == 200, f"{label}: {r.status_code} {r.text[:300]}"
        assert r.headers["content-type"].startswith("application/json")
        assert r.headers["zarr-data-type"] == entry["data_type"]
        assert r.headers["zarr-shape"] == ",".join(map(str, want["shape"]))
        doc = r.json()
        assert doc["shape"] == want["shape"] and doc["data_type"] == entry["data_type"], label
        assert same_values(flat(doc["data"], len(want["shape"])), want["json"], entry["data_type"]), label


@pytest.mark.parametrize("entry", TYPED, ids=ids(TYPED))
def test_npy(entry):
    name = entry["data_type"]
    for label, select, want in cases(entry):
        r = get(entry["path"], select, "npy")
        assert r.status_code == 200, f"{label}: {r.status_code} {r.text[:300]}"
        got = np.load(io.BytesIO(r.content), allow_pickle=False)
        assert list(got.shape) == want["shape"], label
        values = got.reshape(-1)
        if name in TEXT:
            width = max([len(s) for s in want["json"]] + [1])
            assert got.dtype == np.dtype(f"<U{width}"), f"{label}: {got.dtype}"
            assert values.tolist() == want["json"], label
        elif name in BYTES:
            width = max([len(base64.b64decode(s)) for s in want["json"]] + [1])
            assert got.dtype == np.dtype(f"|S{width}"), f"{label}: {got.dtype}"
            assert values.tolist() == [base64.b64decode(s).rstrip(b"\0") for s in want["json"]], label
        elif name in TIMES:
            unit = np.datetime_data(np.dtype(entry["numpy"]))
            assert got.dtype.kind == entry["numpy"][1] and np.datetime_data(got.dtype) == unit, got.dtype
            assert got.dtype.byteorder in "<=", got.dtype
            assert values.view("<i8").tolist() == want["ints"], label
        else:
            assert same_values(values.tolist(), want["json"], name), label


@pytest.mark.parametrize("entry", TYPED, ids=ids(TYPED))
def test_binary_and_default_format(entry):
    name = entry["data_type"]
    path = entry["path"]
    default = get(path)
    assert default.status_code == 200, default.text[:300]
    if name in TEXT | BYTES:
        assert default.headers["content-type"].startswith("application/json")
        assert get(path, headers={"Accept": "*/*"}).headers["content-type"].startswith("application/json")
        bad = get(path, fmt="binary")
        assert bad.status_code == 400 and bad.headers["content-type"] == "application/problem+json"
        assert get(path, headers={"Accept": "application/octet-stream"}).status_code == 406
        return
    assert default.headers["content-type"] == "application/octet-stream"
    for label, select, want in cases(entry):
        r = get(path, select, "binary")
        assert r.status_code == 200, label
        if name in TIMES:
            assert np.frombuffer(r.content, "<i8").tolist() == want["ints"], label
        else:
            assert same_values(np.frombuffer(r.content, NUMERIC[name]).tolist(), want["json"], name), label


CORRUPT = MANIFEST["typed_corrupt"]


@pytest.mark.parametrize("fmt", ["json", "npy"])
@pytest.mark.parametrize("entry", CORRUPT, ids=ids(CORRUPT))
def test_damaged_text_is_502(entry, fmt):
    r = get(entry["path"], entry["select"], fmt)
    assert r.status_code == 502, f"{entry['kind']}: {r.status_code} {r.text[:300]}"
    assert r.headers["content-type"] == "application/problem+json"


def test_every_writer_and_type_is_covered():
    """The fixture list itself: each writer wrote each kind of type."""
    kinds = {(e["writer"].split(" ")[0], e["data_type"]) for e in TYPED}
    for data_type in ("string", "fixed_length_utf32", "null_terminated_bytes", "variable_length_bytes",
                      "numpy.datetime64"):
        assert ("zarr-python", data_type) in kinds, data_type
    assert ("xarray", "string") in kinds and ("xarray", "int64") in kinds
    versions = {e["writer"] for e in TYPED}
    assert any(v.startswith("zarr-python 2.") for v in versions), versions
