"""Geo variables on projected grids (contract 3.2) as tiles and WMS maps, against
a *running* zarr-serve serving sample/projected.zarr as dataset `projected`
(scripts/ci/lib.sh's start_server does): each pixel's cell is found with
pyproj (PROJ itself, not the server's proj4rs), its value read by zarr-python
and coloured by matplotlib, for the three ways a CRS is named:

- `sea_ice`: NSIDC polar stereographic north, a CF grid_mapping with crs_wkt
  (EPSG:3413), metres, y descending;
- `lcc/t2m`: Lambert conformal conic named by CF parameters alone, kilometres;
- `utm/elevation`: UTM 33N named by GeoZarr `proj:code` on its group.

    TEST_SERVER_URL=http://127.0.0.1:8080 pytest tests/python/test_projected_maps_http.py
"""

from __future__ import annotations

import numpy as np
import pyproj
import pytest
import requests
import zarr
from owslib.wms import WebMapService

from geo import BASE_URL, MERCATOR_HALF, REPO_ROOT, assert_pixels, cells, mercator_lat, mercator_lon, picture, png

URL = f"{BASE_URL}/v1/datasets/projected"
STORE = zarr.open_group(str(REPO_ROOT / "sample" / "projected.zarr"), mode="r")

# variable -> (its group, its CRS as PROJ knows it, coordinate units per metre)
VARIABLES = {
    "sea_ice": ("", pyproj.CRS.from_cf(dict(STORE["crs"].attrs)), 1.0),
    "lcc/t2m": ("lcc", pyproj.CRS.from_cf(dict(STORE["lcc/lambert"].attrs)), 0.001),
    "utm/elevation": ("utm", pyproj.CRS.from_user_input(STORE["utm"].attrs["proj:code"]), 1.0),
}


class Grid:
    """A variable as zarr-python reads it and where PROJ puts a point on it."""

    def __init__(self, variable: str):
        group, crs, scale = VARIABLES[variable]
        prefix = f"{group}/" if group else ""
        self.values = STORE[variable][:].astype("f8")
        self.x, self.y = STORE[prefix + "x"][:], STORE[prefix + "y"][:]
        self.to_grid = pyproj.Transformer.from_crs("EPSG:4326", crs, always_xy=True)
        self.scale = scale

    def xy(self, lons: np.ndarray, lats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x, y = self.to_grid.transform(lons, lats)
        return np.asarray(x) * self.scale, np.asarray(y) * self.scale

    def sample(self, lons: np.ndarray, lats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The values at pixel centres (2-D arrays of lon, lat) by the cell
        rule, and where a nudge of 1e-7 degrees (a centimetre) in any
        direction keeps the cell (PROJ and proj4rs may differ in the last
        digits, which can move a pixel on an edge to the next cell)."""
        x, y = self.xy(lons.ravel(), lats.ravel())
        ci, cj = cells(self.y, y), cells(self.x, x)
        out = np.full(lons.size, np.nan)
        inside = (ci >= 0) & (cj >= 0)
        out[inside] = self.values[ci[inside], cj[inside]]
        stable = np.ones(lons.size, bool)
        dlon = dlat = 1e-7
        for sx, sy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            nx, ny = self.xy(lons.ravel() + sx * dlon, lats.ravel() + sy * dlat)
            stable &= (cells(self.y, ny) == ci) & (cells(self.x, nx) == cj)
        return out.reshape(lons.shape), stable.reshape(lons.shape)


def tile_centres(z: int, row: int, col: int) -> tuple[np.ndarray, np.ndarray]:
    n = 2**z * 256
    lons = mercator_lon((col * 256 + np.arange(256) + 0.5) / n)
    lats = mercator_lat((row * 256 + np.arange(256) + 0.5) / n)
    return np.meshgrid(lons, lats)


@pytest.mark.parametrize(
    "variable,z,row,col,rescale",
    [
        ("sea_ice", 1, 0, 0, (0.0, 1.0)),  # the Arctic seen from far out, crossing the pole's meridians
        ("sea_ice", 3, 1, 5, (0.0, 1.0)),
        ("lcc/t2m", 3, 2, 1, (270.0, 305.0)),
        ("lcc/t2m", 4, 5, 3, (270.0, 305.0)),
        ("utm/elevation", 6, 17, 34, (0.0, 1000.0)),
    ],
)
def test_tiles_of_projected_grids_match_proj_and_zarr_python(variable, z, row, col, rescale):
    got = png(requests.get(f"{URL}/tiles/WebMercatorQuad/{z}/{row}/{col}", timeout=60,
                           params={"variable": variable, "rescale": "%g,%g" % rescale, "colormap": "viridis"}))
    lons, lats = tile_centres(z, row, col)
    values, stable = Grid(variable).sample(lons, lats)
    drawn = ~np.isnan(values)
    assert drawn.sum() > 1000, "the tile should show the data"
    assert (~stable).mean() < 0.01
    assert_pixels(got, picture(values, *rescale, "viridis"), stable, least=1000)


@pytest.mark.parametrize("crs", ["EPSG:3857", "EPSG:4326"])
def test_wms_getmap_of_a_projected_grid(crs):
    w, h = 320, 200
    lon0, lat0, lon1, lat1 = -135.0, 20.0, -60.0, 58.0
    if crs == "EPSG:3857":
        x0, x1 = (np.array([lon0, lon1]) / 180 * MERCATOR_HALF).tolist()
        y0, y1 = (np.log(np.tan(np.pi / 4 + np.radians([lat0, lat1]) / 2)) * MERCATOR_HALF / np.pi).tolist()
        bbox = (x0, y0, x1, y1)
        xs = x0 + (np.arange(w) + 0.5) * (x1 - x0) / w
        ys = y1 - (np.arange(h) + 0.5) * (y1 - y0) / h
        lons = xs / MERCATOR_HALF * 180
        lats = np.degrees(2 * np.arctan(np.exp(ys / MERCATOR_HALF * np.pi)) - np.pi / 2)
    else:
        bbox = (lat0, lon0, lat1, lon1)  # latitude first
        lons = lon0 + (np.arange(w) + 0.5) * (lon1 - lon0) / w
        lats = lat1 - (np.arange(h) + 0.5) * (lat1 - lat0) / h
    params = {"SERVICE": "WMS", "VERSION": "1.3.0", "REQUEST": "GetMap", "LAYERS": "lcc/t2m", "STYLES": "",
              "CRS": crs, "BBOX": ",".join(map(str, bbox)), "WIDTH": w, "HEIGHT": h, "FORMAT": "image/png",
              "TRANSPARENT": "TRUE", "COLORSCALERANGE": "270,305"}
    got = png(requests.get(f"{URL}/wms", params=params, timeout=60))
    values, stable = Grid("lcc/t2m").sample(*np.meshgrid(lons, lats))
    assert np.isnan(values).any() and (~np.isnan(values)).sum() > 10000
    assert_pixels(got, picture(values, 270.0, 305.0, "gray"), stable, least=10000)


def test_feature_info_gives_the_cell_in_its_crs():
    grid = Grid("sea_ice")
    lon, lat = -40.0, 72.0
    params = {"SERVICE": "WMS", "VERSION": "1.3.0", "REQUEST": "GetFeatureInfo", "LAYERS": "sea_ice",
              "QUERY_LAYERS": "sea_ice", "STYLES": "", "CRS": "CRS:84", "WIDTH": 101, "HEIGHT": 101,
              "BBOX": f"{lon - 0.5},{lat - 0.5},{lon + 0.5},{lat + 0.5}", "I": 50, "J": 50,
              "INFO_FORMAT": "application/json"}
    feature = requests.get(f"{URL}/wms", params=params, timeout=60).json()["features"][0]
    x, y = grid.xy(np.array([lon]), np.array([lat]))
    i, j = cells(grid.y, y)[0], cells(grid.x, x)[0]
    props = feature["properties"]
    assert props["value"] == pytest.approx(grid.values[i, j])
    assert (props["x"], props["y"]) == (float(grid.x[j]), float(grid.y[i]))
    # The point is the cell's centre in longitude/latitude.
    clon, clat = grid.to_grid.transform(grid.x[j], grid.y[i], direction="INVERSE")
    assert feature["geometry"]["coordinates"] == pytest.approx([clon, clat], abs=1e-6)


def test_capabilities_and_tilejson_bound_the_projected_grids():
    wms = WebMapService(f"{URL}/wms", version="1.3.0")
    assert {"sea_ice", "lcc/t2m", "utm/elevation"} <= set(wms.contents)
    for variable in ("lcc/t2m", "utm/elevation"):
        group, crs, scale = VARIABLES[variable]
        g = Grid(variable)
        half_x, half_y = abs(g.x[1] - g.x[0]) / 2, abs(g.y[1] - g.y[0]) / 2
        box = (min(g.x) - half_x, min(g.y) - half_y, max(g.x) + half_x, max(g.y) + half_y)
        to_lonlat = pyproj.Transformer.from_crs(crs, "EPSG:4326", always_xy=True)
        want = to_lonlat.transform_bounds(*(np.array(box) / scale), densify_pts=64)
        assert wms[variable].boundingBoxWGS84 == pytest.approx(want, abs=0.01)
        doc = requests.get(f"{URL}/tiles/WebMercatorQuad/tilejson.json", params={"variable": variable},
                           timeout=60).json()
        assert doc["bounds"] == pytest.approx(list(want), abs=0.01)
    # The polar grid holds the pole: all longitudes, up to 90°N.
    sea_ice = wms["sea_ice"].boundingBoxWGS84
    assert (sea_ice[0], sea_ice[2], sea_ice[3]) == (-180.0, 180.0, 90.0)
