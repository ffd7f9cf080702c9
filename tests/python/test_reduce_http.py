"""Reductions and coarsening (contract 2.5) against a *running* zarr-serve,
compared with NumPy's nan-functions and xarray: every readable real-typed array
of the fixture manifest (int and float, sharded or not, fill values and NaN
patterns), seeded random operators, axes and block factors.

    TEST_SERVER_URL=http://127.0.0.1:8080 pytest tests/python/test_reduce_http.py
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
import requests
import xarray as xr

from common import DS_URL, FIXTURES, MANIFEST, REAL, expected

ARRAYS = [a for a in MANIFEST["arrays"] if a["data_type"] in REAL and a["shape"]]
OPS = ["min", "max", "sum", "mean", "std", "count"]


def numpy_reduce(op: str, a: np.ndarray, axis) -> np.ndarray:
    """The contract's reduction, by NumPy."""
    kind = a.dtype.kind
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if op == "count":
            valid = ~np.isnan(a) if kind == "f" else np.ones(a.shape, bool)
            return np.asarray(np.count_nonzero(valid, axis=axis), dtype="<u8")
        if op == "sum":
            dtype = {"b": "<i8", "i": "<i8", "u": "<u8"}.get(kind, "<f8")
            return np.asarray(np.nansum(a, axis=axis, dtype=dtype) if kind == "f" else np.sum(a, axis=axis, dtype=dtype))
        if op in ("mean", "std"):
            f = np.nanmean if op == "mean" else np.nanstd
            return np.asarray(f(a.astype("<f8"), axis=axis))
        f = {"min": np.nanmin, "max": np.nanmax}[op] if kind == "f" else {"min": np.min, "max": np.max}[op]
        return np.asarray(f(a, axis=axis))


def get(path, params, fmt="npy"):
    return requests.get(f"{DS_URL}/data/{path}", params=dict(params, format=fmt), timeout=60)


def close(got: np.ndarray, want: np.ndarray) -> bool:
    if got.shape != want.shape:
        return False
    if want.dtype.kind in "iub":
        return got.dtype == want.dtype and got.tobytes() == np.ascontiguousarray(want).tobytes()
    g, w = got.astype("<f8"), want.astype("<f8")
    return bool(np.allclose(g, w, rtol=1e-9, atol=1e-300, equal_nan=True))


@pytest.mark.parametrize("entry", ARRAYS, ids=[a["path"] for a in ARRAYS])
def test_reductions_match_numpy(entry):
    full = expected(entry)
    rng = np.random.default_rng(abs(hash(entry["path"])) % 2**32)
    for op in OPS:
        if op in ("min", "max") and full.size == 0:
            continue  # NumPy has no min of nothing (the server: NaN for floats, 400 for integers)
        rank = full.ndim
        picks = [None] + [tuple(sorted(rng.choice(rank, size=int(rng.integers(1, rank + 1)), replace=False)))
                          for _ in range(2)]
        for axis in picks:
            params = {"reduce": op}
            if axis is not None:
                # By index, negative, or by name when the array has dimension names.
                params["axis"] = ",".join(str(d - rank) if d % 2 else str(d) for d in axis)
            want = numpy_reduce(op, full, axis)
            r = get(entry["path"], params)
            assert r.status_code == 200, f"{params}: {r.status_code} {r.text[:200]}"
            got = np.load(io.BytesIO(r.content))
            assert close(got, want), f"{params}: {got.ravel()[:4]} != {want.ravel()[:4]}"


SELECTED = [a for a in ARRAYS if len(a["shape"]) >= 2 and all(n >= 2 for n in a["shape"])][:60]


def random_selection(rng, shape):
    """One `select` item per dimension (a strided or reversed slice, an
    index, or an index list) and the NumPy index doing the same, applied
    dimension by dimension (orthogonal)."""
    items, index = [], []
    for n in shape:
        kind = rng.integers(0, 4)
        if kind == 0:
            i = int(rng.integers(-n, n))
            items.append(str(i))
            index.append(i)
        elif kind == 1:
            k = rng.integers(1, min(n, 6) + 1)
            picks = [int(x) for x in rng.integers(-n, n, size=k)]
            items.append("[" + ",".join(map(str, picks)) + "]")
            index.append(picks)
        else:
            step = int(rng.choice([1, 1, 2, 3, -1, -2]))
            a, b = sorted(int(x) for x in rng.integers(0, n + 1, size=2))
            if a == b:
                b = min(n, a + 1) if a < n else a
                a = b - 1
            s = slice(a, b, step) if step > 0 else slice(b - 1, None if a == 0 else a - 1, step)
            text = lambda v: "" if v is None else str(v)  # noqa: E731
            items.append(f"{text(s.start)}:{text(s.stop)}:{step}")
            index.append(s)
    return ",".join(items), index


def orthogonal(a: np.ndarray, index) -> np.ndarray:
    """NumPy's `oindex`: each dimension's index on its own."""
    out = a
    dim = 0
    for ix in index:
        if isinstance(ix, int):
            out = np.take(out, ix, axis=dim)
            continue
        if isinstance(ix, list):
            out = np.take(out, ix, axis=dim)
        else:
            out = out[(slice(None),) * dim + (ix,)]
        dim += 1
    return out


@pytest.mark.parametrize("entry", SELECTED, ids=[a["path"] for a in SELECTED])
def test_reductions_of_selections_match_numpy(entry):
    """Reductions over strided, reversed, indexed and listed selections:
    the parts of chunks folded where they are decoded, gathered or in place."""
    full = expected(entry)
    rng = np.random.default_rng(abs(hash(entry["path"])) % 2**32 + 2)
    for _ in range(3):
        select, index = random_selection(rng, full.shape)
        part = orthogonal(full, index)
        if part.size == 0:
            continue
        op = str(rng.choice(OPS))
        axis = None
        if part.ndim and rng.integers(0, 2):
            axis = tuple(sorted(int(d) for d in rng.choice(part.ndim, size=int(rng.integers(1, part.ndim + 1)), replace=False)))
        params = {"reduce": op, "select": select}
        if axis is not None:
            params["axis"] = ",".join(map(str, axis))
        r = get(entry["path"], params)
        assert r.status_code == 200, f"{params}: {r.status_code} {r.text[:200]}"
        got = np.load(io.BytesIO(r.content))
        want = numpy_reduce(op, part, axis)
        assert close(got, want), f"{params}: {got.ravel()[:4]} != {want.ravel()[:4]}"


COARSEN = [a for a in ARRAYS if a["data_type"] in ("float32", "float64", "int16", "uint8", "int32")
           and all(n >= 2 for n in a["shape"])][:40]


@pytest.mark.parametrize("entry", COARSEN, ids=[a["path"] for a in COARSEN])
def test_coarsen_matches_block_reduction(entry):
    full = expected(entry)
    rng = np.random.default_rng(abs(hash(entry["path"])) % 2**32 + 1)
    for op in ("mean", "max", "sum"):
        factors = [int(rng.integers(1, min(n, 5) + 1)) for n in full.shape]
        trimmed = full[tuple(slice(0, n // f * f) for n, f in zip(full.shape, factors))]
        blocks = trimmed.reshape([x for n, f in zip(trimmed.shape, factors) for x in (n // f, f)])
        want = numpy_reduce(op, blocks, tuple(range(1, 2 * full.ndim, 2)))
        params = {"coarsen": ",".join(map(str, factors))}
        if op != "mean":
            params["reduce"] = op
        r = get(entry["path"], params)
        assert r.status_code == 200, f"{params}: {r.text[:200]}"
        got = np.load(io.BytesIO(r.content))
        assert close(got, want), f"{params}"


def test_coarsen_by_name_and_cf_match_xarray():
    stored = xr.open_zarr(str(FIXTURES / "data.zarr" / "xarray_grid"), consolidated=True)
    r = get("xarray_grid/t2m", {"coarsen": "lat:4,lon:5", "decode": "cf"})
    got = np.load(io.BytesIO(r.content))
    want = stored["t2m"].coarsen(lat=4, lon=5, boundary="trim").mean().values
    assert close(got, want)
    doc = get("xarray_grid/t2m", {"reduce": "mean", "axis": "time", "decode": "cf", "sel": "lat=64..62"},
              fmt="json").json()
    want = stored["t2m"].sel(lat=slice(64, 62)).mean("time")
    assert doc["dimension_names"] == ["lat", "lon"] and doc["coords"]["lat"] == want["lat"].values.tolist()
    assert close(np.array(doc["data"], dtype="<f8"), want.values)


def test_reduction_errors_and_headers():
    for params, status in [
        ({"reduce": "median"}, 400),
        ({"axis": "0"}, 400),
        ({"reduce": "sum", "axis": "0,0"}, 400),
        ({"reduce": "sum", "axis": "9"}, 400),
        ({"reduce": "sum", "axis": "0", "coarsen": "2,2,2"}, 400),
        ({"coarsen": "2"}, 400),
    ]:
        r = get("xarray_grid/t2m", params)
        assert r.status_code == status, f"{params}: {r.status_code}"
    assert get("types/string", {"reduce": "count"}).status_code == 400
    complex_arrays = [a for a in MANIFEST["arrays"] if a["data_type"].startswith("complex")]
    assert get(complex_arrays[0]["path"], {"reduce": "sum"}).status_code == 400
    r = get("xarray_grid/t2m", {"reduce": "sum"}, fmt="binary")
    assert r.headers["zarr-data-type"] == "int64" and r.headers["zarr-shape"] == ""
    again = requests.get(r.url, headers={"If-None-Match": r.headers["etag"]}, timeout=30)
    assert again.status_code == 304
    other = get("xarray_grid/t2m", {"reduce": "max"}, fmt="binary")
    assert other.headers["etag"] != r.headers["etag"]
