"""The explorer (contract 2.7) in a real headless Chromium, driven by
selenium: every node of the sample datasets reachable from `/` by links,
metadata as visible text, the preview loads and follows its controls, the
curl command shown fetches the picture shown, no console errors.

Needs Debian's chromium and chromium-driver (scripts/ci/setup.sh installs
them). A screenshot of an array page goes to $ZS_ARTIFACTS (default
artifacts/ in the repository).

    TEST_SERVER_URL=http://127.0.0.1:8080 pytest tests/python/test_explorer_browser.py
"""

from __future__ import annotations

import io
import shlex
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

import numpy as np
import pytest
import requests
from PIL import Image

from clients import ARTIFACTS, chromium, console_errors, have_chromium, require
from common import BASE_URL

SAMPLE_DATASETS = ["sample", "stations"]

require(have_chromium(), "chromium and chromedriver", module=True)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


def open_page(driver, path: str):
    driver.get(BASE_URL + path)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")
    errors = console_errors(driver)
    assert not errors, f"console errors on {path}: {errors}"


def links(driver) -> list[str]:
    return driver.execute_script("return Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'))")


def api_nodes(ds: str) -> set[str]:
    """Every node of a dataset, walked through the API."""
    found, todo = set(), [""]
    while todo:
        path = todo.pop()
        doc = requests.get(f"{BASE_URL}/v1/datasets/{ds}/nodes/{path}", timeout=30).json()
        found.add(path)
        for child in doc.get("children", []):
            todo.append(child["path"].lstrip("/"))
    return found


def wait_for_picture(driver, contains: str):
    def loaded(d):
        return d.execute_script(
            "const i = document.getElementById('preview-img');"
            "return i.complete && i.naturalWidth > 0 && i.currentSrc.includes(arguments[0]);", contains)
    WebDriverWait(driver, 30).until(loaded)


def picture_src(driver) -> str:
    return driver.execute_script("return document.getElementById('preview-img').currentSrc")


def test_every_sample_node_is_reachable_by_links(browser):
    reached: dict[str, set[str]] = {ds: set() for ds in SAMPLE_DATASETS}
    seen, todo = set(), ["/"]
    while todo:
        page = todo.pop()
        if page in seen:
            continue
        seen.add(page)
        open_page(browser, page)
        for href in links(browser):
            parts = unquote(href).split("/")
            if not href.startswith("/explore/") or parts[2] not in SAMPLE_DATASETS:
                continue
            reached[parts[2]].add("/".join(parts[3:]))
            todo.append(href)
    for ds in SAMPLE_DATASETS:
        assert api_nodes(ds) == reached[ds] | {""}, ds


def test_every_fixture_page_answers():
    """Every node of the fixture dataset (v2, 0-d, unreadable, odd names),
    reached by the pages' links, answers 200 with HTML."""
    import re
    reached, todo = set(), ["/explore/fixtures"]
    while todo:
        page = todo.pop()
        if page in reached:
            continue
        reached.add(page)
        r = requests.get(BASE_URL + page, timeout=60)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), page
        todo += [h for h in re.findall(r'href="(/explore/fixtures/[^"]*)"', r.text)]
    want = {"/explore/fixtures" + ("/" + p if p else "") for p in api_nodes("fixtures")}
    assert {unquote(p) for p in reached} == want


def test_root_is_the_explorer_for_browsers_only():
    html = requests.get(BASE_URL + "/", headers={"Accept": "text/html"}, timeout=30)
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in html.headers["content-security-policy"]
    other = requests.get(BASE_URL + "/", timeout=30)
    assert other.status_code == 404 and other.headers["content-type"] == "application/problem+json"


def test_array_page_shows_metadata_and_a_preview_that_follows_the_controls(browser):
    open_page(browser, "/explore/sample/temperature")
    text = browser.find_element(By.TAG_NAME, "main").text
    for shown in ["64 × 256 × 256", "float32", "16 × 128 × 128", "4 × 32 × 32", "time, y, x",
                  "air temperature", "sharding_indexed", "zstd"]:
        assert shown in text, shown
    # Every control is labelled.
    unlabelled = browser.execute_script(
        "return Array.from(document.querySelectorAll('#controls input, #controls select'))"
        ".filter(c => !document.querySelector('label[for=\"' + c.id + '\"]')).map(c => c.id)")
    assert unlabelled == []
    wait_for_picture(browser, "select=0,:,:")
    first = picture_src(browser)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "explorer-array.png"))
    # The time slider, by keyboard: three steps right.
    slider = browser.find_element(By.ID, "dim-0")
    slider.send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)
    wait_for_picture(browser, "select=3,:,:")
    moved = picture_src(browser)
    assert browser.find_element(By.ID, "dim-0-value").text == "3"
    a = requests.get(first, timeout=30).content
    b = requests.get(moved, timeout=30).content
    assert Image.open(io.BytesIO(a)).size == Image.open(io.BytesIO(b)).size == (256, 256)
    assert a != b, "moving the slider changes the picture"
    # Colormap and rescale.
    Select(browser.find_element(By.ID, "colormap")).select_by_value("magma")
    browser.find_element(By.ID, "rescale-lo").send_keys("250", Keys.TAB)
    browser.find_element(By.ID, "rescale-hi").send_keys("300", Keys.TAB)
    wait_for_picture(browser, "rescale=250%2C300")
    shown = picture_src(browser)
    query = parse_qs(urlparse(shown).query)
    assert query["colormap"] == ["magma"] and query["select"] == ["3,:,:"] and query["rescale"] == ["250,300"]
    # The curl command fetches exactly the picture shown.
    command = shlex.split(browser.find_element(By.ID, "curl").text)
    assert command[:3] == ["curl", "-o", "preview.png"]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(command, cwd=tmp, check=True, timeout=60)
        fetched = (Path(tmp) / "preview.png").read_bytes()
    assert fetched == requests.get(shown, timeout=30).content
    size = browser.execute_script(
        "const i = document.getElementById('preview-img'); return [i.naturalWidth, i.naturalHeight]")
    assert list(Image.open(io.BytesIO(fetched)).size) == size
    # The Python snippet names the same slice.
    assert "\"select\": \"3,:,:\"" in browser.find_element(By.ID, "python").text
    assert not console_errors(browser)


def test_label_picker_moves_the_slider(browser):
    open_page(browser, "/explore/fixtures/xarray_grid/t2m")
    picker = Select(browser.find_element(By.ID, "dim-0-label"))
    labels = [o.text for o in picker.options]
    times = requests.get(f"{BASE_URL}/v1/datasets/fixtures/data/xarray_grid/t2m?select=:,0,0&format=json",
                         timeout=30).json()["coords"]["time"]
    assert labels == times
    picker.select_by_index(2)
    wait_for_picture(browser, "select=2,:,:")
    assert browser.find_element(By.ID, "dim-0").get_attribute("value") == "2"
    assert not console_errors(browser)


def test_large_arrays_are_coarsened_to_fit(browser):
    open_page(browser, "/explore/sample/mask")
    wait_for_picture(browser, "format=png")
    # 256 × 256 fits: drawn whole, no coarsening.
    assert "coarsen" not in picture_src(browser)


def test_one_dimensional_arrays_show_their_first_values(browser):
    open_page(browser, "/explore/sample/labels/names")
    table = browser.find_element(By.ID, "values-table").text
    names = requests.get(f"{BASE_URL}/v1/datasets/sample/data/labels/names", timeout=30).json()["data"]
    for name in names:
        assert name in table
    open_page(browser, "/explore/stations/time")
    table = browser.find_element(By.ID, "values-table").text
    assert "2020-01-01" in table


def test_packed_cf_data_is_previewed_unpacked(browser):
    """stations/temperature is int16 with scale_factor and a fill value: the
    preview decodes it (decode=cf), so missing values are transparent
    instead of stretching the colour range."""
    import numpy as np
    open_page(browser, "/explore/stations/temperature")
    wait_for_picture(browser, "decode=cf")
    picture = np.asarray(Image.open(io.BytesIO(requests.get(picture_src(browser), timeout=30).content)).convert("RGBA"))
    raw = np.load(io.BytesIO(requests.get(f"{BASE_URL}/v1/datasets/stations/data/temperature",
                                          params={"format": "npy"}, timeout=30).content))
    missing = raw == -32768
    assert missing.any() and (picture[..., 3] == np.where(missing, 0, 255)).all()
    assert "decode=cf" in browser.find_element(By.ID, "curl").text
    assert "\"decode\": \"cf\"" in browser.find_element(By.ID, "python").text
    assert not console_errors(browser)


def map_tiles_loaded(driver) -> int:
    return driver.execute_script(
        "return document.querySelectorAll('#map-view img.leaflet-tile-loaded').length")


def test_geo_variables_show_a_map_that_follows_the_controls(browser):
    """climate/tas (contract 3.3 in the explorer): Leaflet loads the tiles
    from the TileJSON, the colour bar is the WMS legend, the value under the
    cursor is zarr-python's value of that cell, and the time picker and
    colormap move the tiles, the legend and the readout together."""
    from geo import LAT, TAS, cells, lon_cells

    open_page(browser, "/explore/climate/tas")
    WebDriverWait(browser, 30).until(lambda d: map_tiles_loaded(d) >= 2)
    assert "tile-error" not in browser.find_element(By.ID, "map").get_attribute("class")
    legend = browser.find_element(By.ID, "map-legend")
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return arguments[0].naturalHeight", legend) == 256)
    assert "GetLegendGraphic" in legend.get_attribute("src") and "STYLE=viridis" in legend.get_attribute("src")
    shown = browser.find_element(By.CSS_SELECTOR, "#map dl").text
    assert "tilejson.json?variable=tas" in shown and "REQUEST=GetCapabilities" in shown
    assert "/tiles/WebMercatorQuad/{z}/{y}/{x}?variable=tas" in shown

    def hover_value():
        from selenium.webdriver.common.action_chains import ActionChains
        view = browser.find_element(By.ID, "map-view")
        readout = browser.find_element(By.ID, "map-value")
        before = readout.text
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", view)
        # East and north of the map's centre (0°, 0°), the whole world in view.
        ActionChains(browser).move_to_element_with_offset(view, 40, -30).perform()
        WebDriverWait(browser, 30).until(lambda d: readout.text != before and ":" in readout.text)
        lon, lat = float(readout.get_attribute("data-lon")), float(readout.get_attribute("data-lat"))
        assert 0 < lon < 180 and 0 < lat < 85, (lon, lat)
        return lon, lat, readout.get_attribute("data-value")

    # The page opens on the first time (the preview's picker); the value
    # under the cursor is that time's.
    lon, lat, value = hover_value()
    i, j = cells(LAT, np.array([lat]))[0], lon_cells(np.array([lon]))[0]
    assert float(value) == pytest.approx(float(TAS[0, i, j]), rel=1e-6)
    tile_src = browser.execute_script(
        "return document.querySelector('#map-view img.leaflet-tile-loaded').src")
    assert "sel=time%3D2024-01-01" in tile_src, tile_src
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "explorer-map.png"))

    # Another time and colormap: new tiles, legend and value.
    Select(browser.find_element(By.CSS_SELECTOR, "select[data-name=time]")).select_by_index(2)
    Select(browser.find_element(By.ID, "colormap")).select_by_value("magma")
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(
        "return Array.from(document.querySelectorAll('#map-view img.leaflet-tile-loaded'))"
        ".some(i => i.src.includes('colormap=magma') && i.src.includes('2024-01-03'))"))
    assert "STYLE=magma" in legend.get_attribute("src") and "DIM_time=2024-01-03" in legend.get_attribute("src")
    browser.execute_script("document.getElementById('map-value').textContent = 'moved'")
    lon, lat, value = hover_value()
    i, j = cells(LAT, np.array([lat]))[0], lon_cells(np.array([lon]))[0]
    assert float(value) == pytest.approx(float(TAS[2, i, j]), rel=1e-6)
    assert not console_errors(browser)


def test_the_map_draws_coastlines_and_borders_from_the_service_alone(browser):
    """Natural Earth 1:110m coastlines and borders, built into the binary,
    drawn over the field (as SVG paths above the tiles), toggled off and on
    by the layers control; no request of the page leaves the service."""
    open_page(browser, "/explore/climate/tas")
    WebDriverWait(browser, 30).until(lambda d: map_tiles_loaded(d) >= 2)
    WebDriverWait(browser, 30).until(
        lambda d: d.execute_script("return document.getElementById('map').dataset.outlines") in ("loaded", "failed"))
    assert browser.execute_script("return document.getElementById('map').dataset.outlines") == "loaded"
    counts = browser.execute_script(
        "const o = document.getElementById('map').zsOutlines; return {coast: o.coast, border: o.border}")
    # world-atlas 2.0.2's countries-110m: arcs of coasts and of borders between countries
    assert counts["coast"] > 100 and counts["border"] > 100, counts

    def drawn(kind):
        return browser.execute_script(
            "return Array.from(document.querySelectorAll('#map-view path.outline-' + arguments[0]))"
            ".filter(p => (p.getAttribute('d') || '').length > 100).length", kind)

    assert drawn("coast") >= 1 and drawn("border") >= 1
    # Above the tiles: the overlay pane is stacked over the tile pane.
    z = browser.execute_script(
        "const m = document.getElementById('map').zsMap;"
        "return [getComputedStyle(m.getPane('overlayPane')).zIndex, getComputedStyle(m.getPane('tilePane')).zIndex]")
    assert int(z[0]) > int(z[1]), z
    toggle = browser.find_element(By.CSS_SELECTOR, "#map-view .leaflet-control-layers-overlays input[type=checkbox]")
    assert "Coastlines and borders" in browser.find_element(By.CSS_SELECTOR, "#map-view .leaflet-control-layers").text
    toggle.click()
    WebDriverWait(browser, 10).until(lambda d: drawn("coast") == 0 and drawn("border") == 0)
    toggle.click()
    WebDriverWait(browser, 10).until(lambda d: drawn("coast") >= 1)
    origin = "{0.scheme}://{0.netloc}".format(urlparse(BASE_URL))
    requested = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name).concat([location.href])")
    assert any(u.endswith("/explore-assets/countries-110m.json") for u in requested), requested
    elsewhere = [u for u in requested if not u.startswith(origin + "/")]
    assert not elsewhere, f"requests that left the service: {elsewhere}"
    assert not console_errors(browser)


def test_arrays_that_are_not_geo_variables_have_no_map(browser):
    open_page(browser, "/explore/sample/temperature")
    assert not browser.find_elements(By.ID, "map")
