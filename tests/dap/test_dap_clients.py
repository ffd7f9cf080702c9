"""OPeNDAP DAP2 (api.md 3.4) read by the clients people use, each compared
with zarr-python's or xarray's own read of the same store:

- netCDF-C's `ncdump -h` and `ncdump -v VAR 'URL?CE'` (Debian netcdf-bin);
- netCDF4-python `Dataset(URL)` on every fixture array DAP2 carries (v2 and
  v3, sharded or not, written by zarr-python, tensorstore and xarray);
- `xarray.open_dataset(URL)` with the netcdf4 and pydap engines, values
  after CF decoding equal to `xarray.open_zarr` of the store;
- pydap's `open_url`: grids, their arrays and maps, hyperslabs.

Runs in .venv-dap (Python 3.12: pydap 3.5.11 needs it) against the server
TEST_SERVER_URL names, which serves the fixtures as `fixtures` and the
samples under their names (scripts/ci/lib.sh start_server).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import requests
import xarray as xr
import zarr
from pydap.client import open_url

warnings.filterwarnings("ignore", category=UserWarning)  # pydap's "DAP2 is legacy"

ROOT = Path(__file__).resolve().parents[2]
BASE = os.environ.get("TEST_SERVER_URL", "http://127.0.0.1:8080").rstrip("/")
FIXTURES = Path(os.environ.get("ZARR_FIXTURES", ROOT / "tests" / "fixtures" / "interop"))
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
STORES = {
    "fixtures": FIXTURES / "data.zarr",
    "sample": ROOT / "sample" / "sample.zarr",
    "stations": ROOT / "sample" / "stations.zarr",
    "climate": ROOT / "sample" / "climate.zarr",
}
# Zarr data types DAP2 carries, as netCDF-C shows them (its classic model
# has no unsigned types: DAP's are shown signed, `_Unsigned` says so).
NETCDF_C = {
    "bool": "i1", "uint8": "i1", "int8": "i2", "int16": "i2", "uint16": "i2",
    "int32": "i4", "uint32": "i4", "float16": "f4", "float32": "f4", "float64": "f8",
    "int64": "f8", "uint64": "f8",
}


def dap_url(ds: str, group: str = "") -> str:
    return f"{BASE}/v1/datasets/{ds}/dap" + (f"/{group}" if group else "")


def in_ci() -> bool:
    return os.environ.get("CI") == "1"


def ncdump() -> str:
    path = shutil.which("ncdump")
    if path is None:
        if in_ci():
            pytest.fail("ncdump (Debian netcdf-bin) is missing")
        pytest.skip("ncdump (Debian netcdf-bin) is not installed")
    return path


def as_netcdf_c(values: np.ndarray, data_type: str) -> np.ndarray:
    """What netCDF-C reads of a DAP2 variable of `values` (a zarr read)."""
    if data_type in ("bool", "uint8", "uint16", "uint32"):
        return values.astype(data_type.replace("bool", "uint8")).view(NETCDF_C[data_type])
    return values.astype(NETCDF_C[data_type])


def same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        return np.array_equal(a.astype("f8"), b.astype("f8"), equal_nan=True)
    return np.array_equal(a, b)


# --- netCDF-C: ncdump ----------------------------------------------------------


def test_ncdump_header_shows_the_dataset_as_xarray_sees_it():
    out = subprocess.run([ncdump(), "-h", dap_url("climate")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    z = xr.open_zarr(STORES["climate"], decode_cf=False)
    for dim, size in z.sizes.items():
        assert re.search(rf"^\t{dim} = {size} ;$", out.stdout, re.M), out.stdout
    assert "float tas(time, lat, lon) ;" in out.stdout
    assert f'tas:units = "{z.tas.attrs["units"]}" ;' in out.stdout
    assert f':title = "{z.attrs["title"]}" ;' in out.stdout


def ncdump_values(url: str, var: str) -> np.ndarray:
    out = subprocess.run([ncdump(), "-v", var, url], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    data = out.stdout.split("data:", 1)[1]
    body = re.search(rf"\b{var} =(.*?);", data, re.S).group(1)
    return np.array([float(v) for v in re.split(r"[,\s]+", body.strip()) if v])


def test_ncdump_reads_a_strided_hyperslab_of_a_grid():
    url = dap_url("climate") + "?tas[1:1:2][0:2:10][3:1:5]"
    got = ncdump_values(url, "tas")
    want = zarr.open_array(STORES["climate"] / "tas", mode="r")[1:3, 0:11:2, 3:6]
    # ncdump prints floats to 7 significant digits
    np.testing.assert_allclose(got, want.ravel(), rtol=1e-6)


def test_ncdump_reads_integers_of_a_v2_dataset():
    got = ncdump_values(dap_url("stations") + "?temperature[0:1:4][0:1:4]", "temperature")
    want = zarr.open_array(STORES["stations"] / "temperature", mode="r")[0:5, 0:5]
    np.testing.assert_array_equal(got, want.ravel())


# --- netCDF4-python on every fixture array --------------------------------------


def fixture_groups():
    groups = {}
    for entry in MANIFEST["arrays"]:
        if entry["data_type"] in NETCDF_C:
            group, name = entry["path"].rsplit("/", 1)
            groups.setdefault(group, []).append((name, entry))
    return sorted(groups.items())


def expected(entry) -> np.ndarray:
    """The values zarr-python (or tensorstore, for what zarr-python cannot
    read) read of a manifest array, as the fixture generator saved them."""
    raw = (FIXTURES / entry["expected"]).read_bytes()
    dtype = np.dtype(entry["data_type"]).newbyteorder("<")
    return np.frombuffer(raw, dtype=dtype).reshape(entry["shape"])


@pytest.mark.parametrize("group,arrays", fixture_groups(), ids=[g for g, _ in fixture_groups()])
def test_netcdf4_reads_every_fixture_array_as_zarr_python_does(group, arrays):
    ds = netCDF4.Dataset(dap_url("fixtures", group))
    ds.set_auto_maskandscale(False)
    ds.set_auto_chartostring(False)
    for name, entry in arrays:
        data_type = entry["data_type"]
        want = expected(entry)
        if 0 in want.shape:
            # netCDF-C leaves out variables with an empty dimension (the DDS has them)
            assert name not in ds.variables or ds.variables[name].size == 0
            continue
        var = ds.variables[name]
        got = var[...]
        assert same(got, as_netcdf_c(want, data_type)), f"{group}/{name} ({data_type})"
        if data_type in ("uint8", "uint16", "uint32"):
            assert var.getncattr("_Unsigned") == "true"
        # one strided hyperslab, through netCDF-C's own constraint
        if want.ndim and all(n > 2 for n in want.shape):
            part = tuple(slice(1, None, 2) for _ in want.shape)
            assert same(var[part], as_netcdf_c(want[part], data_type)), f"{group}/{name}{part}"
    ds.close()


def typed_entries(kind: str):
    return [e for e in MANIFEST["typed"] if e["data_type"] == kind]


@pytest.mark.parametrize("entry", typed_entries("numpy.datetime64"), ids=lambda e: e["path"])
def test_netcdf4_datetimes_are_cf_counts_since_the_epoch(entry):
    group, name = entry["path"].rsplit("/", 1)
    ds = netCDF4.Dataset(dap_url("fixtures", group))
    var = ds.variables[name]
    want = zarr.open_array(STORES["fixtures"] / group / name, mode="r")[...]
    unit, _ = np.datetime_data(want.dtype)
    cf = {"D": "days", "s": "seconds", "ms": "milliseconds", "ns": "nanoseconds"}[unit]
    assert var.units == f"{cf} since 1970-01-01"
    counts = np.where(np.isnat(want), np.nan, want.astype("i8").astype("f8"))
    assert same(np.ma.filled(var[...], np.nan), counts)
    ds.close()


@pytest.mark.parametrize(
    "entry",
    typed_entries("string") + typed_entries("fixed_length_utf32"),
    ids=lambda e: e["path"],
)
def test_netcdf4_reads_strings_as_zarr_python_does(entry):
    group, name = entry["path"].rsplit("/", 1)
    ds = netCDF4.Dataset(dap_url("fixtures", group))
    got = ds.variables[name][...]
    want = zarr.open_array(STORES["fixtures"] / group / name, mode="r")[...]
    # netCDF-C shows DAP strings as characters; `_Encoding` makes netCDF4 join them.
    got = np.vectorize(lambda s: s if isinstance(s, str) else s.decode())(np.asarray(got))
    want = np.vectorize(lambda s: str(s).rstrip("\0"))(want)
    if entry["data_type"] == "fixed_length_utf32":
        # netCDF-C's characters end at a NUL: 'é\0x' reads as 'é'
        want = np.vectorize(lambda s: s.split("\0")[0])(want)
    assert got.shape == want.shape and (got == want).all(), (got, want)
    ds.close()


# --- xarray, both engines --------------------------------------------------------

XARRAY_DATASETS = [
    ("climate", ""),
    ("stations", ""),
    ("sample", ""),
    ("fixtures", "xarray_cf"),
    ("fixtures", "xarray_cf_v3"),
    ("fixtures", "xarray_grid"),
    ("fixtures", "xarray_grid_v3"),
]


def non_ascii_text(z: xr.Dataset) -> bool:
    for v in z.variables.values():
        if v.dtype.kind in "OUT" and any(not str(s).isascii() for s in np.asarray(v.values).ravel()):
            return True
    return False


@pytest.mark.parametrize("engine", ["netcdf4", "pydap"])
@pytest.mark.parametrize("ds,group", XARRAY_DATASETS, ids=[f"{d}/{g}" for d, g in XARRAY_DATASETS])
def test_xarray_reads_what_open_zarr_reads(engine, ds, group):
    z = xr.open_zarr(STORES[ds] / group if group else STORES[ds])
    if engine == "pydap" and non_ascii_text(z):
        pytest.skip("pydap 3.5 decodes DAP2 strings as ASCII (pydap/handlers/dap.py); its stations are UTF-8")
    d = xr.open_dataset(dap_url(ds, group), engine=engine)
    assert set(z.variables) <= set(d.variables), (set(z.variables), set(d.variables))
    for name in z.variables:
        want, got = z[name].values, d[name].values
        if want.dtype.kind in "OUT":
            got = np.vectorize(lambda s: s.decode() if isinstance(s, bytes) else str(s))(got)
            want = np.vectorize(str)(want)
            assert (got == want).all(), name
        elif want.dtype.kind == "M":
            assert np.array_equal(got.astype("M8[ns]"), want.astype("M8[ns]"), equal_nan=True), name
        else:
            assert same(got, want), f"{ds}/{group} {name}: {got!r} != {want!r}"
        assert d[name].dims == z[name].dims, name


# --- pydap -------------------------------------------------------------------------


def test_pydap_reads_grids_their_arrays_maps_and_hyperslabs():
    dataset = open_url(dap_url("fixtures", "xarray_grid"))
    store = STORES["fixtures"] / "xarray_grid"
    t2m = zarr.open_array(store / "t2m", mode="r")[...]
    lat = zarr.open_array(store / "lat", mode="r")[...]
    grid = dataset["t2m"]
    assert type(grid).__name__ == "GridType"
    assert list(grid.maps) == ["time", "lat", "lon"]
    # DAP keeps an indexed dimension (length 1)
    np.testing.assert_array_equal(np.asarray(grid.array[2:9:3, 1:5, 7]), t2m[2:9:3, 1:5, 7:8])
    np.testing.assert_array_equal(np.asarray(grid["lat"][3:7]), lat[3:7])
    np.testing.assert_array_equal(np.asarray(grid[0:2, 4:6, 1:3]), t2m[0:2, 4:6, 1:3])
    # a hyperslab on the grid applies to its maps too
    part = open_url(dap_url("fixtures", "xarray_grid") + "?t2m[0:1:1][4:1:5][1:1:2]")["t2m"]
    assert part.array.shape == (2, 2, 2)
    np.testing.assert_array_equal(np.asarray(part.array[:]), t2m[0:2, 4:6, 1:3])
    np.testing.assert_array_equal(np.asarray(part["lat"][:]), lat[4:6])
    assert dataset["t2m"].attributes["_FillValue"] == zarr.open_array(store / "t2m", mode="r").attrs.get(
        "_FillValue", zarr.open_array(store / "t2m", mode="r").fill_value
    )


def test_pydap_reads_a_constrained_dataset_url():
    dataset = open_url(dap_url("climate") + "?lat[0:1:4],tas[0:1:0][0:1:1][0:1:2]")
    assert set(dataset.keys()) == {"lat", "tas"}
    lat = zarr.open_array(STORES["climate"] / "lat", mode="r")[0:5]
    np.testing.assert_array_equal(np.asarray(dataset["lat"][:]), lat)


def test_pydap_reads_unsigned_and_widened_integers():
    group = "zarr_python"
    dataset = open_url(dap_url("fixtures", group))
    checked = 0
    for entry in MANIFEST["arrays"]:
        g, name = entry["path"].rsplit("/", 1)
        if g != group or entry["data_type"] not in ("uint8", "int8", "uint16", "uint32") or not entry["shape"]:
            continue  # pydap reads a Byte scalar's first byte; libdap and netCDF-C put the value last
        if 0 in entry["shape"]:
            continue  # pydap asks an empty array for [0:1:2^63-2], out of range (400)
        got = np.asarray(dataset[name][:])
        np.testing.assert_array_equal(got.astype("i8"), expected(entry).astype("i8"), err_msg=name)
        checked += 1
    assert checked >= 3, checked


# --- errors ------------------------------------------------------------------------


def test_errors_are_dap2_error_bodies_every_client_reports():
    r = requests.get(dap_url("climate") + ".dods?nosuch", timeout=30)
    assert r.status_code == 400
    assert r.headers["content-description"] == "dods_error"
    assert re.match(r'Error \{\n    code = 400;\n    message = ".*nosuch.*";\n\};\n', r.text, re.S), r.text
    with pytest.raises(Exception):
        netCDF4.Dataset(dap_url("climate", "nosuch"))
    with pytest.raises(Exception):
        open_url(dap_url("climate") + "?tas[0:1:99]")[...]
