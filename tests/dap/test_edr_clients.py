"""OGC API - Environmental Data Retrieval 1.1 (api.md 3.5) read by the
clients people use, every value compared with `xarray.open_zarr` of the same
store (CF-decoded floats; null, NaN or an empty CSV field for missing):

- every document validates: the landing page, conformance, the collections
  list and each collection with edr-pydantic (`model_validate_json`: its
  models are strict), every CoverageJSON answer with covjson-pydantic;
- collection metadata: ids (`climate`; `projected`, `projected.lcc`,
  `projected.utm`; none for `stations`), `extent` (spatial bbox as cell
  edges in CRS84, temporal interval and values), `parameter_names`,
  `data_queries`, `crs`, `output_formats`;
- position (POINT, MULTIPOINT as a CoverageCollection, the 0..360 store
  queried in -180..180, the shared-edge rule of 3.2, missing values as
  null), area (POLYGON with and without a hole, MULTIPOLYGON: the cells whose
  centres are inside, null elsewhere), cube (bbox, across the store's 0/360
  seam), radius (`within` in km, m and mi), trajectory (LINESTRING, with and
  without `datetime`; LINESTRINGM with M as epoch seconds);
- `datetime` as an instant, `a/b`, `../b` and `a/..`; `parameter-name` and
  its alias `parameter_names`; `crs=CRS84`;
- `f=CSV` read by pandas, `f=GeoJSON` FeatureCollections, `f=NetCDF` of
  area and cube read by `xarray.open_dataset(engine="netcdf4")`;
- errors as problem+json: WKT that does not parse (detail gives the
  character offset), a point outside the extent (detail gives the extent),
  `crs=EPSG:3857`, the wrong geometry for a query, an unknown parameter;
- edr-xarray's `xarray.open_dataset(COLLECTION_URL, engine="edr")` (it takes
  a collection URL and reads through /cube, CoverageJSON Grids only): the
  whole collection, a bbox, a one-cell bbox (its only way to a point
  series), a datetime interval and a lazy sub-selection;
- OWSLib's `EnvironmentalDataRetrieval`: landing page, `data()`, collection
  metadata, `query_data` for position and cube.

Runs in .venv-dap against the server TEST_SERVER_URL names, which serves
sample/climate.zarr as `climate`, sample/projected.zarr as `projected` and
sample/stations.zarr as `stations` (see test_dap_clients.py).
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import requests
import xarray as xr
from covjson_pydantic.coverage import Coverage, CoverageCollection
from edr_pydantic.capabilities import ConformanceModel, LandingPageModel
from edr_pydantic.collections import Collection, Collections
from owslib.ogcapi.edr import EnvironmentalDataRetrieval

ROOT = Path(__file__).resolve().parents[2]
BASE = os.environ.get("TEST_SERVER_URL", "http://127.0.0.1:8080").rstrip("/")
SAMPLE = ROOT / "sample"
QUERIES = ("position", "radius", "area", "cube", "trajectory")
FORMATS = ("CoverageJSON", "GeoJSON", "CSV", "NetCDF")
# Earth's mean radius (IUGG); api.md names no distance model, so cells whose
# centres lie within RADIUS_SLACK of the circle may go either way.
EARTH_KM = 6371.0088
RADIUS_SLACK = 0.005
# What edr-xarray's datetime encoder accepts (edr_xarray.query._ISO_INSTANT_RE).
ISO_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z")
AXES = {"x", "y", "z", "t"}


def edr_url(ds: str, path: str = "") -> str:
    return f"{BASE}/v1/datasets/{ds}/edr" + (f"/{path}" if path else "")


def get(ds: str, path: str, params: dict | None = None) -> requests.Response:
    return requests.get(edr_url(ds, path), params=params or {}, timeout=60)


def ok(ds: str, path: str, params: dict | None = None) -> requests.Response:
    resp = get(ds, path, params)
    assert resp.status_code == 200, (path, params, resp.text[:500])
    return resp


def problem(resp: requests.Response, status: int = 400) -> str:
    assert resp.status_code == status, (resp.status_code, resp.text[:500])
    assert resp.headers["content-type"].startswith("application/problem+json"), resp.headers
    body = resp.json()
    assert body["status"] == status and body["detail"], body
    return body["detail"]


def validate_covjson(body: bytes | str) -> dict:
    """covjson-pydantic's Coverage or CoverageCollection, then the plain JSON."""
    doc = json.loads(body)
    model = CoverageCollection if doc.get("type") == "CoverageCollection" else Coverage
    model.model_validate_json(body)
    return doc


def covjson(ds: str, collection: str, query: str, params: dict) -> dict:
    resp = ok(ds, f"collections/{collection}/{query}", params)
    assert "json" in resp.headers["content-type"], resp.headers["content-type"]
    return validate_covjson(resp.content)


def climate_query(query: str, **params) -> dict:
    return covjson("climate", "climate", query, {k.replace("_", "-"): v for k, v in params.items()})


# --- the store as xarray reads it -------------------------------------------------


@functools.cache
def climate() -> xr.Dataset:
    return xr.open_zarr(SAMPLE / "climate.zarr").load()


def cell_edges(centres: np.ndarray) -> np.ndarray:
    """3.2: edges are midpoints between neighbours, the outer ones mirrored."""
    c = np.asarray(centres, dtype="f8")
    mid = (c[:-1] + c[1:]) / 2
    return np.concatenate([[2 * c[0] - mid[0]], mid, [2 * c[-1] - mid[-1]]])


def cell_indices(centres: np.ndarray, values) -> np.ndarray:
    """The cell containing each value; on a shared edge, the larger index (3.2)."""
    edges = cell_edges(centres)
    v = np.asarray(values, dtype="f8")
    if edges[0] > edges[-1]:  # descending: negate, so the larger index still wins ties
        edges, v = -edges, -v
    index = np.searchsorted(edges, v, side="right") - 1
    assert ((index >= 0) & (index < len(centres))).all(), ("outside the grid", values)
    return index


def instants(values) -> np.ndarray:
    """ISO 8601 strings (or datetimes) as naive UTC datetime64[ns]."""
    stamps = pd.to_datetime(pd.Series(list(values)), utc=True).dt.tz_convert(None)
    return stamps.to_numpy().astype("datetime64[ns]")


def iso(t) -> str:
    return str(np.datetime_as_string(np.datetime64(t, "s"), unit="s", timezone="UTC"))


def times() -> np.ndarray:
    return climate().time.values


def epoch(t) -> int:
    return int(np.datetime64(t, "s").astype("int64"))


def tas_at(x, y, t) -> np.ndarray:
    """The store's tas at CRS84 points (any longitude: the store runs 0..360) and instants."""
    z = climate()
    ilon = cell_indices(z.lon.values, np.asarray(x, dtype="f8") % 360)
    ilat = cell_indices(z.lat.values, y)
    t, labels = instants(t), z.time.values
    it = np.searchsorted(labels, t)
    assert (it < len(labels)).all() and (labels[np.minimum(it, len(labels) - 1)] == t).all(), ("not a time step", t)
    return z.tas.values[it, ilat, ilon].astype("f8")


def lon180(x):
    return (np.asarray(x, dtype="f8") + 180) % 360 - 180


def store_cells() -> pd.DataFrame:
    """Every (x, y, t) cell centre of the store, x in -180..180."""
    z = climate()
    t, y, x = np.meshgrid(z.time.values, z.lat.values, z.lon.values, indexing="ij")
    return pd.DataFrame({"x": lon180(x.ravel()), "y": y.ravel(), "t": t.ravel()})


def cell_keys(x, y, t) -> set[tuple[float, float, int]]:
    """Hashable (x in -180..180, y, t in ns) keys of cell centres."""
    t = np.asarray(instants(t)).astype("int64")
    x, y = np.round(lon180(x), 6), np.round(np.asarray(y, dtype="f8"), 6)
    return set(zip(x.tolist(), y.tolist(), t.tolist()))


# --- answers as one row per value -------------------------------------------------


def records(doc: dict) -> list[dict]:
    """One dict per value of a CoverageJSON Coverage or CoverageCollection:
    the domain coordinates (`x`, `y`, `t`, `z`, also from a composite axis)
    and one entry per parameter (None for null)."""
    if doc["type"] == "CoverageCollection":
        return [row for cov in doc["coverages"] for row in records(cov)]
    axes = doc["domain"]["axes"]

    def axis(name):
        spec = axes[name]
        if "values" in spec:
            return spec["values"]
        return list(np.linspace(spec["start"], spec["stop"], spec["num"]))

    rows: list[dict] | None = None
    for param, rng in doc["ranges"].items():
        assert rng["type"] == "NdArray", rng["type"]
        names, shape, values = rng.get("axisNames", []), rng.get("shape", []), rng["values"]
        these = []
        for k, index in enumerate(np.ndindex(*shape)):
            row = {n: axis(n)[0] for n in axes if n not in names and n != "composite"}
            for name, i in zip(names, index):
                if name == "composite":
                    row.update(zip(axes["composite"]["coordinates"], axes["composite"]["values"][i]))
                else:
                    row[name] = axis(name)[i]
            row[param] = values[k]
            these.append(row)
        if rows is None:
            rows = these
        else:
            assert len(rows) == len(these), "ranges of one coverage differ in shape"
            for row, other in zip(rows, these):
                assert {k: row[k] for k in AXES & row.keys()} == {k: other[k] for k in AXES & other.keys()}
                row[param] = other[param]
    return rows or []


def frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if "t" in df:
        df["t"] = instants(df["t"])
    df["tas"] = pd.to_numeric(df["tas"], errors="coerce").astype("f8")  # null -> NaN
    df["x"] = df["x"].astype("f8")
    df["y"] = df["y"].astype("f8")
    return df


def assert_values(got, want):
    np.testing.assert_allclose(np.asarray(got, dtype="f8"), np.asarray(want, dtype="f8"), rtol=1e-6, equal_nan=True)


def assert_cells_match_store(df: pd.DataFrame):
    """Every row's value is the store's value in the cell under its x, y at its t."""
    assert_values(df["tas"], tas_at(df["x"], df["y"], df["t"]))


def check_referencing(doc: dict):
    """CRS84 for x/y and the Gregorian temporal RS for t, at the coverage or collection level."""
    docs = doc["coverages"] if doc["type"] == "CoverageCollection" else [doc]
    for cov in docs:
        refs = (cov["domain"].get("referencing") or []) + (doc.get("referencing") or [])
        geo = [r for r in refs if {"x", "y"} <= set(r["coordinates"])]
        assert geo and geo[0]["system"]["type"] == "GeographicCRS", refs
        assert "CRS84" in geo[0]["system"].get("id", ""), geo
        axes = cov["domain"]["axes"]
        if "t" in axes or "t" in (axes.get("composite") or {}).get("coordinates", []):
            trs = [r for r in refs if "t" in r["coordinates"]]
            assert trs and trs[0]["system"]["type"] == "TemporalRS", refs
            assert trs[0]["system"]["calendar"] == "Gregorian", trs


def check_tas_parameter(doc: dict):
    params = doc.get("parameters") or doc["coverages"][0]["parameters"]
    unit = params["tas"]["unit"]
    symbol = unit["symbol"]
    assert (symbol if isinstance(symbol, str) else symbol["value"]) == climate().tas.attrs["units"], unit


# --- documents --------------------------------------------------------------------

GEO = ["climate", "projected"]


@pytest.mark.parametrize("ds", GEO + ["stations"])
def test_landing_page_validates_and_links_conformance_and_collections(ds):
    doc = ok(ds, "").json()
    LandingPageModel.model_validate_json(json.dumps(doc))
    hrefs = [link["href"].split("?")[0].rstrip("/") for link in doc["links"]]
    assert any(h.endswith("/conformance") for h in hrefs), hrefs
    assert any(h.endswith("/collections") for h in hrefs), hrefs


def test_conformance_declares_core_collections_encodings_and_queries():
    resp = ok("climate", "conformance")
    ConformanceModel.model_validate_json(resp.content)
    classes = resp.json()["conformsTo"]
    edr = [c for c in classes if "/spec/ogcapi-edr-1/" in c]
    names = {c.rstrip("/").rsplit("/", 1)[1] for c in edr}
    assert {"core", "collections", "json", "covjson"} <= names, classes
    assert names & {"geojson", "edr-geojson"}, classes
    for q in QUERIES:
        assert q in names or "queries" in names, (q, classes)


@pytest.mark.parametrize(
    "ds,ids",
    [("climate", {"climate"}), ("projected", {"projected", "projected.lcc", "projected.utm"}), ("stations", set())],
)
def test_collections_list_the_groups_holding_geo_variables(ds, ids):
    resp = ok(ds, "collections")
    Collections.model_validate_json(resp.content)
    listed = [c["id"] for c in resp.json()["collections"]]
    assert set(listed) == ids and len(listed) == len(ids), listed


def all_collections():
    return [("climate", "climate"), ("projected", "projected"), ("projected", "projected.lcc"), ("projected", "projected.utm")]


@pytest.mark.parametrize("ds,cid", all_collections())
def test_every_collection_validates_and_offers_every_query(ds, cid):
    resp = ok(ds, f"collections/{cid}")
    Collection.model_validate_json(resp.content)
    doc = resp.json()
    assert doc["id"] == cid
    assert doc["crs"] == ["CRS84"]
    assert set(FORMATS) <= set(doc["output_formats"]), doc["output_formats"]
    for q in QUERIES:
        link = doc["data_queries"][q]["link"]
        assert link["href"].split("?")[0].rstrip("/").endswith(f"/collections/{cid}/{q}"), link
        assert link["variables"]["query_type"] == q, link
    [bbox] = doc["extent"]["spatial"]["bbox"]
    assert len(bbox) == 4 and -180 <= bbox[0] < bbox[2] <= 180 and -90 <= bbox[1] < bbox[3] <= 90, bbox
    assert doc["parameter_names"], doc


def test_unknown_collection_and_the_collection_of_a_non_geo_dataset_are_404():
    for ds, cid in [("climate", "nope"), ("stations", "stations")]:
        problem(get(ds, f"collections/{cid}"), 404)


def test_climate_collection_metadata_describes_the_store():
    doc = ok("climate", "collections/climate").json()
    z = climate()
    # Cell edges (3.2) of a global 2-degree grid stored 0..360: all of CRS84.
    # (edr-xarray also needs longitudes within -180..180 here: it sends this bbox back.)
    assert doc["extent"]["spatial"]["bbox"] == [[-180, -90, 180, 90]]
    temporal = doc["extent"]["temporal"]
    [[start, end]] = temporal["interval"]
    assert (instants([start, end]) == z.time.values[[0, -1]]).all(), temporal
    assert (instants(temporal["values"]) == z.time.values).all(), temporal
    # edr-xarray sends these back as `datetime` and accepts only this form.
    for value in [start, end, *temporal["values"]]:
        assert ISO_INSTANT.fullmatch(value), value
    assert temporal["trs"]
    assert "vertical" not in doc["extent"] or doc["extent"]["vertical"] is None
    assert set(doc["parameter_names"]) == {"tas"}
    tas = doc["parameter_names"]["tas"]
    assert tas["type"] == "Parameter"
    symbol = tas["unit"]["symbol"]
    assert (symbol if isinstance(symbol, str) else symbol["value"]) == "K", tas["unit"]
    assert tas["observedProperty"]["label"] in (z.tas.attrs["long_name"], z.tas.attrs["standard_name"]), tas


# --- position ---------------------------------------------------------------------

POINTS = [
    (-30.4, 10.3),  # lon 329.6 in the store
    (-0.5, 0.5),  # lon 359.5: the last column
    (0.5, -45.5),  # lon 0.5: the first column
    (170.7, 88.9),  # near the top row (lat descends)
    (-150.2, 5.3),  # inside the store's block of missing values
]


@pytest.mark.parametrize("x,y", POINTS)
def test_position_gives_the_series_of_the_cell_under_the_point(x, y):
    doc = climate_query("position", coords=f"POINT({x} {y})")
    assert doc["type"] == "Coverage" and doc["domain"]["domainType"] == "PointSeries"
    check_referencing(doc)
    check_tas_parameter(doc)
    df = frame(records(doc))
    want = climate().tas.sel(lon=x % 360, lat=y, method="nearest")
    assert (df["t"].to_numpy() == want.time.values).all(), df["t"]
    assert_values(df["tas"], want.values)
    # Whatever x, y the domain reports (the point or the cell centre) lie in that cell.
    assert_cells_match_store(df)


def test_missing_values_are_null():
    doc = climate_query("position", coords="POINT(-150.2 5.3)")
    assert all(v is None for v in doc["ranges"]["tas"]["values"]), doc["ranges"]


def test_a_point_on_a_shared_edge_takes_the_cell_with_the_larger_index():
    # lon -30 is 330: the edge between columns 164 (329) and 165 (331);
    # lat 10: the edge between rows 39 (11) and 40 (9).
    doc = climate_query("position", coords="POINT(-30 10)")
    df = frame(records(doc))
    assert_values(df["tas"], climate().tas.isel(lat=40, lon=165).values)


def test_multipoint_gives_a_coverage_collection_of_point_series():
    points = [(-30.4, 10.3), (100.5, -20.5), (-179.5, 60.1)]
    coords = "MULTIPOINT(" + ", ".join(f"({x} {y})" for x, y in points) + ")"
    doc = climate_query("position", coords=coords)
    assert doc["type"] == "CoverageCollection" and len(doc["coverages"]) == len(points)
    check_referencing(doc)
    check_tas_parameter(doc)
    for cov, (x, y) in zip(doc["coverages"], points):
        assert cov["domain"]["domainType"] == "PointSeries"
        df = frame(records(cov))
        assert_values(df["tas"], climate().tas.sel(lon=x % 360, lat=y, method="nearest").values)


def datetime_cases():
    t = [iso(v) for v in times()]
    return [(t[1], [1]), (f"{t[1]}/{t[2]}", [1, 2]), (f"../{t[1]}", [0, 1]), (f"{t[2]}/..", [2, 3])]


@pytest.mark.parametrize("datetime,steps", datetime_cases(), ids=["instant", "a/b", "../b", "a/.."])
def test_datetime_chooses_the_time_steps(datetime, steps):
    doc = climate_query("position", coords="POINT(-30.4 10.3)", datetime=datetime)
    df = frame(records(doc))
    assert (df["t"].to_numpy() == times()[steps]).all(), (datetime, df["t"])
    assert_values(df["tas"], climate().tas.sel(lon=329.6, lat=10.3, method="nearest").values[steps])


def test_parameter_name_its_alias_and_crs84_give_the_same_answer():
    base = {"coords": "POINT(-30.4 10.3)"}
    answers = [
        climate_query("position", **base),
        covjson("climate", "climate", "position", dict(base, **{"parameter-name": "tas"})),
        covjson("climate", "climate", "position", dict(base, parameter_names="tas")),
        covjson("climate", "climate", "position", dict(base, crs="CRS84", f="CoverageJSON")),
    ]
    for doc in answers[1:]:
        assert doc["ranges"] == answers[0]["ranges"]


# --- area, cube, radius -----------------------------------------------------------


def inside_polygon(rings: list[list[tuple[float, float]]], x: float, y: float) -> bool:
    """Even-odd rule over all rings (holes included)."""
    c = False
    for ring in rings:
        for (x1, y1), (x2, y2) in zip(ring, ring[1:]):
            if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
                c = not c
    return c


def wkt_ring(ring) -> str:
    return "(" + ", ".join(f"{x} {y}" for x, y in ring) + ")"


TRIANGLE = [[(-40, 0), (-20, 0), (-40, 21), (-40, 0)]]  # no cell centre (odd, odd) on an edge
WITH_HOLE = [
    [(-60, -20), (-20, -20), (-20, 20), (-60, 20), (-60, -20)],
    [(-50, -10), (-30, -10), (-30, 10), (-50, 10), (-50, -10)],
]
ACROSS_SEAM = [[(-10, -10), (10, -10), (10, 10), (-10, 10), (-10, -10)]]  # store columns 355..359 and 1..9
OVER_MISSING = [[(-170, -10), (-130, -10), (-150, 25), (-170, -10)]]
AREAS = {
    "triangle": ("POLYGON(" + wkt_ring(TRIANGLE[0]) + ")", [TRIANGLE]),
    "hole": ("POLYGON(" + ", ".join(wkt_ring(r) for r in WITH_HOLE) + ")", [WITH_HOLE]),
    "seam": ("POLYGON(" + wkt_ring(ACROSS_SEAM[0]) + ")", [ACROSS_SEAM]),
    "missing": ("POLYGON(" + wkt_ring(OVER_MISSING[0]) + ")", [OVER_MISSING]),
    "multi": (
        "MULTIPOLYGON((" + wkt_ring(TRIANGLE[0]) + "), (" + wkt_ring(ACROSS_SEAM[0]) + "))",
        [TRIANGLE, ACROSS_SEAM],
    ),
}


def in_area(polygons, x, y) -> bool:
    return any(inside_polygon(rings, x, y) for rings in polygons)


def assert_selection(df: pd.DataFrame, selected, all_times: np.ndarray):
    """Rows of cells `selected(x, y)` carry the store's values, other rows are null,
    and every selected cell of the store is there at every time of `all_times`."""
    df = df.reset_index(drop=True)
    x = lon180(df["x"].to_numpy())
    mask = np.array([selected(a, b) for a, b in zip(x, df["y"])], dtype=bool)
    assert df["tas"][~mask].isna().all(), df[~mask & df["tas"].notna()].head()
    assert_cells_match_store(df[mask])
    cells = store_cells()
    cells = cells[np.isin(cells["t"].to_numpy(), all_times)]
    cells = cells[[selected(a, b) for a, b in zip(cells["x"], cells["y"])]]
    want = cell_keys(cells["x"], cells["y"], cells["t"])
    got = cell_keys(df["x"][mask], df["y"][mask], df["t"][mask])
    assert want and got == want, (len(got), len(want), sorted(want - got)[:5], sorted(got - want)[:5])


@pytest.mark.parametrize("name", list(AREAS))
def test_area_gives_the_cells_whose_centres_are_inside(name):
    wkt, polygons = AREAS[name]
    doc = climate_query("area", coords=wkt)
    docs = doc["coverages"] if doc["type"] == "CoverageCollection" else [doc]
    assert all(cov["domain"]["domainType"] == "Grid" for cov in docs)
    check_referencing(doc)
    check_tas_parameter(doc)
    assert_selection(frame(records(doc)), lambda x, y: in_area(polygons, x, y), times())


CUBES = {
    "box": (-40, 0, -20, 20),
    "seam": (-10, -10, 10, 10),
    "missing": (-170, -10, -130, 20),
}


def in_bbox(bbox, x, y) -> bool:
    return bbox[0] <= x <= bbox[2] and bbox[1] <= y <= bbox[3]


@pytest.mark.parametrize("name", list(CUBES))
def test_cube_gives_the_cells_whose_centres_lie_in_the_bbox(name):
    bbox = CUBES[name]
    doc = climate_query("cube", bbox=",".join(map(str, bbox)))
    assert doc["type"] == "Coverage" and doc["domain"]["domainType"] == "Grid"
    check_referencing(doc)
    df = frame(records(doc))
    # A cube is all cells of the box: no null that the store does not have.
    assert_cells_match_store(df)
    assert_selection(df, lambda x, y: in_bbox(bbox, x, y), times())


def test_cube_with_datetime_and_parameter_name():
    t = [iso(v) for v in times()]
    doc = climate_query("cube", bbox="-40,0,-20,20", datetime=f"{t[1]}/{t[2]}", parameter_name="tas")
    df = frame(records(doc))
    assert set(df["t"]) == set(times()[[1, 2]])
    assert_selection(df, lambda x, y: in_bbox(CUBES["box"], x, y), times()[[1, 2]])


def great_circle_km(x1, y1, x2, y2) -> float:
    p1, p2, dl = math.radians(y1), math.radians(y2), math.radians(x2 - x1)
    h = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_KM * math.asin(min(1.0, math.sqrt(h)))


@pytest.mark.parametrize("within,units", [("500", "km"), ("500000", "m"), ("310.686", "mi")])
def test_radius_gives_the_cells_whose_centres_lie_within_the_distance(within, units):
    cx, cy, km = -30.4, 10.3, 500.0
    doc = covjson("climate", "climate", "radius", {"coords": f"POINT({cx} {cy})", "within": within, "within-units": units})
    check_referencing(doc)
    df = frame(records(doc))
    x = lon180(df["x"].to_numpy())
    d = np.array([great_circle_km(cx, cy, a, b) for a, b in zip(x, df["y"])])
    # Outside the circle: null; inside: the store's value; on the rim: either.
    assert df["tas"][d > km * (1 + RADIUS_SLACK)].isna().all()
    assert_cells_match_store(df[d <= km * (1 - RADIUS_SLACK)])
    cells = store_cells()
    cells = cells[[great_circle_km(cx, cy, a, b) < km * (1 - RADIUS_SLACK) for a, b in zip(cells["x"], cells["y"])]]
    sure = cell_keys(cells["x"], cells["y"], cells["t"])
    got = cell_keys(df["x"], df["y"], df["t"])
    assert sure and sure <= got, sorted(sure - got)[:5]


# --- trajectory -------------------------------------------------------------------

VERTICES = [(-30.4, 10.3), (-20.6, 15.2), (-10.3, 20.7)]


def linestring(m=None) -> str:
    if m is None:
        return "LINESTRING(" + ", ".join(f"{x} {y}" for x, y in VERTICES) + ")"
    return "LINESTRINGM(" + ", ".join(f"{x} {y} {e}" for (x, y), e in zip(VERTICES, m)) + ")"


def vertex_series(x, y) -> np.ndarray:
    return climate().tas.sel(lon=x % 360, lat=y, method="nearest").values


def test_trajectory_with_a_datetime_gives_the_cell_under_each_vertex():
    t = times()[2]
    doc = climate_query("trajectory", coords=linestring(), datetime=iso(t))
    docs = doc["coverages"] if doc["type"] == "CoverageCollection" else [doc]
    assert all(cov["domain"]["domainType"] == "Trajectory" for cov in docs)
    check_referencing(doc)
    rows = records(doc)
    assert len(rows) == len(VERTICES), rows
    for row in rows:
        row.setdefault("t", iso(t))
    df = frame(rows)
    assert (df["t"] == t).all()
    assert_values(df["tas"], [vertex_series(x, y)[2] for x, y in VERTICES])
    assert_cells_match_store(df)


def test_trajectory_without_datetime_gives_every_time_step_at_each_vertex():
    doc = climate_query("trajectory", coords=linestring())
    df = frame(records(doc))
    assert "t" in df, "each value of a time-varying trajectory needs its instant"
    assert len(df) == len(VERTICES) * len(times())
    assert_cells_match_store(df)
    ns = times().astype("int64").tolist()
    want = {(cell_of(x, y), t) for x, y in VERTICES for t in ns}
    got = {(cell_of(a, b), t) for a, b, t in zip(df["x"], df["y"], df["t"].to_numpy().astype("int64").tolist())}
    assert got == want, (got, want)


def cell_of(x, y) -> tuple[int, int]:
    z = climate()
    return int(cell_indices(z.lat.values, [y])[0]), int(cell_indices(z.lon.values, [x % 360])[0])


def test_linestringm_takes_the_instant_of_each_m_in_epoch_seconds():
    steps = [0, 1, 3]
    doc = climate_query("trajectory", coords=linestring([epoch(times()[s]) for s in steps]))
    assert doc["type"] == "Coverage" and doc["domain"]["domainType"] == "Trajectory"
    composite = doc["domain"]["axes"]["composite"]
    assert composite["dataType"] == "tuple" and "t" in composite["coordinates"], composite
    df = frame(records(doc))
    assert len(df) == len(VERTICES)
    assert (df["t"].to_numpy() == times()[steps]).all(), df["t"]
    assert_values(df["tas"], [vertex_series(x, y)[s] for (x, y), s in zip(VERTICES, steps)])


# --- other formats ----------------------------------------------------------------


def test_csv_position_read_by_pandas():
    resp = ok("climate", "collections/climate/position", {"coords": "POINT(-30.4 10.3)", "f": "CSV"})
    assert resp.headers["content-type"].startswith("text/csv"), resp.headers["content-type"]
    table = pd.read_csv(io.StringIO(resp.text))
    assert list(table.columns) == ["x", "y", "t", "tas"], list(table.columns)
    assert (instants(table["t"]) == times()).all()
    assert_values(table["tas"], vertex_series(-30.4, 10.3))


def test_csv_cube_read_by_pandas_matches_the_coveragejson_answer():
    params = {"bbox": "-170,-10,-130,20"}
    resp = ok("climate", "collections/climate/cube", dict(params, f="CSV"))
    table = pd.read_csv(io.StringIO(resp.text))
    assert set(table.columns) == {"x", "y", "t", "tas"}, list(table.columns)
    table["t"] = instants(table["t"])
    assert table["tas"].isna().any(), "the store's missing values are empty fields"
    assert_cells_match_store(table)
    assert_selection(table, lambda x, y: in_bbox(CUBES["missing"], x, y), times())


def geojson(ds: str, collection: str, query: str, params: dict) -> dict:
    resp = ok(ds, f"collections/{collection}/{query}", dict(params, f="GeoJSON"))
    assert "json" in resp.headers["content-type"], resp.headers["content-type"]
    doc = resp.json()
    assert doc["type"] == "FeatureCollection"
    for feature in doc["features"]:
        assert feature["type"] == "Feature" and feature["geometry"]["type"] == "Point", feature
        assert len(feature["geometry"]["coordinates"]) >= 2
    return doc


def one_value(v):
    if isinstance(v, list):
        assert len(v) == 1, v
        return v[0]
    return v


def test_geojson_multipoint_has_one_feature_per_location():
    points = [(-30.4, 10.3), (100.5, -20.5)]
    t = times()[1]
    coords = "MULTIPOINT(" + ", ".join(f"({x} {y})" for x, y in points) + ")"
    doc = geojson("climate", "climate", "position", {"coords": coords, "datetime": iso(t)})
    assert len(doc["features"]) == len(points)
    for feature, (x, y) in zip(doc["features"], points):
        gx, gy = feature["geometry"]["coordinates"][:2]
        assert cell_of(gx, gy) == cell_of(x, y), (feature["geometry"], x, y)
        assert_values([one_value(feature["properties"]["tas"])], [vertex_series(x, y)[1]])


def test_geojson_position_series_keeps_every_value_in_the_feature():
    doc = geojson("climate", "climate", "position", {"coords": "POINT(-30.4 10.3)"})
    [feature] = doc["features"]
    values = feature["properties"]["tas"]
    assert isinstance(values, list) and len(values) == len(times()), feature["properties"]
    assert_values([np.nan if v is None else v for v in values], vertex_series(-30.4, 10.3))


def netcdf_frame(content: bytes, tmp_path) -> pd.DataFrame:
    file = tmp_path / "edr.nc"
    file.write_bytes(content)
    ds = xr.open_dataset(file, engine="netcdf4")
    da = ds["tas"]
    assert da.attrs.get("units") == "K"
    names = {}
    for dim in da.dims:
        units = ds[dim].attrs.get("units", "") if dim in ds.coords else ""
        if dim.lower() in ("x", "lon", "longitude") or units.startswith("degree") and units.endswith(("east", "E")):
            names[dim] = "x"
        elif dim.lower() in ("y", "lat", "latitude") or units.startswith("degree") and units.endswith(("north", "N")):
            names[dim] = "y"
        elif np.issubdtype(ds[dim].dtype, np.datetime64):
            names[dim] = "t"
    assert sorted(names.values()) == ["t", "x", "y"], (da.dims, names)
    df = da.rename(names).to_dataframe(name="tas").reset_index()
    ds.close()
    return frame(df[["x", "y", "t", "tas"]].to_dict("records"))


@pytest.mark.parametrize(
    "query,params,selected",
    [
        ("area", {"coords": AREAS["hole"][0]}, lambda x, y: in_area(AREAS["hole"][1], x, y)),
        ("cube", {"bbox": "-10,-10,10,10"}, lambda x, y: in_bbox(CUBES["seam"], x, y)),
    ],
    ids=["area", "cube"],
)
def test_netcdf_of_area_and_cube_read_by_xarray(query, params, selected, tmp_path):
    resp = ok("climate", f"collections/climate/{query}", dict(params, f="NetCDF"))
    assert resp.headers["content-type"].startswith("application/x-netcdf"), resp.headers["content-type"]
    assert_selection(netcdf_frame(resp.content, tmp_path), selected, times())


# --- errors -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "wkt,offset",
    [("POINT(12 abc)", 9), ("POINT(12 20", 11), ("PIONT(12 20)", 0)],
)
def test_wkt_that_does_not_parse_is_a_400_naming_the_offset(wkt, offset):
    detail = problem(get("climate", "collections/climate/position", {"coords": wkt}))
    assert re.search(r"(?i)offset|character|position|column", detail), detail
    numbers = set(re.findall(r"\d+", detail))
    assert str(offset) in numbers or str(offset + 1) in numbers, detail


def test_the_wrong_geometry_for_a_query_is_a_400():
    problem(get("climate", "collections/climate/position", {"coords": AREAS["triangle"][0]}))
    problem(get("climate", "collections/climate/area", {"coords": "POINT(1 1)"}))


def numbers_in(text: str) -> list[float]:
    return [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text)]


@pytest.mark.parametrize("ds,cid,wkt", [("climate", "climate", "POINT(10 95)"), ("projected", "projected.utm", "POINT(-100 0)")])
def test_a_point_outside_the_extent_is_a_400_giving_the_extent(ds, cid, wkt):
    [bbox] = ok(ds, f"collections/{cid}").json()["extent"]["spatial"]["bbox"]
    detail = problem(get(ds, f"collections/{cid}/position", {"coords": wkt}))
    found = numbers_in(detail)
    for edge in bbox:
        assert any(abs(n - edge) <= 1e-3 for n in found), (edge, detail)


def test_crs_other_than_crs84_is_a_400():
    detail = problem(get("climate", "collections/climate/position", {"coords": "POINT(1 1)", "crs": "EPSG:3857"}))
    assert "CRS84" in detail, detail


def test_an_unknown_query_parameter_is_a_400():
    problem(get("climate", "collections/climate/position", {"coords": "POINT(1 1)", "bogus": "1"}))


# --- other collections ------------------------------------------------------------


@pytest.mark.parametrize("ds,cid", all_collections())
def test_a_position_inside_each_collection_validates(ds, cid):
    [[w, s, e, n]] = ok(ds, f"collections/{cid}").json()["extent"]["spatial"]["bbox"]
    x, y = (w + e) / 2 + 0.013, (s + n) / 2 + 0.017
    doc = covjson(ds, cid, "position", {"coords": f"POINT({x} {y})"})
    check_referencing(doc)


# --- edr-xarray -------------------------------------------------------------------

COLLECTION_URL = edr_url("climate", "collections/climate")


def assert_dataarray_matches_store(da: xr.DataArray):
    assert set(da.dims) == {"t", "y", "x"}, da.dims
    df = da.to_dataframe(name="tas").reset_index()
    assert_cells_match_store(frame(df[["x", "y", "t", "tas"]].to_dict("records")))


def test_edr_xarray_opens_the_whole_collection():
    ds = xr.open_dataset(COLLECTION_URL, engine="edr", parameter_names=["tas"])
    da = ds["tas"].load()
    z = climate()
    assert da.sizes == {"t": z.sizes["time"], "y": z.sizes["lat"], "x": z.sizes["lon"]}, da.sizes
    assert (da.t.values == z.time.values).all()
    assert_dataarray_matches_store(da)
    ds.close()


def test_edr_xarray_opens_a_cube_and_reads_a_lazy_subselection():
    ds = xr.open_dataset(COLLECTION_URL, engine="edr", bbox=(-40, 0, -20, 20))
    assert ds["tas"].sizes == {"t": 4, "y": 10, "x": 10}, ds["tas"].sizes
    # Indexing before loading becomes a narrower /cube query: one `datetime`
    # and a bbox whose edges are the chosen cells' centres (a centre on the
    # bbox's edge is in the cube).
    part = ds["tas"].isel(t=1, x=slice(2, 5), y=slice(3, 7)).load()
    assert part.sizes == {"y": 4, "x": 3}, part.sizes
    assert_dataarray_matches_store(part.expand_dims("t"))
    assert_dataarray_matches_store(ds["tas"].load())
    ds.close()


def test_edr_xarray_one_cell_bbox_is_the_position_series():
    # edr-xarray reads only /cube: a bbox around one cell centre is its point query.
    cx, cy = -31.0, 11.0  # the centre of the cell under POINT(-30.4 10.3)
    ds = xr.open_dataset(COLLECTION_URL, engine="edr", bbox=(cx - 0.5, cy - 0.5, cx + 0.5, cy + 0.5))
    da = ds["tas"].load()
    assert da.sizes == {"t": 4, "y": 1, "x": 1}, da.sizes
    assert_values(da.transpose("t", "y", "x").values.ravel(), vertex_series(-30.4, 10.3))
    ds.close()


def test_edr_xarray_with_a_datetime_interval():
    t = [iso(v) for v in times()]
    ds = xr.open_dataset(COLLECTION_URL, engine="edr", bbox=(-10, -10, 10, 10), datetime=f"{t[1]}/{t[2]}")
    da = ds["tas"].load()
    assert (da.t.values == times()[[1, 2]]).all(), da.t.values
    assert da.sizes["x"] == 10 and da.sizes["y"] == 10
    assert_dataarray_matches_store(da)
    ds.close()


# --- OWSLib -----------------------------------------------------------------------


@functools.cache
def owslib_client() -> EnvironmentalDataRetrieval:
    # Fetches the landing page at once, as `.../edr/` (OWSLib adds the slash).
    return EnvironmentalDataRetrieval(edr_url("climate"))


def test_owslib_lists_and_describes_the_collection():
    api = owslib_client()
    assert any(link["href"].rstrip("/").endswith("/collections") for link in api.links)
    ConformanceModel.model_validate_json(json.dumps(api.conformance()))
    # data(): the collections with a link whose rel contains "data".
    assert api.data() == ["climate"]
    Collection.model_validate_json(json.dumps(api.collection("climate")))


def test_owslib_position_query():
    # OWSLib sends `parameter_names` (the alias) and no `f`.
    doc = owslib_client().query_data("climate", "position", coords="POINT(-30.4 10.3)", parameter_names=["tas"])
    validate_covjson(json.dumps(doc))
    df = frame(records(doc))
    assert (df["t"].to_numpy() == times()).all()
    assert_values(df["tas"], vertex_series(-30.4, 10.3))


def test_owslib_cube_query():
    t = [iso(v) for v in times()]
    doc = owslib_client().query_data(
        "climate", "cube", bbox=[-40, 0, -20, 20], parameter_names=["tas"], datetime_=f"{t[0]}/{t[1]}"
    )
    validate_covjson(json.dumps(doc))
    assert doc["domain"]["domainType"] == "Grid"
    df = frame(records(doc))
    assert_cells_match_store(df)
    assert_selection(df, lambda x, y: in_bbox(CUBES["box"], x, y), times()[[0, 1]])
