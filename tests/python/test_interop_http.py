"""Interop tests for a *running* zarr-serve, driven by tests/fixtures/interop/manifest.json.

Start the server on the interop fixtures, then run pytest, e.g.

    target/release/zarr-serve --dataset fixtures=tests/fixtures/interop/data.zarr \
        --listen 127.0.0.1:8080 &
    TEST_SERVER_URL=http://127.0.0.1:8080 pytest tests/python

Environment:
    TEST_SERVER_URL              base URL of the server (default http://127.0.0.1:8080)
    TEST_FIXTURE_DATASET  dataset name serving data.zarr (default "fixtures")
    ZARR_FIXTURES               fixture dir (default <repo>/tests/fixtures/interop)

What is checked:
    a. zarr-python 3.1.3 reads every array it can read through the passthrough
       endpoint (/v1/datasets/{ds}/zarr/...) and gets bit-exact data; groups
       opened through passthrough agree with the node documents.
    b. region reads (/v1/datasets/{ds}/data/...) in npy, binary and json for every
       array and every manifest selection, plus the data headers.
    c. corrupt arrays answer 502, unsupported ones 501, as problem+json.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_URL = os.environ.get("TEST_SERVER_URL", "http://127.0.0.1:8080").rstrip("/")
DATASET = os.environ.get("TEST_FIXTURE_DATASET", "fixtures")
FIXTURES = Path(os.environ.get("ZARR_FIXTURES", REPO_ROOT / "tests" / "fixtures" / "interop"))
if not FIXTURES.is_absolute():
    FIXTURES = REPO_ROOT / FIXTURES

MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
ARRAYS = MANIFEST["arrays"]
CORRUPT = MANIFEST["corrupt"]
UNSUPPORTED = MANIFEST["unsupported"]

DS_URL = f"{BASE_URL}/v1/datasets/{quote(DATASET, safe='')}"
ZARR_URL = f"{DS_URL}/zarr"
TIMEOUT = 30

# Arrays zarr-python 3.1.3 cannot read (see tests/fixtures/README.md).
ZARR_PYTHON_SKIP = {"zarr-python-cannot-read", "raw-bits", "must-understand-false"}

# numpy dtype of the little-endian "expected/*.bin" files, by Zarr data type.
CORE_DTYPES = {
    "bool": "|b1",
    "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
    "float16": "<f2", "float32": "<f4", "float64": "<f8",
    "complex64": "<c8", "complex128": "<c16",
}

# Arrays whose every selection is also read as JSON (the special values live here);
# every other array is read as JSON once, whole.
JSON_ALL_SELECTIONS_FEATURES = {
    "fill-nan", "fill-infinity", "fill-neg-infinity", "fill-negative-zero",
    "fill-u64-max", "fill-i64-min", "fill-complex", "fill-hex", "fill-bool",
    "dtype-bool", "dtype-uint64", "dtype-int64", "dtype-complex64", "dtype-complex128",
    "dtype-float16", "0d", "zero-length", "raw-bits",
}


def np_dtype(data_type: str) -> np.dtype:
    if data_type in CORE_DTYPES:
        return np.dtype(CORE_DTYPES[data_type])
    m = re.fullmatch(r"r(\d+)", data_type)
    if m and int(m.group(1)) % 8 == 0:
        return np.dtype(f"V{int(m.group(1)) // 8}")
    raise ValueError(f"no numpy dtype for {data_type!r}")


def expected_array(rel: str, data_type: str, shape) -> np.ndarray:
    raw = (FIXTURES / rel).read_bytes()
    return np.frombuffer(raw, dtype=np_dtype(data_type)).reshape(tuple(shape))


def le_bytes(a: np.ndarray) -> bytes:
    """C-order little-endian bytes of `a` without any value conversion (NaN payloads kept)."""
    a = np.asarray(a)
    if a.dtype.byteorder == ">":
        a = a.byteswap().view(a.dtype.newbyteorder("<"))
    return np.ascontiguousarray(a).tobytes()


def ids(entries):
    return [e["path"] for e in entries]


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def http() -> requests.Session:
    s = requests.Session()
    # requests asks for gzip by default; ask for the identity encoding so that
    # Content-Length can be compared with the body as the server sent it.
    s.headers["Accept-Encoding"] = "identity"
    try:
        r = s.get(f"{BASE_URL}/healthz", timeout=5)
    except requests.RequestException as e:  # pragma: no cover - environment problem
        pytest.fail(f"zarr-serve not reachable at {BASE_URL} (set TEST_SERVER_URL): {e}")
    assert r.status_code == 200, f"/healthz answered {r.status_code}"
    r = s.get(f"{DS_URL}/nodes", timeout=TIMEOUT)
    assert r.status_code == 200, (
        f"dataset {DATASET!r} not served at {BASE_URL} (set TEST_FIXTURE_DATASET): "
        f"{r.status_code} {r.text[:300]}"
    )
    yield s
    s.close()


@pytest.fixture(scope="session")
def zarr_store(http):
    import zarr

    return zarr.storage.FsspecStore.from_url(ZARR_URL, read_only=True)


def node_doc(http, path: str) -> dict:
    url = f"{DS_URL}/nodes/{path}" if path else f"{DS_URL}/nodes"
    r = http.get(url, timeout=TIMEOUT)
    assert r.status_code == 200, f"GET {url}: {r.status_code} {r.text[:300]}"
    return r.json()


def get_data(http, path: str, select: str | None, fmt: str) -> requests.Response:
    params = {"format": fmt}
    if select is not None:
        params["select"] = select
    return http.get(f"{DS_URL}/data/{path}", params=params, timeout=TIMEOUT)


def check_data_headers(r: requests.Response, shape, data_type: str, media_type: str, what: str):
    assert r.status_code == 200, f"{what}: status {r.status_code}: {r.text[:400]}"
    h = r.headers
    assert h.get("Content-Type", "").split(";")[0].strip() == media_type, f"{what}: Content-Type {h.get('Content-Type')!r}"
    assert "Zarr-Shape" in h, f"{what}: no Zarr-Shape header"
    assert h["Zarr-Shape"] == ",".join(str(n) for n in shape), f"{what}: Zarr-Shape {h['Zarr-Shape']!r} != {list(shape)}"
    assert h.get("Zarr-Data-Type") == data_type, f"{what}: Zarr-Data-Type {h.get('Zarr-Data-Type')!r} != {data_type!r}"
    etag = h.get("ETag")
    assert etag and re.fullmatch(r'"[\x21\x23-\x7e]*"', etag), f"{what}: ETag {etag!r} is not a strong entity tag"
    assert "Content-Encoding" not in h, f"{what}: unrequested Content-Encoding {h['Content-Encoding']!r}"
    assert h.get("Content-Length") is not None, f"{what}: no Content-Length"
    assert int(h["Content-Length"]) == len(r.content), f"{what}: Content-Length {h['Content-Length']} != body {len(r.content)}"


def selections_of(entry):
    """(label, select or None, shape, expected file) for the whole array and each selection."""
    yield "whole", None, entry["shape"], entry["expected"]
    for i, sel in enumerate(entry["selections"]):
        yield f"sel{i} select={sel['select']!r}", sel["select"], sel["shape"], sel["expected"]


# ------------------------------------------------------------ a. zarr-python over passthrough

ZP_ARRAYS = [a for a in ARRAYS if not ZARR_PYTHON_SKIP.intersection(a["features"])]


@pytest.mark.parametrize("entry", ZP_ARRAYS, ids=ids(ZP_ARRAYS))
def test_zarr_python_reads_passthrough(zarr_store, entry):
    import zarr

    arr = zarr.open_array(store=zarr_store, path=entry["path"], mode="r")
    assert list(arr.shape) == entry["shape"]
    got = arr[...]
    got = np.asarray(got)
    exp = expected_array(entry["expected"], entry["data_type"], entry["shape"])
    assert got.shape == exp.shape
    assert (got.dtype.kind, got.dtype.itemsize) == (exp.dtype.kind, exp.dtype.itemsize), (
        f"dtype {got.dtype} vs {exp.dtype}"
    )
    assert le_bytes(got) == le_bytes(exp), "zarr-python read through passthrough differs from expected bytes"


ZP_GROUPS = ["", "zarr_python", "tensorstore", "handwritten", "extensions_ok"]


@pytest.mark.parametrize("group", ZP_GROUPS, ids=[g or "<root>" for g in ZP_GROUPS])
def test_zarr_python_opens_group_children(http, zarr_store, group):
    """Every child in the node document opens through passthrough as the right node type,
    and the group's attributes agree."""
    import zarr

    doc = node_doc(http, group)
    assert doc["node_type"] == "group"
    g = zarr.open_group(store=zarr_store, path=group, mode="r")
    assert dict(g.attrs) == doc["attributes"]
    assert doc["children"], f"node document of {group or '/'} lists no children"
    for child in doc["children"]:
        sub = f"{group}/{child['name']}" if group else child["name"]
        if child["node_type"] == "group":
            if sub == "implicit_parent":  # no zarr.json: zarr-python does not do implicit groups
                continue
            zarr.open_group(store=zarr_store, path=sub, mode="r")
        else:
            node = node_doc(http, sub)
            if not node.get("readable", True) or sub in {"extensions_ok/must_understand_false"}:
                continue
            if sub in {a["path"] for a in ARRAYS if ZARR_PYTHON_SKIP.intersection(a["features"])}:
                continue
            if sub.startswith(("corrupt/",)):
                continue
            a = zarr.open_array(store=zarr_store, path=sub, mode="r")
            assert list(a.shape) == node["shape"]


@pytest.mark.xfail(
    reason="zarr-python lists an HTTP store by scraping an HTML index of the directory URL "
    "(fsspec HTTPFileSystem); the passthrough serves keys only (GET .../zarr/ and "
    ".../zarr/<group> are 404), so zarr-python silently sees no members. The contract does not "
    "require a listing; remove this marker if the server adds one (or consolidated metadata).",
    strict=False,
)
@pytest.mark.parametrize("group", ["", "zarr_python"], ids=["<root>", "zarr_python"])
def test_zarr_python_lists_same_members(http, zarr_store, group):
    import zarr

    doc = node_doc(http, group)
    g = zarr.open_group(store=zarr_store, path=group, mode="r")
    listed = sorted(name for name, _ in g.members())
    assert listed == sorted(c["name"] for c in doc["children"])


# ------------------------------------------------------------------ b. region reads


def npy_check(r, exp, what):
    body = r.content
    assert body[:6] == b"\x93NUMPY", f"{what}: not an .npy file"
    assert body[6:8] == b"\x01\x00", f"{what}: .npy version {body[6]}.{body[7]}, contract says 1.0"
    got = np.load(io.BytesIO(body), allow_pickle=False)
    assert got.shape == exp.shape, f"{what}: npy shape {got.shape} != {exp.shape}"
    assert got.dtype.kind == exp.dtype.kind and got.dtype.itemsize == exp.dtype.itemsize, (
        f"{what}: npy dtype {got.dtype} != {exp.dtype}"
    )
    assert le_bytes(got) == le_bytes(exp), f"{what}: npy data differs"


@pytest.mark.parametrize("entry", ARRAYS, ids=ids(ARRAYS))
def test_region_npy(http, entry):
    failures = []
    for label, select, shape, rel in selections_of(entry):
        exp = expected_array(rel, entry["data_type"], shape)
        what = f"{entry['path']} {label} npy"
        try:
            r = get_data(http, entry["path"], select, "npy")
            check_data_headers(r, shape, entry["data_type"], "application/x-npy", what)
            npy_check(r, exp, what)
        except AssertionError as e:
            failures.append(str(e).splitlines()[0])
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("entry", ARRAYS, ids=ids(ARRAYS))
def test_region_binary(http, entry):
    failures = []
    for label, select, shape, rel in selections_of(entry):
        exp = (FIXTURES / rel).read_bytes()
        what = f"{entry['path']} {label} binary"
        try:
            r = get_data(http, entry["path"], select, "binary")
            check_data_headers(r, shape, entry["data_type"], "application/octet-stream", what)
            assert r.content == exp, f"{what}: {len(r.content)} bytes differ from expected {len(exp)} bytes"
        except AssertionError as e:
            failures.append(str(e).splitlines()[0])
    assert not failures, "\n".join(failures)


def _reject_constant(name):
    raise ValueError(f"non-standard JSON literal {name}")


FLOAT_STRINGS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def json_to_array(data, shape, data_type: str, what: str) -> np.ndarray:
    """Turn the `data` of a RegionJson into a numpy array, checking literal types."""
    dt = np_dtype(data_type)
    ndim = len(shape)

    def leaves(x, depth):
        if depth == ndim:
            yield x
            return
        assert isinstance(x, list), f"{what}: expected a list at depth {depth}, got {x!r:.80}"
        for y in x:
            yield from leaves(y, depth + 1)

    def real(v):
        if isinstance(v, str):
            assert v in FLOAT_STRINGS, f"{what}: float string {v!r}"
            return FLOAT_STRINGS[v]
        assert isinstance(v, (int, float)) and not isinstance(v, bool), f"{what}: float literal {v!r}"
        return float(v)

    flat = []
    for v in leaves(data, 0):
        if dt.kind == "b":
            assert isinstance(v, bool), f"{what}: bool as {v!r}"
            flat.append(v)
        elif dt.kind in "iu":
            assert isinstance(v, int) and not isinstance(v, bool), f"{what}: integer as {v!r}"
            flat.append(v)
        elif dt.kind == "f":
            flat.append(real(v))
        elif dt.kind == "c":
            assert isinstance(v, list) and len(v) == 2, f"{what}: complex as {v!r}"
            flat.append(complex(real(v[0]), real(v[1])))
        elif dt.kind == "V":
            # Not in the contract: the server sends r* elements as a list of byte values.
            assert isinstance(v, list) and len(v) == dt.itemsize and all(
                isinstance(b, int) and 0 <= b <= 255 for b in v
            ), f"{what}: raw element as {v!r}"
            flat.append(bytes(v))
        else:  # pragma: no cover
            raise AssertionError(dt)
    if dt.kind == "V":
        return np.frombuffer(b"".join(flat), dtype=dt).reshape(tuple(shape))
    return np.array(flat, dtype=dt).reshape(tuple(shape))


def json_equal(got: np.ndarray, exp: np.ndarray) -> bool:
    got, exp = got.reshape(-1), exp.reshape(-1)
    if exp.dtype.kind in "fc":
        g = got.view(f"<f{exp.dtype.itemsize // (2 if exp.dtype.kind == 'c' else 1)}")
        e = exp.view(g.dtype)
        # NaN payloads cannot travel through JSON: any NaN matches any NaN; everything else
        # (the sign of -0.0 included) must match bit for bit.
        both_nan = np.isnan(g) & np.isnan(e)
        return bool(np.all(both_nan | (g.view(f"<u{g.dtype.itemsize}") == e.view(f"<u{e.dtype.itemsize}"))))
    return le_bytes(got) == le_bytes(exp)


@pytest.mark.parametrize("entry", ARRAYS, ids=ids(ARRAYS))
def test_region_json(http, entry):
    all_sel = bool(JSON_ALL_SELECTIONS_FEATURES.intersection(entry["features"]))
    failures = []
    for label, select, shape, rel in selections_of(entry):
        if select is not None and not all_sel:
            continue
        exp = expected_array(rel, entry["data_type"], shape)
        what = f"{entry['path']} {label} json"
        try:
            r = get_data(http, entry["path"], select, "json")
            check_data_headers(r, shape, entry["data_type"], "application/json", what)
            try:
                doc = json.loads(r.content, parse_constant=_reject_constant)
            except ValueError as e:
                raise AssertionError(f"{what}: invalid JSON: {e}")
            assert doc.get("shape") == list(shape), f"{what}: shape {doc.get('shape')} != {shape}"
            assert doc.get("data_type") == entry["data_type"], f"{what}: data_type {doc.get('data_type')!r}"
            got = json_to_array(doc["data"], shape, entry["data_type"], what)
            assert json_equal(got, exp), f"{what}: values differ from expected"
        except AssertionError as e:
            failures.append(str(e).splitlines()[0])
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("entry", ARRAYS[:: max(1, len(ARRAYS) // 12)], ids=ids(ARRAYS[:: max(1, len(ARRAYS) // 12)]))
def test_data_etag_and_head(http, entry):
    """ETags differ per format/selection, If-None-Match answers 304, HEAD mirrors GET."""
    url = f"{DS_URL}/data/{entry['path']}"
    tags = {}
    for fmt in ("binary", "npy", "json"):
        r = http.get(url, params={"format": fmt}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text[:300]
        tags[fmt] = r.headers["ETag"]
        h = http.head(url, params={"format": fmt}, timeout=TIMEOUT)
        assert h.status_code == 200
        for k in ("ETag", "Zarr-Shape", "Zarr-Data-Type", "Content-Length", "Content-Type"):
            assert h.headers.get(k) == r.headers.get(k), f"HEAD {fmt} {k}: {h.headers.get(k)!r} != {r.headers.get(k)!r}"
        assert h.content == b""
        nm = http.get(url, params={"format": fmt}, headers={"If-None-Match": tags[fmt]}, timeout=TIMEOUT)
        assert nm.status_code == 304, f"If-None-Match {fmt}: {nm.status_code}"
        assert nm.content == b""
    assert len(set(tags.values())) == 3, f"formats share an ETag: {tags}"
    if entry["selections"] and entry["shape"]:
        sel = entry["selections"][0]["select"]
        r = http.get(url, params={"select": sel}, timeout=TIMEOUT)
        if r.status_code == 200 and r.content != (FIXTURES / entry["expected"]).read_bytes():
            assert r.headers["ETag"] != tags["binary"], "different selections share an ETag"


@pytest.mark.parametrize("entry", ARRAYS, ids=ids(ARRAYS))
def test_node_document_matches_manifest(http, entry):
    doc = node_doc(http, entry["path"])
    assert doc["node_type"] == "array"
    assert doc["path"] == "/" + entry["path"]
    assert doc["shape"] == entry["shape"]
    assert doc["data_type"] == entry["data_type"]
    assert doc["readable"] is True, doc.get("unreadable_reason")


# ------------------------------------------------------------------ compression, passthrough

COMPRESSION_SAMPLE = [a for a in ARRAYS if a["path"] in {"zarr_python/int16", "zarr_python/fill_nan", "tensorstore/shard_3d"}]


@pytest.mark.parametrize("encoding", ["gzip"])
@pytest.mark.parametrize("entry", COMPRESSION_SAMPLE, ids=ids(COMPRESSION_SAMPLE))
def test_data_compressed(http, entry, encoding):
    """Accept-Encoding compresses data; the decoded body is unchanged and, the compressed
    body being another representation, its strong ETag differs (RFC 9110 8.8.3.3; the
    contract: a data ETag identifies the representation)."""
    url = f"{DS_URL}/data/{entry['path']}"
    plain = http.get(url, timeout=TIMEOUT)
    comp = http.get(url, headers={"Accept-Encoding": encoding}, timeout=TIMEOUT)
    assert comp.status_code == 200
    assert comp.headers.get("Content-Encoding") == encoding
    assert "accept-encoding" in comp.headers.get("Vary", "").lower()
    assert comp.content == plain.content == (FIXTURES / entry["expected"]).read_bytes()
    assert comp.headers["ETag"] != plain.headers["ETag"], (
        f"identity and {encoding} bodies share the strong ETag {plain.headers['ETag']}"
    )


PASSTHROUGH_KEYS = [
    "zarr.json",
    "zarr_python/int16/zarr.json",
    "zarr_python/int16/c/0/0",
    "tensorstore/shard_3d/zarr.json",
]


@pytest.mark.parametrize("key", PASSTHROUGH_KEYS)
def test_passthrough_bytes_and_ranges(http, key):
    stored = (FIXTURES / "data.zarr" / key).read_bytes()
    url = f"{ZARR_URL}/{key}"
    r = http.get(url, timeout=TIMEOUT)
    assert r.status_code == 200 and r.content == stored
    for h in ("ETag", "Last-Modified"):
        assert r.headers.get(h), f"no {h}"
    assert r.headers.get("Accept-Ranges") == "bytes"
    assert int(r.headers["Content-Length"]) == len(stored)
    n = len(stored)
    for rng, sl in ((f"bytes=1-{min(5, n - 1)}", slice(1, min(5, n - 1) + 1)), ("bytes=2-", slice(2, None)),
                    ("bytes=-3", slice(n - 3, None))):
        p = http.get(url, headers={"Range": rng}, timeout=TIMEOUT)
        assert p.status_code == 206, f"{rng}: {p.status_code}"
        assert p.content == stored[sl], f"{rng}: wrong bytes"
        assert p.headers.get("Content-Range", "").endswith(f"/{n}")
    for rng in ("bytes=-0", f"bytes={n}-"):
        assert http.get(url, headers={"Range": rng}, timeout=TIMEOUT).status_code == 416, rng
    assert http.get(url, headers={"If-None-Match": r.headers["ETag"]}, timeout=TIMEOUT).status_code == 304


@pytest.mark.parametrize("key", PASSTHROUGH_KEYS[:2])
def test_passthrough_compressed_keeps_headers(http, key):
    """Passthrough answered with Accept-Encoding (as every browser, requests and aiohttp send
    it) must still be the stored bytes with the headers the contract promises."""
    stored = (FIXTURES / "data.zarr" / key).read_bytes()
    r = http.get(f"{ZARR_URL}/{key}", headers={"Accept-Encoding": "gzip"}, timeout=TIMEOUT)
    assert r.status_code == 200 and r.content == stored
    assert r.headers.get("Accept-Ranges") == "bytes", (
        f"Accept-Ranges missing (Content-Encoding: {r.headers.get('Content-Encoding')!r})"
    )
    assert r.headers.get("ETag") and r.headers.get("Last-Modified")


# ------------------------------------------------------------- c. corrupt / unsupported


def check_problem(r: requests.Response, status: int, what: str):
    assert r.status_code == status, f"{what}: status {r.status_code} (want {status}): {r.text[:300]}"
    ct = r.headers.get("Content-Type", "").split(";")[0].strip()
    assert ct == "application/problem+json", f"{what}: Content-Type {ct!r}"
    doc = r.json()
    for k in ("type", "title", "status", "detail"):
        assert k in doc, f"{what}: problem document lacks {k!r}: {doc}"
    assert doc["status"] == status, f"{what}: problem status {doc['status']}"
    assert isinstance(doc["detail"], str) and doc["detail"], f"{what}: empty detail"


@pytest.mark.parametrize("fmt", ["binary", "npy", "json"])
@pytest.mark.parametrize("entry", CORRUPT, ids=ids(CORRUPT))
def test_corrupt_is_502(http, entry, fmt):
    try:
        r = get_data(http, entry["path"], entry["select"], fmt)
    except requests.exceptions.ChunkedEncodingError as e:
        pytest.fail(f"response began (200?) and was then cut: {e}")
    check_problem(r, 502, f"{entry['path']} ({entry['kind']}) select={entry['select']!r} {fmt}")


@pytest.mark.parametrize("entry", UNSUPPORTED, ids=ids(UNSUPPORTED))
def test_unsupported_is_501(http, entry):
    what = f"{entry['path']} ({entry['kind']})"
    for fmt in ("binary", "npy", "json"):
        check_problem(get_data(http, entry["path"], None, fmt), 501, f"{what} {fmt}")
    doc = node_doc(http, entry["path"])
    assert doc["node_type"] == "array"
    assert doc["readable"] is False, f"{what}: node document says readable"
    assert isinstance(doc.get("unreadable_reason"), str) and doc["unreadable_reason"]
