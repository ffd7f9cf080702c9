"""Map tiles and WMS 1.3.0 (contract 3.2, 3.3) against a *running* zarr-serve,
on the sample's geo variable `climate/tas` (latitude north to south, longitude
0..360, CF time): OWSLib reads GetCapabilities and fetches a map; maps and tiles
are compared pixel by pixel with the values zarr-python reads, sampled by the
contract's cell rule and coloured by matplotlib (±1 per channel; geo.py).

    TEST_SERVER_URL=http://127.0.0.1:8080 pytest tests/python/test_maps_http.py

The server must serve sample/climate.zarr as dataset `climate`
(scripts/ci/lib.sh's start_server does).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import requests
from owslib.wms import WebMapService
from PIL import Image

from geo import BASE_URL, LAT, LON, TAS, WMS, assert_same, cells, expected, lon_cells, png


def test_owslib_reads_the_capabilities_and_a_map():
    wms = WebMapService(WMS, version="1.3.0")
    assert wms.identification.type == "WMS"
    assert "tas" in wms.contents
    layer = wms["tas"]
    assert layer.title == "near-surface air temperature"
    assert [round(v, 6) for v in layer.boundingBoxWGS84] == [-180.0, -90.0, 180.0, 90.0]
    assert "raster/viridis" in layer.styles
    time = layer.dimensions["time"]
    assert len(time["values"]) == 4 and time["default"].startswith("2024-01-04")
    assert {"GetMap", "GetCapabilities", "GetFeatureInfo"} <= {op.name for op in wms.operations}
    image = wms.getmap(layers=["tas"], styles=["raster/viridis"], srs="CRS:84", bbox=(-180, -90, 180, 90),
                       size=(360, 180), format="image/png", transparent=True)
    got = np.asarray(Image.open(io.BytesIO(image.read())).convert("RGBA"))
    lons = -180 + (np.arange(360) + 0.5)
    lats = 90 - (np.arange(180) + 0.5)
    lo, hi = np.nanmin(TAS[3]), np.nanmax(TAS[3])
    assert_same(got, expected(lons, lats, 3, float(lo), float(hi), "viridis"))


@pytest.mark.parametrize("crs", ["CRS:84", "EPSG:4326"])
def test_getmap_matches_zarr_python(crs):
    bbox = (-30.0, -20.0, 150.0, 70.0)  # across the grid's 0 meridian seam
    w, h = 300, 150
    box = bbox if crs == "CRS:84" else (bbox[1], bbox[0], bbox[3], bbox[2])
    params = {"SERVICE": "WMS", "VERSION": "1.3.0", "REQUEST": "GetMap", "LAYERS": "tas", "STYLES": "raster/turbo",
              "CRS": crs, "BBOX": ",".join(map(str, box)), "WIDTH": w, "HEIGHT": h, "FORMAT": "image/png",
              "TRANSPARENT": "TRUE", "TIME": "2024-01-02T00:00:00Z", "COLORSCALERANGE": "240,305"}
    got = png(requests.get(WMS, params=params, timeout=60))
    lons = bbox[0] + (np.arange(w) + 0.5) * (bbox[2] - bbox[0]) / w
    lats = bbox[3] - (np.arange(h) + 0.5) * (bbox[3] - bbox[1]) / h
    assert_same(got, expected(lons, lats, 1, 240.0, 305.0, "turbo"))


@pytest.mark.parametrize("tms,z,row,col", [("WebMercatorQuad", 2, 1, 0), ("WebMercatorQuad", 3, 3, 7), ("WorldCRS84Quad", 1, 0, 3)])
def test_tiles_match_zarr_python(tms, z, row, col):
    url = f"{BASE_URL}/v1/datasets/climate/tiles/{tms}/{z}/{row}/{col}"
    got = png(requests.get(url, params={"variable": "tas", "rescale": "240,305", "colormap": "magma"}, timeout=60))
    cols, rows = (2 ** z, 2 ** z) if tms == "WebMercatorQuad" else (2 ** (z + 1), 2 ** z)
    lons = -180 + (col * 256 + np.arange(256) + 0.5) * 360 / (cols * 256)
    t = (row * 256 + np.arange(256) + 0.5) / (rows * 256)
    lats = np.degrees(np.arctan(np.sinh(np.pi * (1 - 2 * t)))) if tms == "WebMercatorQuad" else 90 - 180 * t
    assert_same(got, expected(lons, lats, 3, 240.0, 305.0, "magma"))


def test_feature_info_is_the_cell_value():
    params = {"SERVICE": "WMS", "VERSION": "1.3.0", "REQUEST": "GetFeatureInfo", "LAYERS": "tas",
              "QUERY_LAYERS": "tas", "STYLES": "", "CRS": "CRS:84", "BBOX": "-180,-90,180,90", "WIDTH": 360,
              "HEIGHT": 180, "I": 200, "J": 60, "INFO_FORMAT": "application/json"}
    doc = requests.get(WMS, params=params, timeout=60).json()
    props = doc["features"][0]["properties"]
    lon, lat = -180 + 200.5, 90 - 60.5
    i, j = cells(LAT, np.array([lat]))[0], lon_cells(np.array([lon]))[0]
    assert props["value"] == pytest.approx(float(TAS[3, i, j]))
    assert (props["x"], props["y"]) == (float(LON[j]), float(LAT[i]))
