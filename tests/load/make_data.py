#!/usr/bin/env python3
"""Write the load-test dataset with zarr-python (a few seconds).

    python tests/load/make_data.py OUTDIR    -> OUTDIR/load.zarr
      volume  uint16 (256, 512, 512), shards (64, 256, 256), inner (16, 64, 64), zstd 1 (128 MiB decoded)
      tiles   uint8 (2048, 2048), shards (1024, 1024), inner (256, 256), uncompressed
"""
import os
import sys
import warnings

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import zarr  # noqa: E402
from zarr.codecs import ZstdCodec  # noqa: E402


def main() -> None:
    out = os.path.join(sys.argv[1], "load.zarr")
    root = zarr.open_group(out, mode="w")
    rng = np.random.default_rng(7)
    z, y, x = np.ogrid[0:256, 0:512, 0:512]
    volume = (30000 + 2000 * np.sin(z / 40.0) * np.cos(y / 60.0) + 1500 * np.sin(x / 50.0)).astype(np.uint16)
    volume += rng.integers(0, 8, size=volume.shape, dtype=np.uint16)
    a = root.create_array("volume", shape=volume.shape, dtype="uint16", shards=(64, 256, 256),
                          chunks=(16, 64, 64), compressors=ZstdCodec(level=1))
    a[...] = volume
    tiles = rng.integers(0, 256, size=(2048, 2048), dtype=np.uint8)
    t = root.create_array("tiles", shape=tiles.shape, dtype="uint8", shards=(1024, 1024),
                          chunks=(256, 256), compressors=None)
    t[...] = tiles
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
