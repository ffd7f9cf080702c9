"""PNG rendering (contract 2.5, `format=png`) against a *running* zarr-serve:
pixels decoded with Pillow and compared with the contract's rescale rule
applied by NumPy to the values zarr-python read, coloured by matplotlib's own
colormaps (±1 per channel); transparency of NaN and `nodata`; composition
with selection, coarsening, labels and CF decoding; ETags and errors.

    TEST_SERVER_URL=http://127.0.0.1:8080 pytest tests/python/test_png_http.py
"""

from __future__ import annotations

import io
import json

import matplotlib
import numpy as np
import pytest
import requests
import xarray as xr
from PIL import Image

from common import DS_URL, FIXTURES, MANIFEST, REAL, expected

COLORMAPS = ["gray", "viridis", "plasma", "inferno", "magma", "cividis", "turbo", "coolwarm", "RdBu_r"]
# Every non-empty 2-D real array, and a 2-D slice of every 3-D one.
PLANES = [a for a in MANIFEST["arrays"] if a["data_type"] in REAL and len(a["shape"]) in (2, 3) and 0 not in a["shape"]]


def get(path, params, **kw):
    return requests.get(f"{DS_URL}/data/{path}", params=params, timeout=60, **kw)


def pixels(response) -> np.ndarray:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(response.content))
    # RGBA, or indexed colour (palette and tRNS) that decodes to the same.
    assert image.mode in ("RGBA", "P"), image.mode
    return np.asarray(image.convert("RGBA"))


def render(values: np.ndarray, colormap="gray", rescale=None, nodata=None) -> np.ndarray:
    """The contract's picture of `values`, by NumPy and matplotlib."""
    v = values.astype("<f8")
    drawn = ~np.isnan(v)
    if nodata is not None:
        drawn &= v != values.dtype.type(nodata).astype("<f8")
    if rescale is None:
        # The finite elements drawn set the range; infinities land at its ends.
        finite = v[drawn & np.isfinite(v)]
        lo, hi = (finite.min(), finite.max()) if finite.size else (0.0, 0.0)
    else:
        lo, hi = rescale
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if not np.isfinite(hi - lo):  # bounds near ±MAX: halves do not overflow
            t = (v / 2 - lo / 2) / (hi / 2 - lo / 2)
        else:
            t = (v - lo) / (hi - lo)
        t = np.clip(t, 0, 1) if hi > lo else np.zeros_like(v)
    index = np.minimum(255, np.floor(256 * np.where(drawn, t, 0))).astype(int)
    table = matplotlib.colormaps[colormap].resampled(256)(np.arange(256), bytes=True)
    out = table[index].copy()
    out[..., 3] = 255
    out[~drawn] = 0
    return out


def assert_same_picture(got: np.ndarray, want: np.ndarray):
    assert got.shape == want.shape, (got.shape, want.shape)
    assert (got[..., 3] == want[..., 3]).all(), "transparency differs"
    diff = np.abs(got.astype(int) - want.astype(int)).max()
    assert diff <= 1, f"a channel differs by {diff}"


@pytest.mark.parametrize("entry", PLANES, ids=[a["path"] for a in PLANES])
def test_pictures_match_matplotlib(entry):
    values = expected(entry)
    params = {"format": "png"}
    if values.ndim == 3:
        params["select"] = f"{values.shape[0] // 2},:,:"
        values = values[values.shape[0] // 2]
    colormap = COLORMAPS[sum(map(ord, entry["path"])) % len(COLORMAPS)]
    if colormap != "gray":
        params["colormap"] = colormap
    got = pixels(get(entry["path"], params))
    assert_same_picture(got, render(values, colormap))


def test_every_colormap_and_a_fixed_range():
    entry = next(a for a in PLANES if a["path"] == "zarr_python/float64")
    values = expected(entry)
    lo, hi = np.nanpercentile(values.astype("<f8"), [20, 80])
    for colormap in COLORMAPS:
        got = pixels(get(entry["path"], {"format": "png", "colormap": colormap, "rescale": f"{float(lo)!r},{float(hi)!r}"}))
        assert_same_picture(got, render(values, colormap, rescale=(lo, hi)))


def test_nan_and_nodata_are_transparent_the_fill_value_is_not():
    # Arrays whose fill value shows up in missing chunks, and NaN fills.
    shown = 0
    for entry in PLANES:
        values = expected(entry)
        if values.ndim != 2 or values.dtype.kind == "b":
            continue
        common_value = np.unique(values[~np.isnan(values.astype("<f8"))], return_counts=True)
        if common_value[0].size < 2:
            continue
        nodata = common_value[0][np.argmax(common_value[1])]
        got = pixels(get(entry["path"], {"format": "png", "nodata": repr(nodata.item())}))
        want = render(values, nodata=nodata)
        assert_same_picture(got, want)
        assert (got[..., 3] == 0).any()
        shown += 1
    assert shown > 50
    nan_entry = next(a for a in PLANES if a["path"] == "zarr_python/fill_nan")
    got = pixels(get(nan_entry["path"], {"format": "png"}))
    assert (got[np.isnan(expected(nan_entry).astype("<f8"))] == 0).all()
    # The fill value of missing chunks alone stays visible (opaque).
    missing = [a for a in PLANES if "missing-chunks" in a["features"] and len(a["shape"]) == 2]
    checked = 0
    for entry in missing:
        values = expected(entry)
        node = FIXTURES / "data.zarr" / entry["path"]
        meta = node / "zarr.json" if (node / "zarr.json").exists() else node / ".zarray"
        fill = json.loads(meta.read_text()).get("fill_value")
        if not isinstance(fill, (int, float)) or isinstance(fill, bool) or not (values == fill).any():
            continue
        got = pixels(get(entry["path"], {"format": "png"}))
        assert (got[..., 3][values == fill] == 255).all(), entry["path"]
        checked += 1
    assert checked >= 3


def test_bool_draws_zero_and_one():
    entry = next(a for a in PLANES if a["path"] == "zarr_python/bool")
    values = expected(entry)
    gray = pixels(get(entry["path"], {"format": "png"}))
    assert (gray[values][:, :3] == 255).all() and (gray[~values][:, :3] == 0).all()
    assert (gray[..., 3] == 255).all()
    got = pixels(get(entry["path"], {"format": "png", "nodata": "0"}))
    assert (got[..., 3] == np.where(values, 255, 0)).all()
    assert (got[values][:, :3] == 0).all(), "one value drawn: HI == LO gives colour index 0"


def test_coarsened_overview_matches_xarray():
    entry = next(a for a in PLANES if a["path"] == "tensorstore/shard_3d")
    values = expected(entry)[1]
    got = pixels(get(entry["path"], {"format": "png", "select": "1,:,:", "coarsen": "2,3", "colormap": "magma"}))
    data = xr.DataArray(values.astype("<f8"), dims=["y", "x"]).coarsen(y=2, x=3, boundary="trim").mean()
    assert_same_picture(got, render(data.values, "magma"))


def test_labels_and_cf_decoding_compose():
    store = FIXTURES / "data.zarr" / "xarray_grid"
    ds = xr.open_zarr(store, consolidated=True)
    name = next(n for n, v in ds.data_vars.items() if v.ndim == 3 and v.dtype.kind == "f")
    var = ds[name]
    time_dim, y_dim, x_dim = var.dims
    label = str(ds[time_dim].values[1])[:19]
    got = pixels(get(f"xarray_grid/{name}", {"format": "png", "sel": f"{time_dim}={label}", "decode": "cf", "colormap": "turbo"}))
    assert_same_picture(got, render(var.isel({time_dim: 1}).values.astype("<f8"), "turbo"))


def test_accept_etag_head_and_cache():
    path = "zarr_python/float32"
    r = get(path, {}, headers={"Accept": "image/png", "Accept-Encoding": "identity"})
    assert r.headers["content-type"] == "image/png"
    etag = r.headers["etag"]
    identity = {"Accept-Encoding": "identity"}
    viridis = get(path, {"format": "png", "colormap": "viridis"}, headers=identity)
    gray = get(path, {"format": "png"}, headers=identity)
    assert gray.headers["etag"] == etag
    assert viridis.headers["etag"] not in (etag, get(path, {"format": "binary"}, headers=identity).headers["etag"])
    assert get(path, {"format": "png", "rescale": "0,1"}, headers=identity).headers["etag"] != etag
    assert get(path, {"format": "png", "nodata": "0"}, headers=identity).headers["etag"] != etag
    assert get(path, {}, headers={"Accept": "image/png", "Accept-Encoding": "identity", "If-None-Match": etag}).status_code == 304
    head = requests.head(f"{DS_URL}/data/{path}", params={"format": "png"}, timeout=30,
                         headers={"Accept-Encoding": "identity"})
    assert head.status_code == 200 and head.headers["content-length"] == str(len(r.content))
    assert head.headers["etag"] == etag
    # Stored inside, so HTTP compression applies on request.
    gz = get(path, {"format": "png"}, headers={"Accept-Encoding": "gzip"})
    assert gz.headers.get("content-encoding") == "gzip"
    assert (pixels(gz) == pixels(r)).all()
    assert "content-encoding" not in r.headers
    # POST carries the selection; the picture parameters stay in the query.
    post = requests.post(f"{DS_URL}/data/{path}", params={"format": "png"}, json={"select": ["2:9", ":"]}, timeout=30)
    assert_same_picture(pixels(post), render(expected(next(a for a in PLANES if a["path"] == path))[2:9]))


@pytest.mark.parametrize(
    "path,params,status",
    [
        ("zarr_python/float32", {"format": "png", "select": "0"}, 400),  # 1-D
        ("tensorstore/shard_3d", {"format": "png"}, 400),  # 3-D
        ("zarr_python/complex64", {"format": "png"}, 400),
        ("types/string_1d", {"format": "png"}, 400),
        ("zarr_python/float32", {"format": "png", "rescale": "5,1"}, 400),
        ("zarr_python/float32", {"format": "png", "rescale": "1"}, 400),
        ("zarr_python/float32", {"format": "png", "colormap": "jet"}, 400),
        ("zarr_python/float32", {"format": "png", "nodata": "none"}, 400),
        ("zarr_python/float32", {"format": "png", "select": "0:0,:"}, 400),  # no pixels
        ("zarr_python/float32", {"format": "npy", "colormap": "gray"}, 400),
        ("zarr_python/float32", {"rescale": "0,1"}, 400),
        ("zarr_python/float32", {"format": "json", "nodata": "0"}, 400),
        ("zarr_python/float32", {"format": "png", "reduce": "mean"}, 400),  # 0-D
    ],
)
def test_errors(path, params, status):
    r = get(path, params)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"


def test_accept_png_only_for_text_is_406():
    r = get("types/string_1d", {}, headers={"Accept": "image/png"})
    assert r.status_code == 406
