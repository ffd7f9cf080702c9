"""Real map clients against a *running* zarr-serve (contract 3.3, "Must work
from"), on the sample's geo variable `climate/tas`:

- GDAL's WMS driver (gdal_translate, Debian's gdal-bin) reading windows
  through a service description in CRS:84, EPSG:4326 and EPSG:3857, and
  through the subdatasets it finds in GetCapabilities;
- GDAL's TMS minidriver reading windows of WebMercatorQuad and
  WorldCRS84Quad tiles through the TileJSON's URL template;
- GDAL's WMTS driver reading the layer through the WMTS capabilities;
- a Leaflet and an OpenLayers page (npm packages from .cache/mapjs, served
  here by a static server on another origin) in headless Chromium, each
  reading the TileJSON and showing its XYZ template, and an OpenLayers page
  making its WMTS source from the capabilities (optionsFromCapabilities);
- QGIS (Debian's python3-qgis, run by Debian's Python: maps/qgis_render.py)
  rendering a WMS, an XYZ and a WMTS layer headless.

Every picture a client makes is compared pixel by pixel with zarr-python's
values, sampled by the contract's cell rule and coloured by matplotlib
(geo.py), at pixels whose cell is the same a little either side of their
centre: 1/1000 pixel for clients that ask for exactly the pixels they show,
1 pixel for the browsers, which may place tiles at fractions of a pixel.
The pictures go to $ZS_ARTIFACTS (default artifacts/) as map-*.png.

    TEST_SERVER_URL=http://127.0.0.1:8080 pytest tests/python/test_map_clients.py

scripts/ci/setup.sh installs the clients; in CI a missing one fails its
tests, elsewhere it skips them (clients.py).
"""

from __future__ import annotations

import base64
import functools
import io
import json
import os
import re
import shutil
import subprocess
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, urlencode
from xml.sax.saxutils import escape

import numpy as np
import pytest
import requests
from PIL import Image

from clients import ARTIFACTS, chromium, console_errors, have_chromium, require
from geo import (
    CLIMATE_URL,
    MERCATOR_HALF,
    REPO_ROOT,
    WMS,
    assert_pixels,
    default_range,
    expected,
    lat_cells,
    lon_cells,
    mercator_lat,
    mercator_lon,
    steady,
)

HERE = Path(__file__).resolve().parent
GDAL_TRANSLATE = shutil.which("gdal_translate")
GDALINFO = shutil.which("gdalinfo")
MAPJS = Path(os.environ.get("ZS_MAPJS", REPO_ROOT / ".cache" / "mapjs" / "node_modules"))
LEAFLET = MAPJS / "leaflet" / "dist"
OPENLAYERS = MAPJS / "ol"
# python3-qgis belongs to Debian's own Python, not to the test venv's.
QGIS_PYTHON = os.environ.get("ZS_QGIS_PYTHON", "/usr/bin/python3")
LATEST = 3  # the time index a request without TIME or sel shows
EXACT = 1e-3  # pixels: the cell-edge margin for clients that ask for exactly the pixels they show
MAGENTA = (255, 0, 255)  # the web pages' background, in no colormap


def mask(lon_of, lat_of, width: int, height: int, margin: float) -> np.ndarray:
    """Pixels whose cell is the same `margin` pixels either side of their
    centre; lon_of/lat_of map a pixel position (column, row) to degrees."""
    x = steady(lon_of, np.arange(width) + 0.5, lon_cells, margin)
    y = steady(lat_of, np.arange(height) + 0.5, lat_cells, margin)
    return y[:, None] & x[None, :]


def rgba(data: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(data))
    assert image.mode == "RGBA", image.mode
    return np.asarray(image)


# --- GDAL -------------------------------------------------------------------

def gdal(*args: str) -> subprocess.CompletedProcess:
    """Run a GDAL program, logging the URLs it asks for (CPL_DEBUG)."""
    require(GDAL_TRANSLATE is not None and GDALINFO is not None, "GDAL (Debian's gdal-bin)")
    # No tile cache (the WMTS driver keeps one in ./gdalwmscache): every run asks the server.
    env = {**os.environ, "CPL_DEBUG": "ON", "GDAL_PAM_ENABLED": "NO", "GDAL_HTTP_TIMEOUT": "60",
           "GDAL_ENABLE_WMS_CACHE": "NO"}
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{' '.join(args)}:\n{proc.stderr[-4000:]}"
    return proc


def asked(proc: subprocess.CompletedProcess) -> list[str]:
    """The URLs GDAL's WMS driver requested (its debug log)."""
    return re.findall(r"HTTP: Requesting \[\d+/\d+\] (\S+)", proc.stderr)


def gdal_translate(source: str, name: str, *args: str) -> tuple[np.ndarray, list[str]]:
    """gdal_translate SOURCE to a PNG in the artifacts; its RGBA pixels and the URLs asked."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    out = ARTIFACTS / f"map-gdal-{name}.png"
    proc = gdal(GDAL_TRANSLATE, "-of", "PNG", *args, source, str(out))
    urls = asked(proc)
    assert urls, f"GDAL asked for nothing:\n{proc.stderr[-2000:]}"
    return rgba(out.read_bytes()), urls


def service_description(name: str, kind: str, service: dict, data_window: dict, **extra: str) -> str:
    """A GDAL_WMS service description of minidriver `kind` (WMS, TMS), saved
    next to the picture (a reader can run gdal_translate on it again);
    returns its path."""
    fields = "".join(f"<{k}>{escape(str(v))}</{k}>" for k, v in service.items())
    window = "".join(f"<{k}>{v}</{k}>" for k, v in data_window.items())
    more = "".join(f"<{k}>{v}</{k}>" for k, v in extra.items())
    xml = (f'<GDAL_WMS><Service name="{kind}">{fields}</Service><DataWindow>{window}</DataWindow>'
           f"<BandsCount>4</BandsCount><BlockSizeX>256</BlockSizeX><BlockSizeY>256</BlockSizeY>{more}</GDAL_WMS>\n")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"map-gdal-{name}.xml"
    path.write_text(xml)
    return str(path)


WORLD_84 = {"UpperLeftX": -180, "UpperLeftY": 90, "LowerRightX": 180, "LowerRightY": -90}
WORLD_3857 = {"UpperLeftX": -MERCATOR_HALF, "UpperLeftY": MERCATOR_HALF,
              "LowerRightX": MERCATOR_HALF, "LowerRightY": -MERCATOR_HALF}

# name, CRS, GDAL's BBoxOrder, STYLES, extra query parameters, time index,
# colour range (None: the slice's minimum and maximum), colormap
WMS_CASES = [
    ("crs84", "CRS:84", "xyXY", "raster/turbo", {"TIME": "2024-01-02T00:00:00Z", "COLORSCALERANGE": "240,305"},
     1, (240.0, 305.0), "turbo"),
    # WMS 1.3.0's EPSG:4326 is latitude first; GDAL's WMS minidriver sends
    # longitude first unless told (BBoxOrder).
    ("epsg4326", "EPSG:4326", "yxYX", "viridis", {"TIME": "2024-01-03T00:00:00Z"}, 2, None, "viridis"),
    ("epsg3857", "EPSG:3857", "xyXY", "raster/magma", {"COLORSCALERANGE": "250,300"}, LATEST, (250.0, 300.0), "magma"),
]


@pytest.mark.parametrize("name,crs,order,style,extra,time,range_,colormap", WMS_CASES, ids=[c[0] for c in WMS_CASES])
def test_gdal_wms_reads_a_window(name, crs, order, style, extra, time, range_, colormap):
    service = {"Version": "1.3.0", "ServerUrl": f"{WMS}?{urlencode(extra)}", "CRS": crs, "ImageFormat": "image/png",
               "Layers": "tas", "Styles": style, "Transparent": "TRUE", "BBoxOrder": order}
    if crs == "EPSG:3857":
        # 4096 pixels square over the world; a window across the 0 meridian
        # (the grid's seam: longitudes 0..360) from 66°N to 0.
        size, (x0, y0, w, h) = 4096, (1700, 900, 700, 1150)
        window = {**WORLD_3857, "SizeX": size, "SizeY": size}
        lon_of = lambda p: mercator_lon((x0 + p) / size)  # noqa: E731
        lat_of = lambda p: mercator_lat((y0 + p) / size)  # noqa: E731
    else:
        # 10 pixels a degree; CRS:84 30°W to 30°E, 70°N to 40°S (the seam);
        # EPSG:4326 170°W to 110°W, 40°N to 30°S (the cells with no value).
        (x0, y0, w, h) = (1500, 200, 600, 1100) if crs == "CRS:84" else (100, 500, 600, 700)
        window = {**WORLD_84, "SizeX": 3600, "SizeY": 1800}
        lon_of = lambda p: -180 + (x0 + p) / 10  # noqa: E731
        lat_of = lambda p: 90 - (y0 + p) / 10  # noqa: E731
    source = service_description(f"wms-{name}", "WMS", service, window)
    got, urls = gdal_translate(source, f"wms-{name}", "-srcwin", str(x0), str(y0), str(w), str(h))
    assert len(urls) > 1 and all("request=GetMap" in u and f"crs={crs}" in u for u in urls), urls
    lo, hi = range_ or default_range(time)
    want = expected(lon_of(np.arange(w) + 0.5), lat_of(np.arange(h) + 0.5), time, lo, hi, colormap)
    assert_pixels(got, want, mask(lon_of, lat_of, w, h, EXACT), least=int(0.99 * w * h))


@pytest.mark.parametrize("crs", ["CRS:84", "EPSG:4326"])
def test_gdal_wms_opens_the_layer_its_capabilities_name(crs):
    """`gdalinfo WMS:<url>` lists the layers of GetCapabilities as
    subdatasets; GDAL opens one by its name and reads the whole layer at
    2048 × 1024 (one of its overviews), default style, time and range.
    GDAL asks for image/jpeg unless the connection names FORMAT (this
    server serves PNG only): the connection string names it, as a user would."""
    proc = gdal(GDALINFO, f"WMS:{WMS}?SERVICE=WMS&REQUEST=GetCapabilities&FORMAT=image/png&TRANSPARENT=TRUE")
    names = re.findall(r"SUBDATASET_\d+_NAME=(\S+)", proc.stdout)
    assert len(names) == 1 and "LAYERS=tas" in names[0], proc.stdout
    assert re.search(r"SUBDATASET_1_DESC=near-surface air temperature", proc.stdout), proc.stdout
    name = names[0]
    assert "CRS=CRS:84" in name and "BBOX=-180,-90,180,90" in name and "FORMAT=image/png" in name, name
    if crs == "EPSG:4326":  # latitude first in the connection; GDAL then asks latitude first too
        name = name.replace("CRS=CRS:84", "CRS=EPSG:4326").replace("BBOX=-180,-90,180,90", "BBOX=-90,-180,90,180")
    got, urls = gdal_translate(name, f"wms-capabilities-{crs.replace(':', '').lower()}", "-outsize", "2048", "1024")
    want_bbox = "bbox=-90.00000000,-180.00000000" if crs == "EPSG:4326" else "bbox=-180.00000000,-90.00000000"
    assert any(want_bbox in u for u in urls), urls
    lon_of = lambda p: -180 + p * 360 / 2048  # noqa: E731
    lat_of = lambda p: 90 - p * 180 / 1024  # noqa: E731
    lo, hi = default_range(LATEST)
    want = expected(lon_of(np.arange(2048) + 0.5), lat_of(np.arange(1024) + 0.5), LATEST, lo, hi, "gray")
    assert_pixels(got, want, mask(lon_of, lat_of, 2048, 1024, EXACT), least=int(0.99 * 2048 * 1024))


# tile matrix set, zoom, window (x0, y0, width, height) at that zoom, TileJSON
# query, time, range, colormap: the first across the seam (22°W to 101°E),
# the second over the cells with no value (175°W to 87°W, 37°N to 16°S).
TMS_CASES = [
    ("WebMercatorQuad", 3, (900, 400, 700, 800), {"colormap": "magma", "rescale": "240,305"},
     LATEST, (240.0, 305.0), "magma"),
    ("WorldCRS84Quad", 2, (30, 300, 500, 300), {"colormap": "cividis", "sel": "time=2024-01-01"}, 0, None, "cividis"),
]


@pytest.mark.parametrize("tms,z,window,query,time,range_,colormap", TMS_CASES, ids=[c[0] for c in TMS_CASES])
def test_gdal_tms_reads_a_window(tms, z, window, query, time, range_, colormap):
    """GDAL's TMS minidriver on the TileJSON's template ({z}/{y}/{x} as
    GDAL's ${z}/${y}/${x}, y from the top), one zoom level as a raster."""
    doc = requests.get(f"{CLIMATE_URL}/tiles/{tms}/tilejson.json", params={"variable": "tas", **query},
                       timeout=30).json()
    template = doc["tiles"][0]
    assert "{z}/{y}/{x}" in template, template
    server_url = template.replace("{z}", "${z}").replace("{y}", "${y}").replace("{x}", "${x}")
    mercator = tms == "WebMercatorQuad"
    data_window = {**(WORLD_3857 if mercator else WORLD_84), "TileLevel": z, "TileCountX": 1 if mercator else 2,
                   "TileCountY": 1, "YOrigin": "top"}
    source = service_description(f"tms-{tms.lower()}", "TMS", {"ServerUrl": server_url}, data_window,
                                 Projection="EPSG:3857" if mercator else "EPSG:4326")
    x0, y0, w, h = window
    got, urls = gdal_translate(source, f"tms-{tms.lower()}", "-srcwin", str(x0), str(y0), str(w), str(h))
    assert len(urls) > 1 and all(f"/tiles/{tms}/{z}/" in u and "variable=tas" in u for u in urls), urls
    rows = 256 * 2 ** z
    if mercator:
        lon_of = lambda p: mercator_lon((x0 + p) / rows)  # noqa: E731
        lat_of = lambda p: mercator_lat((y0 + p) / rows)  # noqa: E731
    else:
        lon_of = lambda p: -180 + (x0 + p) * 180 / rows  # noqa: E731
        lat_of = lambda p: 90 - (y0 + p) * 180 / rows  # noqa: E731
    lo, hi = range_ or default_range(time)
    want = expected(lon_of(np.arange(w) + 0.5), lat_of(np.arange(h) + 0.5), time, lo, hi, colormap)
    assert_pixels(got, want, mask(lon_of, lat_of, w, h, EXACT), least=int(0.99 * w * h))


# tile matrix set, -outsize, style: the whole layer at one of the overviews
# GDAL makes of the deepest tile matrix the capabilities list.
WMTS_CASES = [("WorldCRS84Quad", (1024, 512), "cividis"), ("WebMercatorQuad", (512, 512), "magma")]


@pytest.mark.parametrize("tms,size,style", WMTS_CASES, ids=[c[0] for c in WMTS_CASES])
def test_gdal_wmts_reads_the_layer(tms, size, style):
    """GDAL's WMTS driver on the RESTful capabilities (api.md 4.6): it
    finds the layer, its tile matrix set and style, and reads tiles through
    the ResourceURL template (the tile route, with the time dimension's
    default, the latest time)."""
    caps = f"{CLIMATE_URL}/wmts/1.0.0/WMTSCapabilities.xml"
    w, h = size
    got, urls = gdal_translate(f"WMTS:{caps},layer=tas,tilematrixset={tms},style={style}", f"wmts-{tms.lower()}",
                               "-outsize", str(w), str(h))
    assert all(f"/tiles/{tms}/" in u and f"colormap={style}" in u for u in urls), urls
    if tms == "WebMercatorQuad":
        lon_of = lambda p: mercator_lon(p / w)  # noqa: E731
        lat_of = lambda p: mercator_lat(p / h)  # noqa: E731
    else:
        lon_of = lambda p: -180 + p * 360 / w  # noqa: E731
        lat_of = lambda p: 90 - p * 180 / h  # noqa: E731
    lo, hi = default_range(LATEST)
    want = expected(lon_of(np.arange(w) + 0.5), lat_of(np.arange(h) + 0.5), LATEST, lo, hi, style)
    assert_pixels(got, want, mask(lon_of, lat_of, w, h, EXACT), least=int(0.99 * w * h))


# --- Leaflet and OpenLayers in headless Chromium -----------------------------

class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def page_server(tmp_path_factory):
    """The test pages with the npm packages, from a static server: another
    origin than zarr-serve's, so the pages need its CORS headers."""
    require((LEAFLET / "leaflet.js").exists() and (OPENLAYERS / "dist" / "ol.js").exists(),
            f"leaflet and ol (npm, in {MAPJS})")
    root = tmp_path_factory.mktemp("map-pages")
    for page in ("leaflet.html", "openlayers.html", "openlayers-wmts.html"):
        (root / page).symlink_to(HERE / "maps" / page)
    (root / "leaflet").symlink_to(LEAFLET)
    (root / "ol").symlink_to(OPENLAYERS)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    require(have_chromium(), "chromium and chromedriver")
    with chromium(window="1280,800") as driver:
        yield driver


def wait_for_tiles(driver) -> dict:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 60).until(lambda d: d.execute_script("return state.done || state.failure !== null"))
    state = driver.execute_script("return state")
    assert state["failure"] is None, state["failure"]
    assert state["errors"] == [], f"tiles that failed: {state['errors']}"
    # Two frames more: the loaded tiles are painted.
    driver.execute_async_script("const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(done));")
    return state


def check_view(driver, page: str, view: str, time: int, lo: float, hi: float, colormap: str):
    """The map element's pixels (a screenshot; for OpenLayers also its
    canvas) against the picture the contract gives for the map's frame."""
    from selenium.webdriver.common.by import By

    frame = driver.execute_script("return frame()")
    zoom = frame["zoom"]
    assert zoom == int(zoom), f"fractional zoom {zoom}"
    world = 256 * 2 ** int(zoom)
    w, h = frame["width"], frame["height"]

    def lat_of(p):
        t = (frame["y"] + p) / world
        return np.where((t >= 0) & (t <= 1), mercator_lat(t), np.nan)  # no tiles beyond the world

    def lon_of(p):
        return mercator_lon((frame["x"] + p) / world)

    want = expected(lon_of(np.arange(w) + 0.5), lat_of(np.arange(h) + 0.5), time, lo, hi, colormap)
    where = mask(lon_of, lat_of, w, h, 1.0)
    # Controls (attribution) cover the map: not compared.
    for left, top, right, bottom in driver.execute_script(
            "const m = document.getElementById('map').getBoundingClientRect();"
            "return Array.from(document.querySelectorAll('.leaflet-control, .ol-control')).map(e => {"
            "  const r = e.getBoundingClientRect();"
            "  return [r.left - m.left, r.top - m.top, r.right - m.left, r.bottom - m.top]; })"):
        where[max(0, int(top)):int(np.ceil(bottom)), max(0, int(left)):int(np.ceil(right))] = False
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = driver.find_element(By.ID, "map").screenshot_as_png
    (ARTIFACTS / f"map-{page}-{view}.png").write_bytes(shot)
    pixels = np.asarray(Image.open(io.BytesIO(shot)).convert("RGBA"))
    assert_pixels(pixels, want, where, background=MAGENTA, least=w * h // 10)
    if page == "openlayers":
        # Reading the canvas back needs CORS on every tile (else it is tainted).
        url = driver.execute_script("return canvasPng()")
        canvas = rgba(base64.b64decode(url.split(",", 1)[1]))
        assert_pixels(canvas, want, where, least=w * h // 10)


@pytest.mark.parametrize("page", ["leaflet", "openlayers"])
def test_web_map_shows_the_tiles(page, page_server, browser):
    """The page reads TileJSON from zarr-serve (another origin: CORS), adds
    its template as an XYZ layer and fits the map to its bounds (the
    whole world, the template's colormap and rescale kept); then moves to
    zoom 3 across the grid's 0 meridian seam. No tile fails, and the
    map shows the contract's colours."""
    tilejson = f"{CLIMATE_URL}/tiles/WebMercatorQuad/tilejson.json?variable=tas&colormap=viridis&rescale=240,305"
    browser.get(f"{page_server}/{page}.html?tilejson={quote(tilejson, safe='')}")
    state = wait_for_tiles(browser)
    assert state["tilejson"]["tiles"][0].startswith(f"{CLIMATE_URL}/tiles/WebMercatorQuad/{{z}}/{{y}}/{{x}}?")
    assert state["tiles"] > 0
    attribution = state["tilejson"]["attribution"]
    assert attribution and attribution in browser.execute_script("return document.getElementById('map').textContent")
    # Fitted: the world's whole width shows (Leaflet zooms to 1, OpenLayers to 2).
    frame = browser.execute_script("return frame()")
    assert 256 * 2 ** frame["zoom"] <= frame["width"], frame
    check_view(browser, page, "world", LATEST, 240.0, 305.0, "viridis")
    browser.execute_script("showView(0, 20, 3)")
    loaded = wait_for_tiles(browser)["tiles"]
    assert loaded > state["tiles"], "no tiles loaded for the new view"
    check_view(browser, page, "zoom3", LATEST, 240.0, 305.0, "viridis")
    assert not console_errors(browser)


def test_openlayers_shows_the_wmts_layer_its_capabilities_describe(page_server, browser):
    """OpenLayers reads the WMTS capabilities (ol.format.WMTSCapabilities,
    another origin: CORS), makes its source with optionsFromCapabilities
    (the time dimension at its default, the latest) and fits the world:
    no tile fails, and the map shows the contract's colours."""
    caps = f"{CLIMATE_URL}/wmts/1.0.0/WMTSCapabilities.xml"
    browser.get(f"{page_server}/openlayers-wmts.html?capabilities={quote(caps, safe='')}"
                "&layer=tas&matrixSet=WebMercatorQuad&style=viridis")
    state = wait_for_tiles(browser)
    options = state["options"]
    assert options["style"] == "viridis" and options["matrixSet"] == "WebMercatorQuad", options
    assert options["dimensions"] == {"time": "2024-01-04T00:00:00"}, options  # the default: the latest
    assert state["tiles"] > 0
    lo, hi = default_range(LATEST)
    check_view(browser, "openlayers", "wmts", LATEST, lo, hi, "viridis")
    assert not console_errors(browser)


# --- QGIS --------------------------------------------------------------------

@functools.cache
def have_qgis() -> bool:
    probe = subprocess.run([QGIS_PYTHON, "-c", "import qgis.core"], capture_output=True, timeout=60,
                           env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    return probe.returncode == 0


def qgis_render(tmp_path: Path, name: str, job: dict) -> tuple[np.ndarray, dict]:
    require(os.path.exists(QGIS_PYTHON) and have_qgis(), "QGIS (Debian's python3-qgis)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    out = ARTIFACTS / f"map-qgis-{name}.png"
    (tmp_path / "job.json").write_text(json.dumps({**job, "out": str(out)}))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(QT_QPA_PLATFORM="offscreen", XDG_RUNTIME_DIR=str(tmp_path), HOME=str(tmp_path))
    proc = subprocess.run([QGIS_PYTHON, str(HERE / "maps" / "qgis_render.py"), str(tmp_path / "job.json")],
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["valid"], result
    assert result["errors"] == [], result
    return rgba(out.read_bytes()), result


def test_qgis_renders_the_wms_layer(tmp_path):
    """A QGIS WMS layer (it reads GetCapabilities, then asks GetMap with
    its own DPI parameters) rendered at 4 pixels a degree in EPSG:4326,
    170°W to 10°E (the cells with no value and the seam)."""
    uri = f"crs=EPSG:4326&format=image/png&layers=tas&styles=raster/viridis&url={WMS}"
    w, h = 720, 360
    got, result = qgis_render(tmp_path, "wms", {"provider": "wms", "uri": uri, "crs": "EPSG:4326",
                                                 "extent": [-170, -30, 10, 60], "size": [w, h]})
    assert result["extent"] == [-170, -30, 10, 60]
    assert any("REQUEST=GetCapabilities" in u for u in result["requests"]), result["requests"]
    assert any("REQUEST=GetMap" in u for u in result["requests"]), result["requests"]
    lon_of = lambda p: -170 + p / 4  # noqa: E731
    lat_of = lambda p: 60 - p / 4  # noqa: E731
    lo, hi = default_range(LATEST)
    want = expected(lon_of(np.arange(w) + 0.5), lat_of(np.arange(h) + 0.5), LATEST, lo, hi, "viridis")
    assert_pixels(got, want, mask(lon_of, lat_of, w, h, EXACT), least=int(0.99 * w * h))


def test_qgis_renders_the_xyz_layer(tmp_path):
    """A QGIS XYZ layer on the TileJSON's template, rendered in EPSG:3857
    at the resolution of zoom 3 (QGIS then asks for zoom 3 tiles)."""
    doc = requests.get(f"{CLIMATE_URL}/tiles/WebMercatorQuad/tilejson.json",
                       params={"variable": "tas", "colormap": "plasma", "rescale": "240,305"}, timeout=30).json()
    uri = f"type=xyz&url={quote(doc['tiles'][0], safe='')}&zmin=0&zmax=8"
    z, (x0, y0, w, h) = 3, (900, 500, 600, 400)
    world = 256 * 2 ** z
    res = 2 * MERCATOR_HALF / world
    extent = [-MERCATOR_HALF + x0 * res, MERCATOR_HALF - (y0 + h) * res,
              -MERCATOR_HALF + (x0 + w) * res, MERCATOR_HALF - y0 * res]
    got, result = qgis_render(tmp_path, "xyz", {"provider": "wms", "uri": uri, "crs": "EPSG:3857",
                                                 "extent": extent, "size": [w, h]})
    tiles = result["requests"]
    assert tiles and all(f"/tiles/WebMercatorQuad/{z}/" in u for u in tiles), tiles
    lon_of = lambda p: mercator_lon((x0 + p) / world)  # noqa: E731
    lat_of = lambda p: mercator_lat((y0 + p) / world)  # noqa: E731
    want = expected(lon_of(np.arange(w) + 0.5), lat_of(np.arange(h) + 0.5), LATEST, 240.0, 305.0, "plasma")
    assert_pixels(got, want, mask(lon_of, lat_of, w, h, EXACT), least=int(0.99 * w * h))


def test_qgis_renders_the_wmts_layer(tmp_path):
    """A QGIS WMTS layer (the WMS provider on the WMTS capabilities, its
    layer, style and tile matrix set), rendered in EPSG:3857 at the
    resolution of zoom 2, the deepest the capabilities list for the 2°
    sample (QGIS then asks for zoom 2 tiles)."""
    caps = f"{CLIMATE_URL}/wmts/1.0.0/WMTSCapabilities.xml"
    uri = (f"contextualWMSLegend=0&crs=EPSG:3857&dpiMode=7&format=image/png&layers=tas&styles=cividis"
           f"&tileMatrixSet=WebMercatorQuad&url={caps}")
    z, (x0, y0, w, h) = 2, (300, 200, 500, 400)
    world = 256 * 2 ** z
    res = 2 * MERCATOR_HALF / world
    extent = [-MERCATOR_HALF + x0 * res, MERCATOR_HALF - (y0 + h) * res,
              -MERCATOR_HALF + (x0 + w) * res, MERCATOR_HALF - y0 * res]
    got, result = qgis_render(tmp_path, "wmts", {"provider": "wms", "uri": uri, "crs": "EPSG:3857",
                                                  "extent": extent, "size": [w, h]})
    asked = result["requests"]
    assert any("WMTSCapabilities.xml" in u for u in asked), asked
    tiles = [u for u in asked if "WMTSCapabilities" not in u]
    assert tiles and all(("/tiles/WebMercatorQuad/2/" in u or "TILEMATRIX=2" in u.upper()) for u in tiles), tiles
    lon_of = lambda p: mercator_lon((x0 + p) / world)  # noqa: E731
    lat_of = lambda p: mercator_lat((y0 + p) / world)  # noqa: E731
    lo, hi = default_range(LATEST)
    want = expected(lon_of(np.arange(w) + 0.5), lat_of(np.arange(h) + 0.5), LATEST, lo, hi, "cividis")
    assert_pixels(got, want, mask(lon_of, lat_of, w, h, EXACT), least=int(0.99 * w * h))
