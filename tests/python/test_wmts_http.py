"""WMTS 1.0.0 (api.md 4.6) against a *running* zarr-serve, on the sample's
geo variable `climate/tas`: OWSLib's WebMapTileService reads the
capabilities (RESTful and key-value) and fetches tiles by GetTile; a WMTS
tile is the tile route's, byte for byte, by key-value and through the
`ResourceURL` template, and its pixels are zarr-python's values under the
contract's cell and colour rules (geo.py); GetFeatureInfo gives the cell's
value; errors are OWS exception reports. GDAL's WMTS driver reads the
layer in test_map_clients.py.

    TEST_SERVER_URL=http://127.0.0.1:8080 pytest tests/python/test_wmts_http.py
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest
import requests
from owslib.wmts import WebMapTileService

from geo import CLIMATE_URL, LAT, TAS, assert_same, cells, default_range, expected, lon_cells, png

REST = f"{CLIMATE_URL}/wmts/1.0.0/WMTSCapabilities.xml"
KVP = f"{CLIMATE_URL}/wmts"
NS = {"wmts": "http://www.opengis.net/wmts/1.0", "ows": "http://www.opengis.net/ows/1.1"}
TIMES = ["2024-01-01T00:00:00Z", "2024-01-02T00:00:00Z", "2024-01-03T00:00:00Z", "2024-01-04T00:00:00Z"]


def tile_pixels(tms: str, z: int, row: int, col: int) -> tuple[np.ndarray, np.ndarray]:
    """The longitudes and latitudes of a tile's pixel centres."""
    cols, rows = (2 ** z, 2 ** z) if tms == "WebMercatorQuad" else (2 ** (z + 1), 2 ** z)
    lons = -180 + (col * 256 + np.arange(256) + 0.5) * 360 / (cols * 256)
    t = (row * 256 + np.arange(256) + 0.5) / (rows * 256)
    lats = np.degrees(np.arctan(np.sinh(np.pi * (1 - 2 * t)))) if tms == "WebMercatorQuad" else 90 - 180 * t
    return lons, lats


def test_the_restful_and_key_value_capabilities_are_one_document():
    rest = requests.get(REST, timeout=30)
    kvp = requests.get(KVP, params={"SERVICE": "WMTS", "REQUEST": "GetCapabilities", "VERSION": "1.0.0"}, timeout=30)
    assert rest.status_code == 200 and kvp.status_code == 200
    assert rest.content == kvp.content
    assert rest.headers["content-type"].startswith("application/xml")
    assert rest.headers.get("etag")
    again = requests.get(REST, headers={"If-None-Match": rest.headers["etag"]}, timeout=30)
    assert again.status_code == 304
    doc = ET.fromstring(rest.content)
    layer = doc.find("wmts:Contents/wmts:Layer", NS)
    assert layer.findtext("ows:Identifier", namespaces=NS) == "tas"
    # The two sets, each limited to the layer's extent, and a template onto the tile route.
    links = {link.findtext("wmts:TileMatrixSet", namespaces=NS): link for link in layer.findall("wmts:TileMatrixSetLink", NS)}
    assert set(links) == {"WebMercatorQuad", "WorldCRS84Quad"}
    limits = links["WorldCRS84Quad"].findall("wmts:TileMatrixSetLimits/wmts:TileMatrixLimits", NS)
    last = limits[-1]
    z = int(last.findtext("wmts:TileMatrix", namespaces=NS))
    assert [int(last.findtext(f"wmts:{k}", namespaces=NS)) for k in ("MinTileCol", "MaxTileCol", "MinTileRow", "MaxTileRow")] \
        == [0, 2 ** (z + 1) - 1, 0, 2 ** z - 1]
    template = layer.find("wmts:ResourceURL", NS).get("template")
    assert template.startswith(f"{CLIMATE_URL}/tiles/{{TileMatrixSet}}/{{TileMatrix}}/{{TileRow}}/{{TileCol}}?")
    assert "{Style}" in template and "{time}" in template
    sets = {s.findtext("ows:Identifier", namespaces=NS): s for s in doc.findall("wmts:Contents/wmts:TileMatrixSet", NS)}
    assert sets["WebMercatorQuad"].findtext("wmts:WellKnownScaleSet", namespaces=NS) \
        == "urn:ogc:def:wkss:OGC:1.0:GoogleMapsCompatible"
    zero = sets["WebMercatorQuad"].find("wmts:TileMatrix", NS)
    assert float(zero.findtext("wmts:ScaleDenominator", namespaces=NS)) == pytest.approx(559082264.0287178)


def test_owslib_reads_the_layer_and_its_tiles_are_the_tile_routes():
    wmts = WebMapTileService(REST)
    assert wmts.identification.type == "OGC WMTS"
    layer = wmts.contents["tas"]
    assert layer.title == "near-surface air temperature"
    assert [round(v, 6) for v in layer.boundingBoxWGS84] == [-180.0, -90.0, 180.0, 90.0]
    assert set(layer.tilematrixsetlinks) == {"WebMercatorQuad", "WorldCRS84Quad"}
    assert "magma" in layer.styles and layer.styles["gray"].get("isDefault")
    assert {"GetCapabilities", "GetTile", "GetFeatureInfo"} <= {op.name for op in wmts.operations}
    for tms, z, row, col in [("WebMercatorQuad", 1, 0, 1), ("WorldCRS84Quad", 1, 1, 3)]:
        got = wmts.gettile(layer="tas", tilematrixset=tms, tilematrix=str(z), row=row, column=col,
                           format="image/png", style="magma").read()
        route = requests.get(f"{CLIMATE_URL}/tiles/{tms}/{z}/{row}/{col}",
                             params={"variable": "tas", "colormap": "magma"}, timeout=30)
        assert route.status_code == 200 and got == route.content, tms
        lons, lats = tile_pixels(tms, z, row, col)
        lo, hi = default_range(3)
        assert_same(png(route), expected(lons, lats, 3, lo, hi, "magma"))


@pytest.mark.parametrize("time", [0, 2])
def test_the_resource_url_and_get_tile_give_one_tile_at_a_time(time):
    doc = ET.fromstring(requests.get(REST, timeout=30).content)
    template = doc.find("wmts:Contents/wmts:Layer/wmts:ResourceURL", NS).get("template")
    filled = (template.replace("{TileMatrixSet}", "WorldCRS84Quad").replace("{TileMatrix}", "1")
              .replace("{TileRow}", "0").replace("{TileCol}", "2").replace("{Style}", "turbo")
              .replace("{time}", TIMES[time]))
    rest = requests.get(filled, timeout=30)
    kvp = requests.get(KVP, params={"SERVICE": "WMTS", "REQUEST": "GetTile", "VERSION": "1.0.0", "LAYER": "tas",
                                    "STYLE": "turbo", "FORMAT": "image/png", "TILEMATRIXSET": "WorldCRS84Quad",
                                    "TILEMATRIX": "1", "TILEROW": "0", "TILECOL": "2", "TIME": TIMES[time]}, timeout=30)
    assert rest.status_code == 200 and kvp.status_code == 200
    assert rest.content == kvp.content
    lons, lats = tile_pixels("WorldCRS84Quad", 1, 0, 2)
    lo, hi = default_range(time)
    assert_same(png(kvp), expected(lons, lats, time, lo, hi, "turbo"))


def test_feature_info_is_the_cell_value():
    # Tile 1/0/1 of WorldCRS84Quad spans 90°W..0, 90°N..0: pixel (200, 60).
    params = {"SERVICE": "WMTS", "REQUEST": "GetFeatureInfo", "VERSION": "1.0.0", "LAYER": "tas", "STYLE": "",
              "FORMAT": "image/png", "TILEMATRIXSET": "WorldCRS84Quad", "TILEMATRIX": "1", "TILEROW": "0",
              "TILECOL": "1", "I": "200", "J": "60", "INFOFORMAT": "application/json", "TIME": TIMES[1]}
    doc = requests.get(KVP, params=params, timeout=30).json()
    lon, lat = -90 + (200.5) * 90 / 256, 90 - 60.5 * 90 / 256
    i, j = cells(LAT, np.array([lat]))[0], lon_cells(np.array([lon]))[0]
    assert doc["features"][0]["properties"]["value"] == pytest.approx(float(TAS[1, i, j]))


@pytest.mark.parametrize("params,code,status", [
    ({"REQUEST": "GetTile", "LAYER": "tas", "TILEMATRIXSET": "WorldCRS84Quad", "TILEMATRIX": "1", "TILEROW": "2",
      "TILECOL": "0"}, "TileOutOfRange", 400),
    ({"REQUEST": "GetTile", "LAYER": "nope", "TILEMATRIXSET": "WorldCRS84Quad", "TILEMATRIX": "0", "TILEROW": "0",
      "TILECOL": "0"}, "InvalidParameterValue", 400),
    ({"REQUEST": "GetTile", "LAYER": "tas", "TILEMATRIXSET": "Other", "TILEMATRIX": "0", "TILEROW": "0",
      "TILECOL": "0"}, "InvalidParameterValue", 400),
    ({"REQUEST": "GetTile", "LAYER": "tas", "TILEMATRIXSET": "WorldCRS84Quad", "TILEMATRIX": "0"},
     "MissingParameterValue", 400),
    ({"REQUEST": "GetTile", "LAYER": "tas", "STYLE": "sepia", "TILEMATRIXSET": "WorldCRS84Quad", "TILEMATRIX": "0",
      "TILEROW": "0", "TILECOL": "0"}, "InvalidParameterValue", 400),
    ({"REQUEST": "GetMap"}, "OperationNotSupported", 501),
    ({}, "MissingParameterValue", 400),
    ({"REQUEST": "GetTile", "VERSION": "2.0.0", "LAYER": "tas", "TILEMATRIXSET": "WorldCRS84Quad",
      "TILEMATRIX": "0", "TILEROW": "0", "TILECOL": "0"}, "InvalidParameterValue", 400),
    ({"REQUEST": "GetFeatureInfo", "LAYER": "tas", "TILEMATRIXSET": "WorldCRS84Quad", "TILEMATRIX": "0",
      "TILEROW": "0", "TILECOL": "0", "I": "3", "J": "256"}, "PointIJOutOfRange", 400),
])
def test_errors_are_ows_exception_reports(params, code, status):
    r = requests.get(KVP, params={"SERVICE": "WMTS", **params}, timeout=30)
    assert r.status_code == status, r.text
    doc = ET.fromstring(r.content)
    assert doc.tag == "{http://www.opengis.net/ows/1.1}ExceptionReport"
    assert doc.find("ows:Exception", NS).get("exceptionCode") == code, r.text


def test_get_tile_defaults_are_the_capabilities_defaults():
    """No STYLE is the default style (gray), no TIME the advertised default
    (the latest), and a dimension the layer does not have is ignored."""
    base = {"SERVICE": "WMTS", "REQUEST": "GetTile", "VERSION": "1.0.0", "LAYER": "tas", "FORMAT": "image/png",
            "TILEMATRIXSET": "WebMercatorQuad", "TILEMATRIX": "1", "TILEROW": "1", "TILECOL": "0"}
    plain = requests.get(KVP, params=base, timeout=30)
    assert plain.status_code == 200, plain.text
    named = requests.get(KVP, params={**base, "STYLE": "gray", "TIME": TIMES[3], "ELEVATION": "10"}, timeout=30)
    assert named.status_code == 200 and named.content == plain.content
    other = requests.get(KVP, params={**base, "TIME": TIMES[0]}, timeout=30)
    assert other.status_code == 200 and other.content != plain.content
    lons, lats = tile_pixels("WebMercatorQuad", 1, 1, 0)
    lo, hi = default_range(3)
    assert_same(png(plain), expected(lons, lats, 3, lo, hi, "gray"))


def test_feature_info_in_web_mercator_as_text():
    # Tile 2/1/2 of WebMercatorQuad: 0..90°E, 0..66.5°N; pixel (128, 200).
    params = {"SERVICE": "WMTS", "REQUEST": "GetFeatureInfo", "VERSION": "1.0.0", "LAYER": "tas",
              "TILEMATRIXSET": "WebMercatorQuad", "TILEMATRIX": "2", "TILEROW": "1", "TILECOL": "2",
              "I": "128", "J": "200", "INFOFORMAT": "text/plain"}
    r = requests.get(KVP, params=params, timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain"), r.text
    lons, lats = tile_pixels("WebMercatorQuad", 2, 1, 2)
    i, j = cells(LAT, lats[200:201])[0], lon_cells(lons[128:129])[0]
    value = float(r.text.split("value: ")[1].split()[0])
    assert value == pytest.approx(float(TAS[3, i, j]))
