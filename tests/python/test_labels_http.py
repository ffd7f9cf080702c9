"""Label, orthogonal and point selection, CF decoding and the POST body
(contract 2.3 and 2.4) against a *running* zarr-serve, compared with xarray
and NumPy reading the same stores from disk.

    TEST_SERVER_URL=http://127.0.0.1:8080 pytest tests/python/test_labels_http.py

Label selection is checked on `xarray_grid` (written by xarray: CF daily time,
descending latitude, longitude, packed int16 t2m, float32 precip with a
missing_value) in Zarr v2 and v3, and on the `stations` sample (a string
coordinate). Orthogonal lists and points are checked on every readable numeric
array of the fixture manifest (sharded or not, every chunking), with seeded
random positions, against NumPy's `np.ix_` and fancy indexing.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import requests
import xarray as xr

from common import BASE_URL, DS_URL, FIXTURES, MANIFEST, REPO_ROOT

STORE = FIXTURES / "data.zarr"
DTYPES = {
    "bool": "|b1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
    "uint8": "|u1", "uint16": "<u2", "uint32": "<u4", "uint64": "<u8",
    "float16": "<f2", "float32": "<f4", "float64": "<f8", "complex64": "<c8", "complex128": "<c16",
}
GRIDS = ["xarray_grid", "xarray_grid_v3"]


def data(path, params=None, body=None, fmt="json"):
    params = dict(params or {})
    params.setdefault("format", fmt)
    url = f"{DS_URL}/data/{path}"
    if body is None:
        return requests.get(url, params=params, timeout=60)
    return requests.post(url, params=params, data=json.dumps(body), timeout=60,
                         headers={"Content-Type": "application/json"})


def ok_json(r) -> dict:
    assert r.status_code == 200, f"{r.status_code} {r.text[:300]}"
    return r.json()


def as_array(doc) -> np.ndarray:
    return np.array(doc["data"], dtype="float64").reshape(doc["shape"])


def grid(group) -> xr.Dataset:
    # xarray reads the v2 store directly (the truth); both groups hold the same data.
    return xr.open_zarr(str(STORE / "xarray_grid"), consolidated=True)


def iso(values) -> list[str]:
    return [str(np.datetime64(v, "s")) for v in np.asarray(values).reshape(-1)]


def assert_close(got: np.ndarray, want: np.ndarray, what):
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert np.allclose(got, want, rtol=1e-12, atol=0, equal_nan=True), f"{what}: values differ"


# ------------------------------------------------------------------ label selection


@pytest.mark.parametrize("group", GRIDS)
@pytest.mark.parametrize("params, pick", [
    ({"sel": "time=2021-03-05"}, {"time": np.datetime64("2021-03-05")}),
    ({"sel": "time=2021-03-05T00:00:00Z"}, {"time": np.datetime64("2021-03-05")}),
    ({"sel": ["time=2021-03-03..2021-03-07"]}, {"time": slice("2021-03-03", "2021-03-07")}),
    ({"sel": ["time=2021-03-07..2021-03-03"]}, {"time": slice("2021-03-03", "2021-03-07")}),
    ({"sel": ["lat=63..61.5", "lon=5.5"]}, {"lat": slice(63, 61.5), "lon": 5.5}),
    ({"sel": ["lat=61.5..63", "time=2021-03-10"]}, {"lat": slice(63, 61.5), "time": np.datetime64("2021-03-10")}),
    ({"sel": ["lat=100..90"]}, {"lat": slice(100, 90)}),
])
def test_sel_matches_xarray(group, params, pick):
    ds = grid(group)
    for var in ("t2m", "precip"):
        doc = ok_json(data(f"{group}/{var}", dict(params, decode="cf")))
        want = ds[var].sel(pick)
        assert_close(as_array(doc), want.values.astype("float64"), f"{group}/{var} {params}")
        assert doc["dimension_names"] == list(want.dims)
        for dim in want.dims:
            labels = want[dim].values
            expected = iso(labels) if labels.dtype.kind == "M" else labels.tolist()
            assert doc["coords"][dim] == expected, dim


@pytest.mark.parametrize("group", GRIDS)
def test_nearest_and_its_ties(group):
    ds = grid(group)
    lat = ds["lat"].values  # descending, 0.5 apart: 62.25 is halfway between two labels
    for value in (62.25, 62.3, 70.0, 50.0, 61.75):
        doc = ok_json(data(f"{group}/t2m", {"sel": f"lat={value}", "sel_method": "nearest", "decode": "cf"}))
        i = int(np.argmin(np.abs(lat - value)))  # the first (smaller) index on a tie
        assert_close(as_array(doc), ds["t2m"].values[:, i, :], f"lat nearest {value}")
    when = ok_json(data(f"{group}/t2m", {"sel": "time=2021-03-05T11:00", "sel_method": "nearest",
                                         "decode": "cf", "select": ":,0,0"}))
    assert_close(as_array(when), ds["t2m"].values[4, 0, 0], "time nearest")
    tie = ok_json(data(f"{group}/t2m", {"sel": "time=2021-03-05T12:00", "sel_method": "nearest",
                                        "decode": "cf", "select": ":,0,0"}))
    assert_close(as_array(tie), ds["t2m"].values[4, 0, 0], "time tie takes the smaller index")


def test_string_coordinate_and_cf_on_the_v2_sample():
    stored = xr.open_zarr(str(REPO_ROOT / "sample" / "stations.zarr"), consolidated=True)
    url = f"{BASE_URL}/v1/datasets/stations/data/temperature"
    doc = ok_json(requests.get(url, params={"sel": ["station=Tromsø", "time=2020-01-03..2020-01-06"],
                                            "decode": "cf", "format": "json"}, timeout=30))
    want = stored["temperature"].sel(station="Tromsø", time=slice("2020-01-03", "2020-01-06"))
    assert_close(as_array(doc), want.values, "stations")
    assert doc["coords"]["time"] == iso(want["time"].values)
    raw = ok_json(requests.get(url, params={"sel": "station=Tromsø", "format": "json"}, timeout=30))
    assert raw["data_type"] == "int16", "without decode=cf the stored values are answered"


@pytest.mark.parametrize("group", GRIDS)
def test_decode_cf_matches_xarray_mask_and_scale(group):
    ds = grid(group)
    for var in ("t2m", "precip"):
        r = data(f"{group}/{var}", {"decode": "cf"}, fmt="npy")
        assert r.status_code == 200 and r.headers["zarr-data-type"] == "float64"
        got = np.load(io.BytesIO(r.content))
        assert got.dtype == np.float64
        assert_close(got, ds[var].values.astype("float64"), var)
        assert np.isnan(got).any(), f"{var}: the fixture has missing values"


def test_label_errors_name_what_is_wrong():
    cases = [
        ({"sel": "time=2022-01-01"}, ["2022-01-01", "time", "2021-03-01"]),
        ({"sel": "lat=60.1"}, ["60.1", "lat"]),
        ({"sel": "depth=3"}, ["depth"]),
        ({"sel": "time=2021-03-01..2021-03-02", "sel_method": "nearest"}, ["nearest"]),
        ({"sel": "time=yesterday"}, ["yesterday"]),
        ({"sel": "lat=north"}, ["north"]),
        ({"select": "0", "sel": "time=2021-03-05"}, ["time"]),
    ]
    for params, words in cases:
        r = data("xarray_grid/t2m", params)
        assert r.status_code == 400, f"{params}: {r.status_code}"
        detail = r.json()["detail"]
        for w in words:
            assert w in detail, f"{params}: {w!r} not in {detail!r}"
    r = data("xarray_noleap/t2m", {"sel": "time=2021-03-02"})
    assert r.status_code == 400 and "noleap" in r.json()["detail"]


# ------------------------------------------------------------- orthogonal and points

NUMERIC = [a for a in MANIFEST["arrays"] if a["data_type"] in DTYPES and a["shape"] and 0 not in a["shape"]]


def expected(entry) -> np.ndarray:
    raw = (FIXTURES / entry["expected"]).read_bytes()
    return np.frombuffer(raw, dtype=DTYPES[entry["data_type"]]).reshape(entry["shape"])


def same(got: np.ndarray, want: np.ndarray) -> bool:
    return got.shape == want.shape and got.tobytes() == np.ascontiguousarray(want).tobytes()


@pytest.mark.parametrize("entry", NUMERIC, ids=[a["path"] for a in NUMERIC])
def test_orthogonal_lists_and_points_match_numpy(entry):
    full = expected(entry)
    rng = np.random.default_rng(abs(hash(entry["path"])) % 2**32)
    dtype = DTYPES[entry["data_type"]]
    for trial in range(3):
        # Orthogonal: a list on some dimensions (any order, repeats, negatives), slices elsewhere.
        items, index = [], []
        for n in full.shape:
            if rng.random() < 0.6:
                k = int(rng.integers(1, 6))
                pos = rng.integers(-n, n, size=k)
                items.append("[" + ",".join(map(str, pos)) + "]")
                index.append(np.where(pos < 0, pos + n, pos))
            else:
                items.append("1:" if n > 1 else ":")
                index.append(np.arange(1, n) if n > 1 else np.arange(n))
        select = ",".join(items)
        if full.ndim == 1 and select.startswith("["):
            select = f"[{select}]"  # a list on a 1-D array is written [[...]]
        r = data(entry["path"], {"select": select}, fmt="binary")
        assert r.status_code == 200, f"select={select}: {r.status_code} {r.text[:200]}"
        want = full[np.ix_(*index)]
        got = np.frombuffer(r.content, dtype=dtype).reshape(want.shape)
        assert same(got, want), f"select={select}"
        # Points (vindex), by POST: positions scattered over the whole array.
        n_points = int(rng.integers(1, 40))
        pts = np.stack([rng.integers(-n, n, size=n_points) for n in full.shape], axis=1)
        r = data(entry["path"], body={"points": pts.tolist()}, fmt="binary")
        assert r.status_code == 200, f"points: {r.status_code} {r.text[:200]}"
        norm = np.where(pts < 0, pts + np.array(full.shape), pts)
        want = full[tuple(norm.T)]
        got = np.frombuffer(r.content, dtype=dtype)
        assert same(got, want), f"points {pts.tolist()[:3]}..."
        assert r.headers["zarr-shape"] == str(n_points)


def test_point_and_list_answers_in_every_format_with_labels():
    ds = grid("xarray_grid")
    body = {"points": [{"time": "2021-03-02", "lat": 64.5, "lon": 4.5},
                       {"time": "2021-03-20", "lat": 59.5, "lon": 11}]}
    doc = ok_json(data("xarray_grid/t2m", {"decode": "cf"}, body=body))
    want = [ds["t2m"].sel(time=np.datetime64(p["time"]), lat=p["lat"], lon=p["lon"]).item() for p in body["points"]]
    assert_close(as_array(doc), np.array(want), "points by label")
    assert doc["coords"]["time"] == ["2021-03-02T00:00:00", "2021-03-20T00:00:00"]
    assert doc["coords"]["lat"] == [64.5, 59.5]
    near = {"points": [{"time": "2021-03-02T05:00", "lat": 64.6, "lon": 4.4}], "sel_method": "nearest"}
    doc = ok_json(data("xarray_grid/t2m", {"decode": "cf"}, body=near))
    assert_close(as_array(doc), np.array(want[:1]), "points by label, nearest")
    npy = data("xarray_grid/t2m", body={"select": [0, "1:3", [4, 0, 4]]}, fmt="npy")
    got = np.load(io.BytesIO(npy.content))
    stored = xr.open_zarr(str(STORE / "xarray_grid"), consolidated=True, mask_and_scale=False)
    assert same(got, stored["t2m"].values[0, 1:3][:, [4, 0, 4]])


def test_post_body_errors_point_at_the_field():
    cases = [
        ({"selct": [0]}, "selct"),
        ({"select": [0, 1.5]}, "body.select[1]"),
        ({"points": [[0, 0, 0], [0, "a", 0]]}, "body.points[1][1]"),
        ({"points": [[0, 0, 99]]}, "points[0][2]"),
        ({"points": [[0, 0]]}, "points[0]"),
        ({"points": [[0, 0, 0]], "sel": {"time": "2021-03-02"}}, "points"),
        ({"sel": {"time": [1, 2, 3]}}, "body.sel.time"),
        ({"points": [{"time": "2021-03-02", "lat": 64.5}]}, "every dimension"),
    ]
    for body, needle in cases:
        r = data("xarray_grid/t2m", body=body)
        assert r.status_code == 400, f"{body}: {r.status_code}"
        assert needle in r.json()["detail"], f"{needle!r} not in {r.json()['detail']!r}"
    r = requests.post(f"{DS_URL}/data/xarray_grid/t2m", data="{not json", timeout=30)
    assert r.status_code == 400
    big = json.dumps({"points": [[0, 0, 0]] * 200_000})
    assert len(big) > 1 << 20
    r = requests.post(f"{DS_URL}/data/xarray_grid/t2m", data=big, timeout=30)
    assert r.status_code == 413 and r.headers["content-type"] == "application/problem+json"


def test_unknown_query_parameters_are_400_on_every_route():
    for path in ("/nodes", "/nodes/xarray_grid/t2m", "/data/xarray_grid/t2m", "/zarr/zarr.json",
                 "/zarr/", "/v2/.zmetadata", "/v2/"):
        url = f"{DS_URL}{path}"
        r = requests.get(url, params={"selekt": "0"}, timeout=30)
        assert r.status_code == 400, f"{url}: {r.status_code}"
        assert "selekt" in r.json()["detail"]
    r = requests.get(f"{BASE_URL}/v1/datasets", params={"page": "2"}, timeout=30)
    assert r.status_code == 400 and "page" in r.json()["detail"]
