#!/usr/bin/env python3
"""Write the EDR benchmark dataset: ten years of daily near-surface temperature.

    edr_make_data.py DIR [CT,CLAT,CLON]   -> DIR/edr-CTxCLATxCLON.zarr (skipped when complete)

Prints the store's path, then "NT NLAT NLON CT CLAT CLON" (shape, then chunk shape),
on stdout (bench/edr_peer.sh reads them). The chunk shape defaults to 365,45,45.

Zarr v3, written with xarray + zarr-python 3 (bench/requirements-edr.txt):

- tas(time, lat, lon) float32, 3653 x 180 x 360 (2000-01-01 .. 2009-12-31 daily,
  a 1 degree global grid; 947 MB decoded), zstd level 3, `_FillValue` NaN, CF
  attributes (standard_name air_temperature, units K, cell_methods)
- chunks (365, 45, 45) by default: a year of days by 45 x 45 degrees, 2.96 MB decoded each,
  4 x 8 x 11 = 352 chunks. The layout of an archive meant for both maps and time
  series: a point's 10-year series reads 11 chunks (10 full years + the 3 days of
  the 11th), a one-year area reads 1-4, one day's global map reads 32. A chunk of
  a few MB is what zarr's and xarray's guides recommend (1-10 MB); (365, 90, 90)
  would be 11.8 MB and make every point series decode 130 MB, (1, 180, 360)
  (map chunks) would make it read 3653 objects. Another shape (bench/edr_peer.sh's
  EDR_CHUNKS) is written to a store of its own.
- coordinates: time int32 "days since 2000-01-01" (calendar standard), lat
  -89.5 .. 89.5 ascending, lon -179.5 .. 179.5 (float64, CF axis/units/standard_name)
- values: a zonal climate (300 K at the equator to 250 K at the poles), a seasonal
  cycle growing with latitude (opposite in the two hemispheres), a land/sea-like
  pattern, and AR(1) day-to-day weather noise; rounded to 1/64 K (the low mantissa
  bits zero, as packed archives are). Days 997, 1994 and 2991 are missing
  everywhere (NaN: a lost day of input, as real archives have), so the series and
  areas hold nulls to compare.

Deterministic (fixed seed). A marker file `edr-365x45x45.zarr.complete` next to the store is
written last; an incomplete store is removed and rewritten.
"""
import os
import shutil
import sys
import warnings

import numpy as np
import pandas as pd
import xarray as xr

with warnings.catch_warnings(record=True):  # numcodecs' DeprecationWarning about crc32c
    from zarr.codecs import ZstdCodec

NT, NLAT, NLON = 3653, 180, 360
CHUNKS = (365, 45, 45)
MISSING_DAYS = (997, 1994, 2991)


def field():
    rng = np.random.default_rng(30)
    lat = -89.5 + np.arange(NLAT, dtype=np.float64)
    lon = -179.5 + np.arange(NLON, dtype=np.float64)
    la = np.deg2rad(lat)[:, None]
    lo = np.deg2rad(lon)[None, :]
    climate = (250.0 + 50.0 * np.cos(la) ** 2 + 3.0 * np.sin(3 * lo) * np.cos(2 * la)).astype(np.float32)
    seasonal = (-15.0 * np.sin(la) * (1.0 + 0.3 * np.cos(2 * lo))).astype(np.float32)
    day = np.arange(NT)
    cycle = np.cos(2 * np.pi * (day - 15) / 365.25).astype(np.float32)
    out = np.empty((NT, NLAT, NLON), dtype=np.float32)
    weather = np.zeros((NLAT, NLON), dtype=np.float32)
    for t in range(NT):
        weather = 0.7 * weather + rng.normal(0.0, 2.0, size=(NLAT, NLON)).astype(np.float32)
        v = climate + seasonal * cycle[t] + weather
        out[t] = np.round(v * 64.0) / 64.0
    out[list(MISSING_DAYS)] = np.nan
    return lat, lon, out


def build(chunks):
    lat, lon, data = field()
    time = pd.date_range("2000-01-01", periods=NT, freq="D")
    ds = xr.Dataset(
        {"tas": (("time", "lat", "lon"), data, {
            "units": "K", "standard_name": "air_temperature",
            "long_name": "Near-Surface Air Temperature (synthetic)", "cell_methods": "time: mean"})},
        coords={
            "time": ("time", time, {"standard_name": "time", "axis": "T", "long_name": "time"}),
            "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude", "axis": "Y"}),
            "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude", "axis": "X"}),
        },
        attrs={"title": "zarr-serve EDR benchmark: daily tas, 2000-2009", "Conventions": "CF-1.8"},
    )
    enc = {
        "tas": {"chunks": chunks, "compressors": (ZstdCodec(level=3),), "_FillValue": np.float32("nan")},
        "time": {"units": "days since 2000-01-01", "calendar": "standard", "dtype": "int32"},
        "lat": {"compressors": (ZstdCodec(level=3),)},
        "lon": {"compressors": (ZstdCodec(level=3),)},
    }
    return ds, enc


def main():
    data = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".cache/bench-edr")
    os.makedirs(data, exist_ok=True)
    chunks = tuple(int(c) for c in sys.argv[2].split(",")) if len(sys.argv) > 2 else CHUNKS
    if len(chunks) != 3 or min(chunks) < 1:
        raise SystemExit(f"chunk shape {sys.argv[2]!r}: give three positive lengths, e.g. 365,45,45")
    path = os.path.join(data, "edr-" + "x".join(map(str, chunks)) + ".zarr")
    marker = path + ".complete"
    if os.path.exists(marker) and os.path.isdir(path):
        print(f"{path}: complete, kept", file=sys.stderr)
    else:
        shutil.rmtree(path, ignore_errors=True)
        ds, enc = build(chunks)
        ds.to_zarr(path, zarr_format=3, consolidated=False, encoding=enc, mode="w")
        open(marker, "w").close()
        print(f"{path}: written ({NT}x{NLAT}x{NLON} float32, chunks {chunks}, zstd)", file=sys.stderr)
    print(path)
    print(NT, NLAT, NLON, *chunks)


if __name__ == "__main__":
    main()
