"""File downloads of region reads (api.md 3.6) opened by the tools people
open them with, each compared with zarr-python's or xarray's own read of
the same store:

- CSV by pandas (`read_csv`): every numeric fixture array, and labelled
  data (instants, station names) against `xarray.open_zarr`;
- NetCDF by netCDF4-python (`Dataset(memory=...)`, CDF-2 and CDF-5) on every
  numeric fixture array, by `xarray.open_dataset(engine="netcdf4")` with and
  without `decode=cf`, and by netCDF-C's `ncdump -h`;
- GeoTIFF by rasterio (GDAL): bounds, CRS, nodata and values, on CRS84 and
  projected grids.

Runs in .venv-dap against the server TEST_SERVER_URL names (see
test_dap_clients.py).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import netCDF4
import numpy as np
import pandas as pd
import pytest
import rasterio
import requests
import xarray as xr
import zarr

ROOT = Path(__file__).resolve().parents[2]
BASE = os.environ.get("TEST_SERVER_URL", "http://127.0.0.1:8080").rstrip("/")
FIXTURES = Path(os.environ.get("ZARR_FIXTURES", ROOT / "tests" / "fixtures" / "interop"))
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
SAMPLE = ROOT / "sample"
NUMERIC = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
}
CDF5 = {"uint8", "uint16", "uint32", "int64", "uint64"}


def download(ds: str, path: str, **params) -> requests.Response:
    resp = requests.get(f"{BASE}/v1/datasets/{ds}/data/{path}", params=params, timeout=60)
    assert resp.status_code == 200, (path, params, resp.text[:500])
    return resp


def expected(entry) -> np.ndarray:
    raw = (FIXTURES / entry["expected"]).read_bytes()
    dtype = np.dtype(entry["data_type"]).newbyteorder("<")
    return np.frombuffer(raw, dtype=dtype).reshape(entry["shape"])


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        return np.array_equal(a.astype("f8"), b.astype("f8"), equal_nan=True)
    return np.array_equal(a, b)


def numeric_entries():
    return [e for e in MANIFEST["arrays"] if e["data_type"] in NUMERIC]


# --- CSV: pandas ------------------------------------------------------------------


@pytest.mark.parametrize("entry", numeric_entries(), ids=lambda e: e["path"])
def test_pandas_reads_every_numeric_fixture_array(entry):
    resp = download("fixtures", entry["path"], format="csv")
    assert resp.headers["content-type"] == "text/csv; charset=utf-8"
    want = expected(entry)
    table = pd.read_csv(io.StringIO(resp.text))
    name = entry["path"].rsplit("/", 1)[1]
    assert list(table.columns)[-1] == name
    assert len(table) == want.size
    got = table[name].to_numpy()
    if entry["data_type"] == "float32":
        got = got.astype("f4")
    assert same(got, want.ravel()), entry["path"]
    # Without coordinates the label columns are positions in C order.
    if want.ndim and len(table.columns) == want.ndim + 1:
        index = np.indices(want.shape).reshape(want.ndim, -1)
        for d, column in enumerate(table.columns[:-1]):
            labels = table[column].to_numpy()
            if np.issubdtype(labels.dtype, np.integer):
                assert (labels == index[d]).all() or zarr_has_coordinate(entry, column), (entry["path"], column)


def zarr_has_coordinate(entry, dim: str) -> bool:
    group = entry["path"].rsplit("/", 1)[0]
    return (FIXTURES / "data.zarr" / group / dim).exists()


def test_pandas_reads_labelled_station_data_as_xarray_does():
    resp = download("stations", "temperature", format="csv", decode="cf")
    table = pd.read_csv(io.StringIO(resp.text), parse_dates=["time"])
    z = xr.open_zarr(SAMPLE / "stations.zarr").temperature
    want = z.to_dataframe().reset_index()
    assert list(table.columns) == ["time", "station", "temperature"]
    assert (table["time"].to_numpy() == want["time"].to_numpy()).all()
    assert (table["station"].to_numpy() == want["station"].astype(str).to_numpy()).all()
    np.testing.assert_allclose(table["temperature"], want["temperature"], equal_nan=True)


# --- NetCDF: netCDF4-python, xarray, ncdump ----------------------------------------


@pytest.mark.parametrize("entry", numeric_entries(), ids=lambda e: e["path"])
def test_netcdf4_reads_every_numeric_fixture_array(entry, tmp_path):
    want = expected(entry)
    name = entry["path"].rsplit("/", 1)[1]
    if want.ndim and 0 in want.shape:
        resp = requests.get(f"{BASE}/v1/datasets/fixtures/data/{entry['path']}?format=netcdf", timeout=60)
        assert resp.status_code == 400
        return
    resp = download("fixtures", entry["path"], format="netcdf")
    assert resp.headers["content-type"] == "application/x-netcdf"
    file = tmp_path / "region.nc"
    file.write_bytes(resp.content)
    ds = netCDF4.Dataset(file)
    assert ds.data_model == ("NETCDF3_64BIT_DATA" if entry["data_type"] in CDF5 else "NETCDF3_64BIT_OFFSET")
    ds.set_auto_maskandscale(False)
    got = ds.variables[name][...]
    kind = "i1" if entry["data_type"] == "bool" else entry["data_type"]
    assert got.dtype == np.dtype(kind), (got.dtype, kind)
    assert same(got, want), entry["path"]
    ds.close()


XARRAY_ARRAYS = [
    ("climate", "tas", {"select": "0:2"}),
    ("stations", "temperature", {}),
    ("stations", "precipitation", {"select": "3:9,1:4"}),
    ("fixtures", "xarray_cf/temperature", {}),
    ("fixtures", "xarray_grid_v3/t2m", {}),
]


@pytest.mark.parametrize("decode", [False, True])
@pytest.mark.parametrize("ds,path,params", XARRAY_ARRAYS, ids=[f"{d}/{p}" for d, p, _ in XARRAY_ARRAYS])
def test_xarray_reads_netcdf_downloads_as_open_zarr_reads(ds, path, params, decode, tmp_path):
    store = FIXTURES / "data.zarr" if ds == "fixtures" else SAMPLE / f"{ds}.zarr"
    group, name = path.rsplit("/", 1) if "/" in path else ("", path)
    params = dict(params, format="netcdf")
    if decode:
        params["decode"] = "cf"
    file = tmp_path / "region.nc"
    file.write_bytes(download(ds, path, **params).content)
    got = xr.open_dataset(file, engine="netcdf4")[name]
    want = xr.open_zarr(store / group if group else store)[name]
    if "select" in params:
        items = [slice(*(int(p) for p in item.split(":"))) for item in params["select"].split(",")]
        want = want.isel(dict(zip(want.dims, items)))
    assert got.dims == want.dims
    np.testing.assert_allclose(got.values, want.values, rtol=1e-6, equal_nan=True)
    for dim in want.dims:
        if dim in want.coords and want[dim].dtype.kind in "fiuM":
            assert np.array_equal(got[dim].values, want[dim].values), dim
    assert got.attrs.get("units") == want.attrs.get("units")


def test_ncdump_opens_a_download(tmp_path):
    path = shutil.which("ncdump")
    if path is None:
        pytest.fail("ncdump (Debian netcdf-bin) is missing") if os.environ.get("CI") == "1" else pytest.skip()
    file = tmp_path / "tas.nc"
    file.write_bytes(download("climate", "tas", select="0", format="netcdf").content)
    out = subprocess.run([path, "-h", str(file)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "float tas(lat, lon) ;" in out.stdout and "double lat(lat) ;" in out.stdout, out.stdout


# --- GeoTIFF: rasterio (GDAL) -------------------------------------------------------


def edges(centres: np.ndarray) -> tuple[float, float]:
    step = centres[1] - centres[0]
    return centres[0] - step / 2, centres[-1] + step / 2


def test_rasterio_opens_a_crs84_geotiff_with_bounds_nodata_and_values():
    resp = download("climate", "tas", select="1", format="geotiff", decode="cf")
    assert resp.headers["content-type"] == "image/tiff"
    z = xr.open_zarr(SAMPLE / "climate.zarr").tas.isel(time=1)
    with rasterio.MemoryFile(resp.content) as mem, mem.open() as tif:
        assert tif.crs.to_epsg() == 4326
        assert tif.count == 1 and (tif.height, tif.width) == z.shape
        assert np.isnan(tif.nodata)
        west, east = edges(z.lon.values)
        north, south = edges(z.lat.values)
        assert np.allclose(tif.bounds, (west, min(south, north), east, max(south, north)))
        np.testing.assert_allclose(tif.read(1), z.values, equal_nan=True)
        # The centre of a cell is that cell's value.
        row, col = 7, 11
        x, y = tif.xy(row, col)
        assert np.isclose(x, z.lon.values[col]) and np.isclose(y, z.lat.values[row])


@pytest.mark.parametrize("path,epsg", [("sea_ice", 3413), ("utm/elevation", 32633)])
def test_rasterio_opens_projected_geotiffs_in_their_epsg(path, epsg):
    resp = download("projected", path, format="geotiff")
    store = SAMPLE / "projected.zarr"
    group, name = path.rsplit("/", 1) if "/" in path else ("", path)
    z = xr.open_zarr(store / group if group else store)[name]
    with rasterio.MemoryFile(resp.content) as mem, mem.open() as tif:
        assert tif.crs.to_epsg() == epsg
        x0, x1 = edges(z.x.values)
        y0, y1 = edges(z.y.values)
        assert np.allclose(tif.bounds, (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)))
        np.testing.assert_allclose(tif.read(1), z.values, equal_nan=True)


def test_geotiff_of_what_is_not_a_raster_is_a_400():
    for path, params in [("tas", {}), ("tas", {"select": "0,[0,1,5]"})]:
        resp = requests.get(
            f"{BASE}/v1/datasets/climate/data/{path}", params=dict(params, format="geotiff"), timeout=60
        )
        assert resp.status_code == 400, resp.text
        assert "geotiff" in resp.json()["detail"]
