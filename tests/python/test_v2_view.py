"""The Zarr v2 view (/v1/datasets/{ds}/v2/) and prefix listings (.../zarr/{prefix}/)
against a *running* zarr-serve, read by the zarr-python and xarray of this
interpreter: CI runs this file under zarr-python 3 (.venv-test) and under
zarr-python 2.18 (.venv-zarr2, tests/python/requirements-zarr2.txt).

    TEST_SERVER_URL=http://127.0.0.1:8080 pytest tests/python/test_v2_view.py

The server must serve the interop fixtures as dataset `fixtures` and the sample
as dataset `sample` (scripts/ci/interop.sh does).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import requests
import xarray as xr
import zarr

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_URL = os.environ.get("TEST_SERVER_URL", "http://127.0.0.1:8080").rstrip("/")
FIXTURES = Path(os.environ.get("ZARR_FIXTURES", REPO_ROOT / "tests" / "fixtures" / "interop"))
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
SAMPLE = REPO_ROOT / "sample" / "sample.zarr"
ZARR_MAJOR = int(zarr.__version__.split(".")[0])

DTYPES = {
    "bool": "|b1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
    "float16": "<f2", "float32": "<f4", "float64": "<f8", "complex64": "<c8", "complex128": "<c16",
}
# Every readable fixture array of a type the view serves.
VIEW_ARRAYS = [a for a in MANIFEST["arrays"] if a["data_type"] in DTYPES]


def view(ds: str) -> str:
    return f"{BASE_URL}/v1/datasets/{ds}/v2"


def expected(entry) -> np.ndarray:
    raw = (FIXTURES / entry["expected"]).read_bytes()
    return np.frombuffer(raw, dtype=DTYPES[entry["data_type"]]).reshape(tuple(entry["shape"]))


def le_bytes(a) -> bytes:
    a = np.asarray(a)
    if a.dtype.byteorder == ">":
        a = a.byteswap().view(a.dtype.newbyteorder("<"))
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("entry", VIEW_ARRAYS, ids=[a["path"] for a in VIEW_ARRAYS])
def test_every_array_reads_through_the_view(entry):
    """zarr-python reads each array through the view, chunk by chunk, byte for byte."""
    arr = zarr.open_array(f"{view('fixtures')}/{entry['path']}", mode="r")
    assert list(arr.shape) == entry["shape"]
    assert le_bytes(arr[...]) == le_bytes(expected(entry))


def as_contract_json(values) -> list:
    """Elements as the contract's JSON writes them (the manifest's "typed" values)."""
    import base64

    flat = np.asarray(values).reshape(-1)
    if flat.dtype.kind in "Mm":
        flat = flat.astype(flat.dtype.newbyteorder("="))
        nat = np.isnat(flat)
        if flat.dtype.kind == "M":
            return [None if n else str(v) for v, n in zip(flat, nat)]
        return [None if n else int(v) for v, n in zip(flat.view("int64"), nat)]
    if flat.dtype.kind == "S" or (flat.dtype.kind == "O" and flat.size and isinstance(flat[0], bytes)):
        return [base64.b64encode(bytes(v)).decode() for v in flat]
    if flat.dtype.kind in "TUO":
        return [str(v) for v in flat]
    return flat.tolist()


TYPED = MANIFEST["typed"]


@pytest.mark.parametrize("entry", TYPED, ids=[a["path"] for a in TYPED])
def test_strings_bytes_and_datetimes_read_through_the_view(entry):
    """This zarr-python reads each string, bytes and datetime array through the
    view (`|O` + vlen-utf8/vlen-bytes, `<U`, `|S`, `<M8`, `<m8`) as zarr-python 3
    reads the store."""
    arr = zarr.open_array(f"{view('fixtures')}/{entry['path']}", mode="r")
    assert as_contract_json(arr[...]) == entry["whole"]["json"]


@pytest.mark.parametrize("group", ["xarray_cf", "xarray_cf_v3"])
def test_xarray_reads_a_cf_dataset_through_the_view(group):
    """Times, a string coordinate and packed values decode the same through the
    view as from the v2 store xarray wrote (the v3 copy holds the same data)."""
    through = xr.open_zarr(f"{view('fixtures')}/", group=group, consolidated=True)
    stored = xr.open_zarr(str(FIXTURES / "data.zarr" / "xarray_cf"), consolidated=True)
    assert_same(stored, through)
    for name in ("time", "station", "lat"):
        assert np.array_equal(stored[name].values, through[name].values), name
    assert through["time"].dtype.kind == "M" and through["temperature"].dtype.kind == "f"
    assert np.isnan(through["temperature"].values[2, 1])


def test_consolidated_metadata_names_every_view_array():
    meta = requests.get(f"{view('fixtures')}/.zmetadata", timeout=30).json()
    assert meta["zarr_consolidated_format"] == 1
    keys = meta["metadata"]
    for entry in VIEW_ARRAYS:
        zarray = keys[f"{entry['path']}/.zarray"]
        assert zarray["shape"] == entry["shape"]
        assert zarray["compressor"] is None and zarray["order"] == "C"
    # Unreadable arrays are left out, groups are there.
    assert ".zgroup" in keys and "zarr_python/.zgroup" in keys


def direct(path) -> xr.Dataset:
    return xr.open_zarr(str(path), consolidated=False)


def assert_same(a: xr.Dataset, b: xr.Dataset):
    assert sorted(a.data_vars) == sorted(b.data_vars)
    for name in a.data_vars:
        x, y = a[name].values, b[name].values
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"), name
        assert a[name].dims == b[name].dims, name


@pytest.mark.skipif(ZARR_MAJOR < 3, reason="reading the v3 sample directly needs zarr-python 3")
def test_xarray_reads_the_sample_through_the_view_as_directly():
    assert_same(direct(SAMPLE), xr.open_zarr(f"{view('sample')}/", consolidated=True))


def test_xarray_reads_the_view_with_this_zarr():
    """With either zarr-python: every variable of the sample, through the view,
    equals what zarr-python reads from the view's chunks one by one."""
    ds = xr.open_zarr(f"{view('sample')}/", consolidated=True)
    assert {"temperature", "mask"} <= set(ds.data_vars)
    for name in ("temperature", "mask"):
        whole = zarr.open_array(f"{view('sample')}/{name}", mode="r")[...]
        assert np.array_equal(ds[name].values, whole, equal_nan=True)
    assert ds["temperature"].dims == ("time", "y", "x")


@pytest.mark.skipif(ZARR_MAJOR < 3, reason="the passthrough serves Zarr v3, which needs zarr-python 3")
def test_xarray_lists_the_passthrough():
    """Without a listing, xarray would open the root and see no variables."""
    assert_same(direct(SAMPLE), xr.open_zarr(f"{BASE_URL}/v1/datasets/sample/zarr/", consolidated=False))


STATIONS = REPO_ROOT / "sample" / "stations.zarr"


def test_xarray_reads_the_v2_sample_through_the_view_and_the_passthrough():
    """The Zarr v2 sample (written by xarray) reads the same through both routes
    as from disk: CF times, a string coordinate, packed temperatures."""
    stored = xr.open_zarr(str(STATIONS), consolidated=True)
    base = f"{BASE_URL}/v1/datasets/stations"
    for url in (f"{base}/v2/", f"{base}/zarr/"):
        served = xr.open_zarr(url, consolidated=True)
        assert_same(stored, served)
        for name in ("time", "station", "lat", "lon"):
            assert np.array_equal(stored[name].values, served[name].values), (url, name)
    assert list(stored["station"].values[:2]) == ["Oslo", "Bergen"]


def test_a_v2_dataset_on_a_plain_http_server_finds_its_children_in_zmetadata():
    """`stations_http` is the v2 sample behind a static HTTP server, which cannot
    list: the root's children come from its consolidated .zmetadata, each still
    read from its own .zarray."""
    base = f"{BASE_URL}/v1/datasets"
    local = requests.get(f"{base}/stations/nodes", timeout=30).json()
    remote = requests.get(f"{base}/stations_http/nodes", timeout=30)
    assert remote.status_code == 200, remote.text[:300]
    assert remote.json()["children"] == local["children"] and len(local["children"]) == 6
    for path in ("station", "temperature?select=3:9&format=json"):
        a = requests.get(f"{base}/stations/data/{path}", timeout=30)
        b = requests.get(f"{base}/stations_http/data/{path}", timeout=30)
        assert b.status_code == 200 and a.content == b.content, path
    assert_same(xr.open_zarr(str(STATIONS), consolidated=True),
                xr.open_zarr(f"{base}/stations_http/v2/", consolidated=True))
    # The passthrough's root listing comes from .zmetadata too.
    listing = [requests.get(f"{base}/{ds}/zarr/", headers={"Accept": "application/json"}, timeout=30).json()
               for ds in ("stations", "stations_http")]
    assert listing[0] == listing[1] and "temperature" in listing[0]["prefixes"]
    # A node that is not there is still a 404, though the store cannot list.
    assert requests.get(f"{base}/stations_http/nodes/no_such_node", timeout=30).status_code == 404


def test_listings_in_html_and_json():
    base = f"{BASE_URL}/v1/datasets/sample"
    html = requests.get(f"{base}/zarr/", timeout=30)
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    for link in ('href="temperature/"', 'href="zarr.json"'):
        assert link in html.text
    listing = requests.get(f"{base}/zarr/temperature/", headers={"Accept": "application/json"}, timeout=30).json()
    assert listing == {"prefixes": ["c"], "keys": ["zarr.json"]}
    root = requests.get(f"{base}/v2/", headers={"Accept": "application/json"}, timeout=30).json()
    assert {".zgroup", ".zattrs", ".zmetadata"} <= set(root["keys"])
    assert "temperature" in root["prefixes"]
    assert requests.get(f"{base}/zarr/no_such_prefix/", timeout=30).status_code == 404
    assert requests.get(f"{base}/v2/no_such_key", timeout=30).status_code == 404
    assert requests.get(f"{base}/v2/temperature/99.0.0", timeout=30).status_code == 404


def test_view_values_have_etags_and_answer_304():
    url = f"{view('sample')}/temperature/0.0.0"
    r = requests.get(url, timeout=30)
    assert r.status_code == 200 and r.headers["etag"].startswith('"')
    assert len(r.content) == 4 * 32 * 32 * 4
    again = requests.get(url, headers={"If-None-Match": r.headers["etag"]}, timeout=30)
    assert again.status_code == 304
