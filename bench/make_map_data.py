#!/usr/bin/env python3
"""Write the map-tile benchmark dataset: a global 0.25 degree lat/lon float32 grid.

    make_map_data.py DATA_DIR            -> DATA_DIR/map.zarr (skipped when complete)

Zarr v3, written with xarray + zarr-python 3 (bench/requirements-tiles.txt):

- t2m(time, lat, lon) float32, 4 x 721 x 1440, chunks (1, 256, 256), zstd level 3
  (the v3 `zstd` codec, which both zarr-serve and zarr-python read)
- lat 90 .. -90 descending (cell centres, 0.25 degree), lon 0 .. 359.75 (runs
  0..360, so a Web Mercator map wraps it across the antimeridian)
- CF attributes: units degrees_north/degrees_east, standard_name, axis; time in
  "hours since 2024-01-01 00:00:00"; t2m units K, no valid_min/valid_max (the
  benchmark passes the colour range explicitly to both servers)
- about 8 % of the cells are NaN (a smooth "land" mask), so tiles have
  transparent areas that both servers must agree on
- values: a smooth large-scale field (about 240..310 K), 40 random mid-scale
  modes (wavenumbers 8..60) and N(0, 0.2 K) cell noise

Deterministic: the same bytes every time (fixed seed). A marker file `map.zarr.complete`
next to the store is written last; an incomplete store is removed and rewritten.
"""
import os
import shutil
import sys

import numpy as np
import pandas as pd
import xarray as xr
from zarr.codecs import ZstdCodec

NT, NLAT, NLON = 4, 721, 1440
CHUNKS = (1, 256, 256)


def field():
    rng = np.random.default_rng(28)
    lat = np.linspace(90.0, -90.0, NLAT)
    lon = np.arange(NLON) * 0.25
    la = np.deg2rad(lat)[:, None]
    lo = np.deg2rad(lon)[None, :]
    out = np.empty((NT, NLAT, NLON), dtype=np.float32)
    # a smooth mask, the same for every step: true where "land"
    mask = (np.sin(2 * lo + 0.5) * np.cos(3 * la) + 0.6 * np.sin(5 * lo) * np.sin(2 * la)) > 0.85
    # mid-scale structure: 40 random modes, wavenumbers 8..60, amplitude falling with
    # wavenumber (neighbouring cells differ by tenths of a kelvin, as in reanalysis
    # fields), plus a little cell-level noise
    modes = [(rng.integers(8, 61), rng.integers(8, 61), rng.uniform(0, 2 * np.pi),
              rng.uniform(0, 2 * np.pi)) for _ in range(40)]
    for t in range(NT):
        phase = t * np.pi / 8
        v = (300.0 - 55.0 * np.sin(la) ** 2
             + 6.0 * np.sin(3 * lo + phase) * np.cos(la)
             + 3.0 * np.cos(7 * lo - 2 * phase) * np.cos(2 * la))
        for kx, ky, px, py in modes:
            v = v + (12.0 / (kx + ky)) * np.sin(kx * lo + px + phase) * np.cos(ky * la + py)
        v = v + rng.normal(0.0, 0.2, size=(NLAT, NLON))
        v = v.astype(np.float32)
        v[mask] = np.nan
        out[t] = v
    return lat, lon, out


def build():
    lat, lon, data = field()
    time = pd.date_range("2024-01-01", periods=NT, freq="6h")
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), data,
                 {"units": "K", "long_name": "2 metre temperature (synthetic)",
                  "standard_name": "air_temperature"})},
        coords={
            "time": ("time", time, {"standard_name": "time", "axis": "T"}),
            "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude", "axis": "Y"}),
            "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude", "axis": "X"}),
        },
        attrs={"title": "zarr-serve map tile benchmark (issue 28)", "Conventions": "CF-1.8"},
    )
    enc = {
        "t2m": {"chunks": CHUNKS, "compressors": (ZstdCodec(level=3),), "_FillValue": np.float32("nan")},
        "time": {"units": "hours since 2024-01-01 00:00:00", "calendar": "standard", "dtype": "int32"},
        "lat": {"compressors": (ZstdCodec(level=3),)},
        "lon": {"compressors": (ZstdCodec(level=3),)},
    }
    return ds, enc


def main():
    data = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "bench-data")
    os.makedirs(data, exist_ok=True)
    path = os.path.join(data, "map.zarr")
    marker = path + ".complete"
    if os.path.exists(marker) and os.path.isdir(path):
        print(f"{path}: complete, kept", file=sys.stderr)
        return
    shutil.rmtree(path, ignore_errors=True)
    ds, enc = build()
    ds.to_zarr(path, zarr_format=3, consolidated=False, encoding=enc, mode="w")
    open(marker, "w").close()
    print(f"{path}: written ({NT}x{NLAT}x{NLON} float32, chunks {CHUNKS}, zstd)", file=sys.stderr)


if __name__ == "__main__":
    main()
