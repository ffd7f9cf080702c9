#!/usr/bin/env python3
"""Write the sample datasets served by `zarr-serve` when started without arguments.

Usage: python scripts/make_sample.py OUTDIR      -> OUTDIR/sample.zarr, OUTDIR/stations.zarr,
                                                    OUTDIR/climate.zarr, OUTDIR/projected.zarr

- sample.zarr (Zarr v3, zarr-python 3): a sharded temperature cube, a mask, a
  labels group with a string array;
- stations.zarr (Zarr v2 with consolidated metadata, written by xarray the way
  most public archives are): daily station data with a CF time coordinate,
  packed int16 temperatures and a string station coordinate;
- climate.zarr (Zarr v3, written by xarray): a global 2-degree near-surface
  temperature field on latitude (north to south) and longitude (0..360) with
  a CF time coordinate: a geo variable for map tiles and WMS.
- projected.zarr (Zarr v3, written by xarray, CRSs by pyproj): geo variables on
  projected grids, one per way of naming a CRS: `sea_ice` on NSIDC's polar
  stereographic grid (EPSG:3413, a CF grid_mapping with crs_wkt, as pyproj's
  CRS.to_cf() writes it; metres), `lcc/t2m` on a Lambert conformal conic grid
  named by CF parameters alone (no WKT; kilometres) and `utm/elevation` on UTM
  zone 33N named by GeoZarr's `proj:code` on its group.

Written with zarr-python 3 (see tests/fixtures/requirements.txt for pinned versions).
Deterministic: the content is computed, gzip headers use mtime 0.
"""
import gzip
import os
import shutil
import sys
import types
import warnings

warnings.filterwarnings("ignore")
gzip.time = types.SimpleNamespace(time=lambda: 0.0)  # reproducible gzip headers

import numpy as np  # noqa: E402
import zarr  # noqa: E402
from zarr.codecs import BytesCodec, GzipCodec, ZstdCodec  # noqa: E402


def temperature_field(t0, t1, y0, y1, x0, x1):
    t = np.arange(t0, t1, dtype=np.float64)[:, None, None]
    y = np.arange(y0, y1, dtype=np.float64)[None, :, None]
    x = np.arange(x0, x1, dtype=np.float64)[None, None, :]
    lat = (y / 255.0 - 0.5) * np.pi  # -pi/2 .. pi/2
    lon = x / 256.0 * 2 * np.pi
    season = np.sin(2 * np.pi * t / 64.0)
    v = (288.0 + 25.0 * np.cos(lat) - 8.0 * np.sin(lat) * season
         + 4.0 * np.sin(3 * lon + t / 8.0) * np.cos(2 * lat)
         + 1.5 * np.cos(5 * lon - 2 * lat + t / 5.0))
    # quantise to 1/16 K: exact in float32, compresses well, still smooth
    return (np.round(v * 16.0) / 16.0).astype(np.float32)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    out = os.path.join(os.path.abspath(sys.argv[1]), "sample.zarr")
    if os.path.exists(out):
        shutil.rmtree(out)
    root = zarr.open_group(out, mode="w", attributes={
        "title": "zarr-serve sample dataset",
        "description": "Synthetic data for trying zarr-serve: a sharded float32 temperature cube "
                       "(some shards never written, read as NaN), a gzip uint8 mask and a "
                       "labels group.",
        "source": {"generator": "scripts/make_sample.py", "zarr_python": zarr.__version__,
                   "license": "CC0-1.0"},
        "conventions": {"units": {"temperature": "K"}, "grid": {"y": 256, "x": 256, "time": 64}},
    })

    temp = root.create_array(
        "temperature", shape=(64, 256, 256), dtype="float32",
        shards=(16, 128, 128), chunks=(4, 32, 32),
        serializer=BytesCodec(endian="little"), compressors=[ZstdCodec(level=3)],
        fill_value=np.float32("nan"), dimension_names=["time", "y", "x"],
        attributes={"units": "K", "long_name": "air temperature", "valid_range": [230.0, 330.0]})
    never = {(1, 1, 0), (2, 0, 1), (3, 1, 1)}  # shard indices left unwritten
    for st in range(4):
        for sy in range(2):
            for sx in range(2):
                if (st, sy, sx) in never:
                    continue
                t0, y0, x0 = st * 16, sy * 128, sx * 128
                temp[t0:t0 + 16, y0:y0 + 128, x0:x0 + 128] = temperature_field(
                    t0, t0 + 16, y0, y0 + 128, x0, x0 + 128)

    yy, xx = np.mgrid[0:256, 0:256]
    mask = ((((yy - 128) ** 2 + (xx - 100) ** 2) < 70 ** 2) | ((xx > 200) & (yy < 60))).astype(np.uint8)
    m = root.create_array("mask", shape=(256, 256), dtype="uint8", chunks=(64, 64),
                          compressors=[GzipCodec(level=6)], fill_value=0,
                          dimension_names=["y", "x"],
                          attributes={"flag_values": [0, 1], "flag_meanings": "water land"})
    m[...] = mask

    labels = root.create_group("labels", attributes={
        "description": "classification labels", "classes": {"0": "unknown", "1": "ocean", "2": "land"},
        "version": 2})
    c = labels.create_array("classes", shape=(100,), dtype="int16", chunks=(30,), fill_value=-1,
                            dimension_names=["i"], attributes={"units": "1"})
    c[...] = (np.arange(100, dtype=np.int16) * 7) % 3
    names = labels.create_array("names", shape=(3,), dtype=str, chunks=(3,), dimension_names=["class"],
                                attributes={"description": "the name of each class value"})
    names[...] = np.array(["unknown", "ocean", "land"], dtype=object)
    report(out)
    write_stations(os.path.join(os.path.abspath(sys.argv[1]), "stations.zarr"))
    write_climate(os.path.join(os.path.abspath(sys.argv[1]), "climate.zarr"))
    write_projected(os.path.join(os.path.abspath(sys.argv[1]), "projected.zarr"))


def write_stations(out):
    """A small Zarr v2 dataset as xarray writes one (consolidated, CF-encoded)."""
    import pandas as pd
    import xarray as xr

    if os.path.exists(out):
        shutil.rmtree(out)
    rng = np.random.default_rng(2020)
    time = pd.date_range("2020-01-01", periods=31, freq="D")
    station = np.array(["Oslo", "Bergen", "Tromsø", "Stavanger", "Longyearbyen"], dtype=object)
    lat = np.array([59.91, 60.39, 69.65, 58.97, 78.22])
    day = np.arange(31)[:, None]
    temp = -2.0 - 0.4 * (lat[None, :] - 59) + 3 * np.sin(day / 5.0) + rng.normal(0, 1.0, (31, 5))
    temp[10:13, 4] = np.nan  # a gap in the record
    precip = np.round(np.clip(rng.gamma(0.6, 4.0, (31, 5)) - 1.0, 0, None), 1).astype("float32")
    ds = xr.Dataset(
        {"temperature": (("time", "station"), temp, {"units": "degC", "long_name": "daily mean air temperature"}),
         "precipitation": (("time", "station"), precip, {"units": "mm", "long_name": "daily precipitation"})},
        coords={"time": time, "station": station,
                "lat": ("station", lat, {"units": "degrees_north"}),
                "lon": ("station", np.array([10.75, 5.32, 18.96, 5.73, 15.65]), {"units": "degrees_east"})},
        attrs={"title": "zarr-serve sample stations (synthetic)", "Conventions": "CF-1.8",
               "source": "scripts/make_sample.py, xarray " + xr.__version__, "license": "CC0-1.0"})
    encoding = {
        "temperature": {"dtype": "int16", "scale_factor": 0.01, "add_offset": 0.0, "_FillValue": -32768,
                        "chunks": (16, 5)},
        "precipitation": {"chunks": (16, 5)},
        "time": {"units": "days since 2020-01-01", "calendar": "proleptic_gregorian", "dtype": "int64"},
    }
    ds.to_zarr(out, mode="w", zarr_format=2, consolidated=True, encoding=encoding)
    report(out)


def write_climate(out):
    """A global grid as models and reanalyses publish one: latitude from north
    to south, longitude 0..360, CF time, float32 with a fill value."""
    import pandas as pd
    import xarray as xr

    if os.path.exists(out):
        shutil.rmtree(out)
    lat = np.arange(89.0, -90.0, -2.0)
    lon = np.arange(1.0, 360.0, 2.0)
    time = pd.date_range("2024-01-01", periods=4, freq="D")
    la, lo = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
    base = 300.0 - 55.0 * np.sin(la) ** 2 + 4.0 * np.cos(3 * lo) * np.cos(la)
    tas = np.stack([base + 2.0 * np.sin(lo + 0.5 * d) * np.cos(la) for d in range(len(time))]).astype("float32")
    tas[:, 40:45, 100:110] = np.nan  # a patch of missing values
    ds = xr.Dataset(
        {"tas": (("time", "lat", "lon"), tas,
                 {"units": "K", "standard_name": "air_temperature",
                  "long_name": "near-surface air temperature"})},
        coords={"time": time,
                "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude"}),
                "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude"})},
        attrs={"title": "zarr-serve sample climate field (synthetic)", "Conventions": "CF-1.8",
               "source": "scripts/make_sample.py (synthetic)", "license": "CC0-1.0"})
    encoding = {"tas": {"chunks": (1, 45, 90), "_FillValue": np.float32("nan")},
                "time": {"units": "days since 2024-01-01", "dtype": "int64"}}
    ds.to_zarr(out, mode="w", zarr_format=3, consolidated=False, encoding=encoding)
    report(out)


def write_projected(out):
    """Geo variables on projected grids (contract 3.2's three ways to name a CRS)."""
    import pyproj
    import xarray as xr

    if os.path.exists(out):
        shutil.rmtree(out)
    # NSIDC's 25 km sea-ice grid (EPSG:3413), y from north to south as NSIDC
    # publishes it: cell centres, metres.
    x = np.arange(-3837500.0, 3750000.0, 25000.0)
    y = np.arange(5837500.0, -5350000.0, -25000.0)
    lon, lat = pyproj.Transformer.from_crs(3413, 4326, always_xy=True).transform(*np.meshgrid(x, y))
    ice = np.clip((lat - 62.0) / 18.0, 0.0, 1.0) * (0.8 + 0.2 * np.cos(np.deg2rad(3 * lon)))
    ice = np.where(lat > 87.0, np.nan, ice).astype("float32")  # the pole hole
    crs = xr.DataArray(np.int32(0), attrs=pyproj.CRS.from_epsg(3413).to_cf())
    ds = xr.Dataset(
        {"sea_ice": (("y", "x"), ice, {"long_name": "sea ice concentration", "units": "1",
                                         "grid_mapping": "crs"}),
         "crs": crs},
        coords={"x": ("x", x, {"standard_name": "projection_x_coordinate", "units": "m"}),
                "y": ("y", y, {"standard_name": "projection_y_coordinate", "units": "m"})},
        attrs={"title": "zarr-serve sample projected grids (synthetic)", "Conventions": "CF-1.8",
               "source": "scripts/make_sample.py (synthetic)", "license": "CC0-1.0"})
    ds.to_zarr(out, mode="w", zarr_format=3, consolidated=False,
               encoding={"sea_ice": {"chunks": (112, 152), "_FillValue": np.float32("nan")}})
    # Lambert conformal conic over North America, named by CF parameters only,
    # coordinates in kilometres.
    lambert = {"grid_mapping_name": "lambert_conformal_conic", "standard_parallel": [33.0, 45.0],
               "longitude_of_central_meridian": -97.0, "latitude_of_projection_origin": 40.0,
               "false_easting": 0.0, "false_northing": 0.0}
    xk = np.arange(-2400.0, 2400.0, 40.0) + 20.0
    yk = np.arange(-1600.0, 1600.0, 40.0) + 20.0
    proj = pyproj.Proj(proj="lcc", lat_1=33, lat_2=45, lat_0=40, lon_0=-97, datum="WGS84")
    lon, lat = proj(*np.meshgrid(xk * 1000.0, yk * 1000.0), inverse=True)
    t2m = (288.0 - 0.6 * (lat - 40.0) + 3.0 * np.sin(np.deg2rad(4 * lon))).astype("float32")
    lcc = xr.Dataset(
        {"t2m": (("y", "x"), t2m, {"long_name": "air temperature at 2 m", "units": "K",
                                     "grid_mapping": "lambert"}),
         "lambert": xr.DataArray(np.int32(0), attrs=lambert)},
        coords={"x": ("x", xk, {"standard_name": "projection_x_coordinate", "units": "km"}),
                "y": ("y", yk, {"standard_name": "projection_y_coordinate", "units": "km"})})
    lcc.to_zarr(out, group="lcc", mode="w", zarr_format=3, consolidated=False,
                encoding={"t2m": {"chunks": (40, 60)}})
    # UTM zone 33N named by GeoZarr's proj:code on the group; 2 km cells.
    xu = np.arange(301000.0, 700000.0, 2000.0)
    yu = np.arange(6999000.0, 6600000.0, -2000.0)
    xx, yy = np.meshgrid(xu, yu)
    elevation = (500.0 + 400.0 * np.sin(xx / 37000.0) * np.cos(yy / 23000.0)).astype("float32")
    utm = xr.Dataset({"elevation": (("y", "x"), elevation, {"long_name": "surface elevation", "units": "m"})},
                     coords={"x": ("x", xu, {"axis": "X", "units": "m"}),
                             "y": ("y", yu, {"axis": "Y", "units": "m"})},
                     attrs={"proj:code": "EPSG:32633"})
    utm.to_zarr(out, group="utm", mode="w", zarr_format=3, consolidated=False,
                encoding={"elevation": {"chunks": (100, 100)}})
    report(out)


def report(out):
    total = 0
    for dp, _, fs in os.walk(out):
        total += sum(os.path.getsize(os.path.join(dp, f)) for f in fs)
    print("wrote %s (%d bytes)" % (out, total))


if __name__ == "__main__":
    main()
