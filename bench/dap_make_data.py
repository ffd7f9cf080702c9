#!/usr/bin/env python3
"""Write the OPeNDAP benchmark dataset: a 512 MiB float32 cube.

    dap_make_data.py DIR           -> DIR/dap.zarr (skipped when complete)

Prints the shape "NT NLAT NLON" on stdout (bench/dap_peer.sh reads it).

Zarr v3, written with xarray + zarr-python 3 (bench/requirements-dap.txt):

- t(time, lat, lon) float32, 64 x 1024 x 2048 (512 MiB decoded), chunks
  (2, 512, 1024) = 4 MiB, zstd level 3 (the v3 `zstd` codec, which both
  zarr-serve and zarr-python read)
- 1-D coordinates: time int32 "hours since 2024-01-01 00:00:00" (6-hourly),
  lat 89.9 .. -89.9 descending (float64), lon 0 .. 359.82 (float64)
- values: a smooth field (about 245..305 K) that drifts with time, plus
  N(0, 0.5 K) cell noise, rounded to 1/32 K so the low mantissa bits are zero
  (compressible, as packed or quantised reanalysis fields are); no NaNs

Deterministic (fixed seed). A marker file `dap.zarr.complete` next to the store is
written last; an incomplete store is removed and rewritten.
"""
import os
import shutil
import sys
import warnings

import numpy as np
import pandas as pd
import xarray as xr

with warnings.catch_warnings(record=True):  # numcodecs' DeprecationWarning about crc32c (on
    # import, under a filter of its own that PYTHONWARNINGS=ignore does not override)
    from zarr.codecs import ZstdCodec

NT, NLAT, NLON = 64, 1024, 2048
CHUNKS = (2, 512, 1024)


def field():
    rng = np.random.default_rng(2)
    lat = 90.0 - (np.arange(NLAT) + 0.5) * (180.0 / NLAT)
    lon = np.arange(NLON) * (360.0 / NLON)
    la = np.deg2rad(lat)[:, None]
    lo = np.deg2rad(lon)[None, :]
    base = (300.0 - 50.0 * np.sin(la) ** 2 + 2.0 * np.sin(9 * lo) * np.cos(7 * la)).astype(np.float32)
    out = np.empty((NT, NLAT, NLON), dtype=np.float32)
    for t in range(NT):
        phase = t * np.pi / 16
        v = base + (5.0 * np.cos(la) * np.sin(3 * lo + phase)).astype(np.float32)
        v += rng.normal(0.0, 0.5, size=(NLAT, NLON)).astype(np.float32)
        out[t] = np.round(v * 32.0) / 32.0
    return lat, lon, out


def build():
    lat, lon, data = field()
    time = pd.date_range("2024-01-01", periods=NT, freq="6h")
    ds = xr.Dataset(
        {"t": (("time", "lat", "lon"), data,
               {"units": "K", "long_name": "temperature (synthetic)", "standard_name": "air_temperature"})},
        coords={
            "time": ("time", time, {"standard_name": "time", "axis": "T"}),
            "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude", "axis": "Y"}),
            "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude", "axis": "X"}),
        },
        attrs={"title": "zarr-serve OPeNDAP benchmark", "Conventions": "CF-1.8"},
    )
    enc = {
        "t": {"chunks": CHUNKS, "compressors": (ZstdCodec(level=3),), "_FillValue": np.float32("nan")},
        "time": {"units": "hours since 2024-01-01 00:00:00", "calendar": "standard", "dtype": "int32"},
        "lat": {"compressors": (ZstdCodec(level=3),)},
        "lon": {"compressors": (ZstdCodec(level=3),)},
    }
    return ds, enc


def main():
    data = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".cache/bench-dap")
    os.makedirs(data, exist_ok=True)
    path = os.path.join(data, "dap.zarr")
    marker = path + ".complete"
    if os.path.exists(marker) and os.path.isdir(path):
        print(f"{path}: complete, kept", file=sys.stderr)
    else:
        shutil.rmtree(path, ignore_errors=True)
        ds, enc = build()
        ds.to_zarr(path, zarr_format=3, consolidated=False, encoding=enc, mode="w")
        open(marker, "w").close()
        print(f"{path}: written ({NT}x{NLAT}x{NLON} float32, chunks {CHUNKS}, zstd)", file=sys.stderr)
    print(NT, NLAT, NLON)


if __name__ == "__main__":
    main()
