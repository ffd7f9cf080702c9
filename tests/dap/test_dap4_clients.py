"""OPeNDAP DAP4 (api.md 4.5) read by the clients people use, each compared
with zarr-python's or xarray's own read of the same store:

- netCDF-C's `ncdump -h` and `ncdump -v VAR` of `dap4://` URLs (Debian
  netcdf-bin 4.9.0, which fetches `.dmr.xml`, then the whole `.dap`),
  on nested groups, every integer width, strings and CF time;
- netCDF4-python `Dataset("dap4://...")` (the netCDF-C its wheel bundles)
  on every fixture group;
- pydap's `open_url(URL, protocol="dap4")` (`.dmr`, then one `.dap` with
  `dap4.ce` and `dap4.checksum=true` per variable read) on every fixture
  array, whole and through a strided hyperslab, with its checksums;
- `xarray.open_dataset("dap4://...", engine="pydap")`, values after CF
  decoding equal to `xarray.open_zarr` of the store.

pydap turns a `dap4://` URL into `https://`; this server runs plain HTTP in
CI, so the xarray tests hand pydap a requests session that sends its
`https://` requests as `http://` (nothing else of the client is changed).

Runs in .venv-dap (Python 3.12: pydap 3.5.11 needs it) against the server
TEST_SERVER_URL names (scripts/ci/lib.sh start_server).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import warnings
import zlib
from pathlib import Path
from urllib.parse import urlparse

import netCDF4
import numpy as np
import pytest
import requests
import xarray as xr
import zarr
from pydap.client import open_url

warnings.filterwarnings("ignore", category=UserWarning)

ROOT = Path(__file__).resolve().parents[2]
BASE = os.environ.get("TEST_SERVER_URL", "http://127.0.0.1:8080").rstrip("/")
FIXTURES = Path(os.environ.get("ZARR_FIXTURES", ROOT / "tests" / "fixtures" / "interop"))
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
STORES = {
    "fixtures": FIXTURES / "data.zarr",
    "climate": ROOT / "sample" / "climate.zarr",
    "stations": ROOT / "sample" / "stations.zarr",
}
# Zarr data types DAP4 carries, and the NumPy type each is read as.
DAP4 = {
    "bool": "u1", "uint8": "u1", "int8": "i1", "int16": "i2", "uint16": "u2", "int32": "i4",
    "uint32": "u4", "int64": "i8", "uint64": "u8", "float16": "f4", "float32": "f4", "float64": "f8",
}
# Groups of the fixtures with no corrupt arrays (netCDF-C reads a whole group at once).
CLEAN_GROUPS = ["zarr_python", "tensorstore", "v2", "zarr218", "implicit_parent"]
# What netCDF-C prints as `_` without a `_FillValue`: its default fill of each type.
NC_FILL = {"int8": -127, "uint8": 255, "bool": -127, "int16": -32767, "uint16": 65535, "int32": -2147483647,
           "uint32": 4294967295, "int64": -9223372036854775806, "uint64": 18446744073709551614}


@pytest.fixture(autouse=True)
def time_limit():
    """Each test within 180 s: a client thread that waits forever (pydap's
    fetching thread after an error, say) fails its test, not the stage."""
    def expired(*_):
        raise TimeoutError("the test took more than 180 s")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(180)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def http_url(ds: str, group: str = "") -> str:
    return f"{BASE}/v1/datasets/{ds}/dap4" + (f"/{group}" if group else "")


def dap4_url(ds: str, group: str = "") -> str:
    return "dap4://" + http_url(ds, group).split("://", 1)[1]


def ncdump() -> str:
    path = shutil.which("ncdump")
    if path is None:
        if os.environ.get("CI") == "1":
            pytest.fail("ncdump (Debian netcdf-bin) is missing")
        pytest.skip("ncdump (Debian netcdf-bin) is not installed")
    return path


def expected(entry) -> np.ndarray:
    """The values zarr-python (or tensorstore) read of a manifest array."""
    raw = (FIXTURES / entry["expected"]).read_bytes()
    dtype = np.dtype(entry["data_type"]).newbyteorder("<")
    return np.frombuffer(raw, dtype=dtype).reshape(entry["shape"])


def as_dap4(values: np.ndarray, data_type: str) -> np.ndarray:
    return values.astype(DAP4[data_type])


def same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        return np.array_equal(a.astype("f8"), b.astype("f8"), equal_nan=True)
    return np.array_equal(a, b)


def arrays_of(group: str):
    """Manifest arrays DAP4 carries under `group`, with their path below it."""
    for entry in MANIFEST["arrays"]:
        if entry["data_type"] in DAP4 and entry["path"].startswith(group + "/"):
            yield entry["path"][len(group) + 1:], entry


# --- netCDF-C: ncdump ----------------------------------------------------------


def run_ncdump(*args) -> str:
    out = subprocess.run([ncdump(), *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_ncdump_header_shows_nested_groups_and_every_type():
    header = run_ncdump("-h", dap4_url("fixtures"))
    # v2/nested is a group inside the group v2.
    assert re.search(r"^group: v2 \{.*^  group: nested \{", header, re.S | re.M), header
    for decl in ["ubyte ", "byte ", "short ", "ushort ", "int ", "uint ", "int64 ", "uint64 ",
                 "float ", "double ", "string "]:
        assert re.search(rf"^\s+{decl}\w+\(", header, re.M), decl
    climate = run_ncdump("-h", dap4_url("climate"))
    z = xr.open_zarr(STORES["climate"], decode_cf=False)
    for dim, size in z.sizes.items():
        assert re.search(rf"^\t{dim} = {size} ;$", climate, re.M), climate
    assert "float tas(time, lat, lon) ;" in climate
    assert f'string tas:units = "{z.tas.attrs["units"]}" ;' in climate
    assert f'string :title = "{z.attrs["title"]}" ;' in climate


def ncdump_values(text: str, var: str) -> list[str]:
    data = text.split("data:", 1)[1]
    body = re.search(rf"^ {re.escape(var)} =(.*?) ;$", data, re.S | re.M).group(1)
    return [v for v in re.split(r",\s*|\s+", body.strip()) if v]


@pytest.mark.parametrize("group", ["zarr_python", "tensorstore", "v2"])
def test_ncdump_prints_every_integer_width_as_zarr_python_reads_it(group):
    names = [(p, e) for p, e in arrays_of(group)
             if "/" not in p and e["data_type"] not in ("float16", "float32", "float64") and 0 not in e["shape"]]
    assert len({e["data_type"] for _, e in names}) >= 8, names
    text = run_ncdump("-v", ",".join(p for p, _ in names), dap4_url("fixtures", group))
    for name, entry in names:
        # `_` is a value equal to the variable's _FillValue, or netCDF's default fill without one.
        fill = re.search(rf"^\s+{re.escape(name)}:_FillValue = (-?\d+)", text, re.M)
        fill = int(fill.group(1)) if fill else NC_FILL[entry["data_type"]]
        got = [fill if v == "_" else int(v.rstrip("UBSL")) for v in ncdump_values(text, name)]
        want = as_dap4(expected(entry), entry["data_type"]).ravel()
        assert [int(v) for v in want] == got, f"{group}/{name}"


def test_ncdump_prints_strings_and_cf_times():
    text = run_ncdump("-v", "string_1d,datetime_days", dap4_url("fixtures", "types"))
    want = zarr.open_array(STORES["fixtures"] / "types" / "string_1d", mode="r")[...]
    got = re.findall(r'"((?:[^"\\]|\\.)*)"', text.split(" string_1d =", 1)[1].split(";")[0])
    assert [g.replace('\\"', '"').replace("\\t", "\t") for g in got] == [str(s) for s in want]
    days = zarr.open_array(STORES["fixtures"] / "types" / "datetime_days", mode="r")[...]
    assert 'datetime_days:units = "days since 1970-01-01"' in text
    got = [int(v) for v in ncdump_values(text, "datetime_days")]
    assert got == [int(v) for v in days.astype("i8").ravel()]


def test_netcdf_c_reads_without_checksums_when_the_url_says_so():
    """`?dap4.checksum=false` on a dap4:// URL reaches the server, which
    then sends none and says so on the DMR's chunk (netCDF-C 4.9.0 assumes
    checksums unless flagged; the netCDF-C of netCDF4-python reads the
    parameter)."""
    url = dap4_url("climate") + "?dap4.checksum=false"
    lat = zarr.open_array(STORES["climate"] / "lat", mode="r")[...]
    text = run_ncdump("-v", "lat", url)
    assert [float(v) for v in ncdump_values(text, "lat")] == list(lat)
    ds = netCDF4.Dataset(url)
    assert np.array_equal(ds["lat"][...], lat)
    ds.close()


# --- netCDF4-python on every fixture group ---------------------------------------


@pytest.mark.parametrize("group", CLEAN_GROUPS)
def test_netcdf4_reads_every_fixture_array_of_a_group(group):
    try:
        ds = netCDF4.Dataset(dap4_url("fixtures", group))
    except OSError as e:
        pytest.fail(f"netCDF4 {netCDF4.__netcdf4libversion__} cannot open a dap4:// URL: {e}")
    ds.set_auto_maskandscale(False)
    checked = 0
    for path, entry in arrays_of(group):
        want = expected(entry)
        if 0 in want.shape:
            continue
        var = ds[path]
        assert same(var[...], as_dap4(want, entry["data_type"])), f"{group}/{path}"
        checked += 1
    ds.close()
    assert checked >= 1


# --- pydap ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fixtures_dap4():
    return open_url(http_url("fixtures"), protocol="dap4")


def test_pydap_reads_every_fixture_array_and_a_hyperslab(fixtures_dap4):
    checked = 0
    for entry in MANIFEST["arrays"]:
        if entry["data_type"] not in DAP4 or entry["path"].startswith("corrupt/") or 0 in entry["shape"]:
            continue
        var = fixtures_dap4["/" + entry["path"]]
        want = as_dap4(expected(entry), entry["data_type"])
        assert var.shape == want.shape, entry["path"]
        got = np.asarray(var[...].data) if want.ndim else np.asarray(var[...].data).reshape(())
        assert same(got, want), entry["path"]
        if want.ndim and all(n > 2 for n in want.shape):
            part = tuple(slice(1, None, 2) for _ in want.shape)
            assert same(np.asarray(var[part].data), want[part]), entry["path"]
        checked += 1
    assert checked > 150, checked


def test_pydap_reads_strings_and_datetimes():
    # ASCII text: pydap 3.5.11 decodes DAP4 strings with astype("S").
    strings = zarr.open_array(STORES["fixtures"] / "v2_types" / "fixed_utf32_be", mode="r")[...]
    text = open_url(http_url("fixtures", "v2_types"), protocol="dap4")["fixed_utf32_be"]
    got = np.vectorize(lambda s: s.decode() if isinstance(s, bytes) else str(s))(np.asarray(text[...].data))
    assert got.shape == strings.shape and (got == np.vectorize(lambda s: str(s).rstrip("\0"))(strings)).all()
    dataset = open_url(http_url("fixtures", "types"), protocol="dap4")
    ns = zarr.open_array(STORES["fixtures"] / "types" / "datetime_ns", mode="r")
    var = dataset["datetime_ns"]
    assert var.attributes["units"] == "nanoseconds since 1970-01-01"
    assert np.array_equal(np.asarray(var[...].data).astype("i8"), ns[...].astype("i8"))


def test_the_checksums_pydap_asks_for_are_zlib_crc32s():
    """The chunked body, taken apart here: the DMR chunk, then each
    variable's little-endian bytes and their CRC-32 as zlib computes it."""
    r = requests.get(http_url("climate") + ".dap", params={"dap4.ce": "/lat;/lon", "dap4.checksum": "true"},
                     timeout=60)
    assert r.status_code == 200 and r.headers["content-type"] == "application/vnd.opendap.dap4.data"
    chunks, at, body = [], 0, r.content
    while at < len(body):
        flags, n = body[at], int.from_bytes(body[at + 1:at + 4], "big")
        chunks.append((flags, body[at + 4:at + 4 + n]))
        at += 4 + n
    assert chunks[0][1].startswith(b'<?xml version="1.0" encoding="UTF-8"?>') and chunks[0][1].endswith(b"\r\n")
    assert chunks[-1][0] & 1 and not any(f & 1 for f, _ in chunks[:-1])
    data = b"".join(c for _, c in chunks[1:])
    for name in ["lat", "lon"]:
        want = zarr.open_array(STORES["climate"] / name, mode="r")[...].astype("<f8").tobytes()
        assert data[:len(want)] == want
        assert int.from_bytes(data[len(want):len(want) + 4], "little") == zlib.crc32(want)
        data = data[len(want) + 4:]
    assert data == b""


# --- xarray, engine pydap, dap4:// URLs --------------------------------------------


class PlainHttp(requests.adapters.HTTPAdapter):
    """Sends the https:// requests pydap makes of a dap4:// URL as http://."""

    def send(self, request, **kwargs):
        request.url = request.url.replace("https://", "http://", 1)
        return super().send(request, **kwargs)


def session() -> requests.Session:
    s = requests.Session()
    if urlparse(BASE).scheme == "http":
        s.mount("https://", PlainHttp())
    return s


def non_ascii_text(z: xr.Dataset) -> bool:
    for v in z.variables.values():
        if v.dtype.kind in "OUT" and any(not str(s).isascii() for s in np.asarray(v.values).ravel()):
            return True
    return False


XARRAY_DATASETS = [("climate", ""), ("fixtures", "xarray_cf_v3"), ("fixtures", "xarray_grid"),
                   ("fixtures", "xarray_grid_v3")]


@pytest.mark.parametrize("ds,group", XARRAY_DATASETS, ids=[f"{d}/{g}" for d, g in XARRAY_DATASETS])
def test_xarray_reads_what_open_zarr_reads(ds, group):
    z = xr.open_zarr(STORES[ds] / group if group else STORES[ds])
    if non_ascii_text(z):
        # pydap 3.5.11 makes DAP4 strings NumPy bytes with astype("S"), ASCII
        # only (pydap/handlers/dap.py decode_variable): 'Tromsø' raises in its
        # fetching thread, and xarray then waits for it forever.
        pytest.skip("pydap 3.5.11 cannot decode non-ASCII DAP4 strings")
    d = xr.open_dataset(dap4_url(ds, group), engine="pydap", session=session())
    assert set(z.variables) <= set(d.variables), (set(z.variables), set(d.variables))
    for name in z.variables:
        want, got = z[name].values, d[name].values
        if want.dtype.kind in "OUT":
            got = np.vectorize(lambda s: s.decode() if isinstance(s, bytes) else str(s))(got)
            assert (got == np.vectorize(str)(want)).all(), name
        elif want.dtype.kind == "M":
            assert np.array_equal(got.astype("M8[ns]"), want.astype("M8[ns]"), equal_nan=True), name
        else:
            assert same(got, want), f"{ds}/{group} {name}"
        assert d[name].dims == z[name].dims, name


def test_xarray_reads_a_nested_group():
    group = "v2/nested"
    d = xr.open_dataset(dap4_url("fixtures"), engine="pydap", group=group, session=session(), mask_and_scale=False)
    checked = 0
    for path, entry in arrays_of(group):
        if 0 in entry["shape"]:
            continue
        assert same(d[path].values, as_dap4(expected(entry), entry["data_type"])), path
        checked += 1
    assert checked >= 1


# --- errors ------------------------------------------------------------------------


def test_errors_are_dap4_error_documents_clients_report():
    r = requests.get(http_url("climate") + ".dap", params={"dap4.ce": "/nosuch"}, timeout=30)
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("application/vnd.opendap.dap4.error+xml")
    assert re.match(r'<\?xml[^>]*>\s*<Error httpcode="400">\s*<Message>.*nosuch.*</Message>\s*</Error>', r.text, re.S)
    out = subprocess.run([ncdump(), "-h", dap4_url("climate", "nosuch")], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    with pytest.raises(requests.HTTPError, match="400"):
        open_url(http_url("climate") + "?dap4.ce=/nosuch", protocol="dap4")
