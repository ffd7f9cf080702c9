#!/usr/bin/env python3
"""Extract every 256x256 inner chunk of bench.zarr/tiles as a raw 64 KiB file for nginx.

Usage: python bench/make_static.py DATADIR   -> DATADIR/static/tiles/R_C.bin (R, C in 0..31)

The 32 x 32 grid has exactly 1024 tiles, so "1024 tiles" is all of them; the files hold
the same bytes zarr-serve returns for ?select=R*256:(R+1)*256,C*256:(C+1)*256
(format=binary). Skips when all 1024 files exist with the right size.
"""
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore")
import zarr  # noqa: E402


def main():
    data = os.path.abspath(sys.argv[1])
    out = os.path.join(data, "static", "tiles")
    names = [f"{r}_{c}.bin" for r in range(32) for c in range(32)]
    if all(os.path.isfile(os.path.join(out, n)) and os.path.getsize(os.path.join(out, n)) == 65536
           for n in names):
        print(f"{out}: 1024 tiles present, skipping")
        return
    t0 = time.perf_counter()
    os.makedirs(out, exist_ok=True)
    tiles = zarr.open_array(os.path.join(data, "bench.zarr", "tiles"), mode="r")[...]
    for r in range(32):
        for c in range(32):
            tmp = os.path.join(out, f".{r}_{c}.tmp")
            with open(tmp, "wb") as f:
                f.write(tiles[r * 256:(r + 1) * 256, c * 256:(c + 1) * 256].tobytes())
            os.replace(tmp, os.path.join(out, f"{r}_{c}.bin"))
    print(f"{out}: wrote 1024 tiles in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
