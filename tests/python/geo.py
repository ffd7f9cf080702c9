"""What the map tests share (test_maps_http.py, test_map_clients.py, and
the others that check map pixels): the sample's geo variable `climate/tas`
as zarr-python reads it, the contract's cell rule (3.2) and colour rule
(2.5) that turn it into the picture a map should show, and pixel
comparisons.

The server must serve sample/climate.zarr as dataset `climate`
(scripts/ci/lib.sh's start_server does).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import matplotlib
import numpy as np
import zarr
from PIL import Image

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_URL = os.environ.get("TEST_SERVER_URL", "http://127.0.0.1:8080").rstrip("/")
CLIMATE_URL = f"{BASE_URL}/v1/datasets/climate"
WMS = f"{CLIMATE_URL}/wms"
CLIMATE = zarr.open_group(str(REPO_ROOT / "sample" / "climate.zarr"), mode="r")
LAT = CLIMATE["lat"][:]
LON = CLIMATE["lon"][:]
TAS = CLIMATE["tas"]
# Web Mercator (EPSG:3857): the half width of the square world, in metres.
MERCATOR_HALF = 20037508.342789244


def edges(centres: np.ndarray) -> np.ndarray:
    mid = (centres[1:] + centres[:-1]) / 2
    return np.concatenate([[2 * centres[0] - mid[0]], mid, [2 * centres[-1] - mid[-1]]])


def cells(centres: np.ndarray, points: np.ndarray) -> np.ndarray:
    """The cell of each point (-1 outside): edges[i] <= p < edges[i+1] along
    the coordinate's direction, a shared edge to the larger index."""
    e = edges(centres)
    if e[0] > e[-1]:  # descending: e[i+1] < p <= e[i]
        i = np.searchsorted(-e, -points, side="right") - 1
    else:
        i = np.searchsorted(e, points, side="right") - 1
    return np.where((i >= 0) & (i < len(centres)), i, -1)


def lon_cells(lons: np.ndarray) -> np.ndarray:
    out = cells(LON, lons)
    for turn in (360.0, -360.0):
        out = np.where(out < 0, cells(LON, lons + turn), out)
    return out


def lat_cells(lats: np.ndarray) -> np.ndarray:
    return cells(LAT, lats)


def picture(values: np.ndarray, lo: float, hi: float, colormap: str) -> np.ndarray:
    drawn = ~np.isnan(values)
    t = np.clip((values - lo) / (hi - lo), 0, 1)
    index = np.minimum(255, np.floor(256 * np.where(drawn, t, 0))).astype(int)
    out = matplotlib.colormaps[colormap].resampled(256)(np.arange(256), bytes=True)[index].copy()
    out[..., 3] = 255
    out[~drawn] = 0
    return out


def expected(lons: np.ndarray, lats: np.ndarray, time: int, lo: float, hi: float, colormap: str) -> np.ndarray:
    """The picture of `tas[time]` whose pixel centres are at these longitudes
    (columns) and latitudes (rows)."""
    slice_ = TAS[time].astype("f8")
    ci, cj = lat_cells(lats), lon_cells(lons)
    values = np.full((len(lats), len(lons)), np.nan)
    inside = (ci[:, None] >= 0) & (cj[None, :] >= 0)
    values[inside] = slice_[np.broadcast_to(ci[:, None], inside.shape)[inside], np.broadcast_to(cj[None, :], inside.shape)[inside]]
    return picture(values, lo, hi, colormap)


def default_range(time: int) -> tuple[float, float]:
    """The default rescale of `tas[time]`: the minimum and maximum of the slice."""
    values = TAS[time]
    return float(np.nanmin(values)), float(np.nanmax(values))


def mercator_lat(t: np.ndarray) -> np.ndarray:
    """Latitude at a fraction `t` of the Web Mercator world's height, from the top."""
    return np.degrees(np.arctan(np.sinh(np.pi * (1 - 2 * t))))


def mercator_lon(t: np.ndarray) -> np.ndarray:
    """Longitude at a fraction `t` of the Web Mercator world's width, from the left."""
    return -180 + 360 * t


def steady(to_coord, positions: np.ndarray, cell_of, margin: float) -> np.ndarray:
    """Pixels (centres at `positions`, in pixels) whose cell is the same
    `margin` pixels either side: the ones a client that places or
    resamples a picture by up to `margin` pixels still shows in that cell."""
    return cell_of(to_coord(positions - margin)) == cell_of(to_coord(positions + margin))


def png(response) -> np.ndarray:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(response.content))
    return np.asarray(image.convert("RGBA"))


def assert_same(got: np.ndarray, want: np.ndarray):
    assert got.shape == want.shape
    assert (got[..., 3] == want[..., 3]).all(), "transparency differs"
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


def assert_pixels(got: np.ndarray, want: np.ndarray, where: np.ndarray | None = None, *, background=None, least=1):
    """`got` (RGBA, or RGB over an opaque `background`) shows `want` (RGBA)
    at the pixels `where` (all by default), ±1 per channel: transparent
    pixels transparent (or the background), the others their colour. At
    least `least` pixels are compared."""
    assert got.shape[:2] == want.shape[:2], (got.shape, want.shape)
    where = np.ones(want.shape[:2], bool) if where is None else where
    assert where.sum() >= least, f"only {where.sum()} pixels to compare"
    want = want.astype(int)
    if background is None:
        target = want
    else:  # an opaque screenshot: transparent pixels show the page's background
        target = np.where(want[..., 3:] == 0, np.array([*background, 255]), want)
        got = np.concatenate([got[..., :3], np.full(got.shape[:2] + (1,), 255, got.dtype)], axis=-1)
    bad = where & (np.abs(got.astype(int) - target).max(axis=-1) > 1)
    if bad.any():
        rows, cols = np.nonzero(bad)
        first = [(int(r), int(c), got[r, c].tolist(), target[r, c].tolist()) for r, c in zip(rows[:5], cols[:5])]
        raise AssertionError(f"{bad.sum()} of {where.sum()} pixels differ; first (row, col, got, want): {first}")
