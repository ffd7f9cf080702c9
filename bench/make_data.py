#!/usr/bin/env python3
"""Write the benchmark datasets of the performance issue with zarr-python.

Usage: python bench/make_data.py OUTDIR        -> OUTDIR/bench.zarr  (group)
         OUTDIR/bench.zarr/volume  uint16 (512, 1024, 1024), shards (128, 512, 512),
                                   inner chunks (32, 64, 64), zstd level 1,
                                   a smooth field plus noise (1 GiB decoded)
         OUTDIR/bench.zarr/tiles   uint8 (8192, 8192), shards (2048, 2048),
                                   inner chunks (256, 256), uncompressed (64 MiB)
         OUTDIR/twins.zarr         the volume's first shard (128, 512, 512) twice, in
                                   chunks (32, 64, 64) with zstd level 1, unsharded:
                                   v3_zstd (Zarr v3) and v2_zstd (Zarr v2, numcodecs
                                   Zstd), to compare reading v2 with reading v3

Deterministic: every shard's noise comes from numpy's PCG64 seeded with
(SEED, array number, shard number), so the bytes do not depend on write order.
Written shard by shard (each assignment covers exactly one shard, so zarr-python
never reads back). Skips the work when OUTDIR/bench.zarr already holds both arrays
with the expected metadata and the completion marker (group attribute).
Pinned versions: bench/requirements.txt.
"""
import json
import os
import shutil
import sys
import time
import warnings

warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import zarr  # noqa: E402
from zarr.codecs import ZstdCodec  # noqa: E402

SEED = 20240611
FORMAT_VERSION = 2  # bump when the generated content changes

SPECS = {
    "volume": dict(shape=(512, 1024, 1024), dtype="uint16", shards=(128, 512, 512),
                   chunks=(32, 64, 64), compressor="zstd1", dims=["z", "y", "x"]),
    "tiles": dict(shape=(8192, 8192), dtype="uint8", shards=(2048, 2048),
                  chunks=(256, 256), compressor=None, dims=["y", "x"]),
}


def volume_shard(z0, y0, x0, shape, rng):
    """Smooth field (three separable/2-D terms) plus 3 bits of uniform noise (zstd-1 ratio ~1.6), uint16."""
    nz, ny, nx = shape
    tau = np.float32(2 * np.pi)
    z = np.arange(z0, z0 + nz, dtype=np.float32)[:, None, None]
    y = np.arange(y0, y0 + ny, dtype=np.float32)[None, :, None]
    x = np.arange(x0, x0 + nx, dtype=np.float32)[None, None, :]
    v = np.float32(2000) * np.sin(tau * z / 1024 + 0.3) * np.cos(tau * y / 1400)      # (z, y, 1)
    v = v + np.float32(1500) * np.sin(tau * x / 800 + tau * y / 1800)                 # + (1, y, x)
    v += np.float32(500) * np.cos(tau * (x + z) / 460)                                 # + (z, 1, x)
    v += np.float32(30000)
    out = v.astype(np.uint16)
    del v
    out += rng.integers(0, 8, size=shape, dtype=np.uint16)
    return out


def tiles_shard(y0, x0, shape, rng):
    """Image-like uint8: smooth pattern plus 4 bits of noise."""
    ny, nx = shape
    tau = np.float32(2 * np.pi)
    y = np.arange(y0, y0 + ny, dtype=np.float32)[:, None]
    x = np.arange(x0, x0 + nx, dtype=np.float32)[None, :]
    v = (np.float32(110) + np.float32(60) * np.sin(tau * x / 1900) * np.cos(tau * y / 2500)
         + np.float32(30) * np.sin(tau * (x + y) / 97))
    out = np.clip(v, 0, 239).astype(np.uint8)
    out += rng.integers(0, 16, size=shape, dtype=np.uint8)
    return out


def expected_ok(path):
    """True when path holds a complete bench.zarr of the current format."""
    try:
        with open(os.path.join(path, "zarr.json")) as f:
            g = json.load(f)
        if g.get("attributes", {}).get("bench_complete") != FORMAT_VERSION:
            return False
        for name, spec in SPECS.items():
            with open(os.path.join(path, name, "zarr.json")) as f:
                m = json.load(f)
            if m.get("node_type") != "array" or tuple(m["shape"]) != spec["shape"] \
                    or m["data_type"] != spec["dtype"] \
                    or tuple(m["chunk_grid"]["configuration"]["chunk_shape"]) != spec["shards"]:
                return False
            sh = m["codecs"][0]
            if sh["name"] != "sharding_indexed" \
                    or tuple(sh["configuration"]["chunk_shape"]) != spec["chunks"]:
                return False
            inner = [c["name"] for c in sh["configuration"]["codecs"]]
            want = ["bytes", "zstd"] if spec["compressor"] else ["bytes"]
            if inner != want:
                return False
        return True
    except (OSError, KeyError, ValueError, IndexError):
        return False


TWINS_VERSION = 1


def write_twins(out):
    """The same 64 MiB of volume data as Zarr v3 and as Zarr v2, both zstd level 1."""
    import numcodecs

    try:
        with open(os.path.join(out, "zarr.json")) as f:
            if json.load(f).get("attributes", {}).get("twins_complete") == TWINS_VERSION:
                print(f"{out}: already complete, skipping")
                return
    except (OSError, ValueError):
        pass
    if os.path.exists(out):
        shutil.rmtree(out)
    shape, chunks = (128, 512, 512), (32, 64, 64)
    data = volume_shard(0, 0, 0, shape, np.random.default_rng([SEED, 0, 0]))
    root = zarr.open_group(out, mode="w", attributes={"title": "v2/v3 twins", "seed": SEED})
    v3 = root.create_array("v3_zstd", shape=shape, dtype="uint16", chunks=chunks, fill_value=0,
                           compressors=[ZstdCodec(level=1)], dimension_names=["z", "y", "x"])
    v3[...] = data
    v2 = zarr.create_array(os.path.join(out, "v2_zstd"), shape=shape, dtype="uint16", chunks=chunks,
                           fill_value=0, zarr_format=2, compressors=numcodecs.Zstd(level=1))
    v2[...] = data
    root.attrs["twins_complete"] = TWINS_VERSION
    print(f"{out}: {du(out) / 2**20:.1f} MiB on disk")


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        for fn in files:
            total += os.path.getsize(os.path.join(root, fn))
    return total


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    out = os.path.join(os.path.abspath(sys.argv[1]), "bench.zarr")
    write_twins(os.path.join(os.path.abspath(sys.argv[1]), "twins.zarr"))
    if expected_ok(out):
        print(f"{out}: already complete ({du(out) / 2**20:.1f} MiB on disk), skipping")
        return
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    zarr.config.set({"async.concurrency": 16, "threading.max_workers": os.cpu_count() or 2})
    t_all = time.perf_counter()
    root = zarr.open_group(out, mode="w", attributes={
        "title": "zarr-serve benchmark data",
        "generator": "bench/make_data.py", "zarr_python": zarr.__version__, "seed": SEED})

    for ai, (name, spec) in enumerate(SPECS.items()):
        t0 = time.perf_counter()
        arr = root.create_array(
            name, shape=spec["shape"], dtype=spec["dtype"], shards=spec["shards"],
            chunks=spec["chunks"], fill_value=0, dimension_names=spec["dims"],
            compressors=[ZstdCodec(level=1)] if spec["compressor"] else None)
        grid = [s // c for s, c in zip(spec["shape"], spec["shards"])]
        for si, idx in enumerate(np.ndindex(*grid)):
            start = [i * c for i, c in zip(idx, spec["shards"])]
            rng = np.random.default_rng([SEED, ai, si])
            if name == "volume":
                data = volume_shard(*start, spec["shards"], rng)
            else:
                data = tiles_shard(*start, spec["shards"], rng)
            arr[tuple(slice(s, s + c) for s, c in zip(start, spec["shards"]))] = data
        dt = time.perf_counter() - t0
        size = du(os.path.join(out, name))
        raw = int(np.prod(spec["shape"])) * np.dtype(spec["dtype"]).itemsize
        print(f"{name}: {raw / 2**20:.0f} MiB decoded, {size / 2**20:.1f} MiB on disk "
              f"(ratio {raw / size:.2f}), written in {dt:.1f} s")

    root.attrs["bench_complete"] = FORMAT_VERSION  # marker written last
    print(f"{out}: {du(out) / 2**20:.1f} MiB on disk, {time.perf_counter() - t_all:.1f} s total")


if __name__ == "__main__":
    main()
