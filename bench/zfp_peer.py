"""zfp decoding: libzfp (through zfpy) against zarr-serve's decoder.

    python bench/zfp_peer.py DIR [--runs 7]

Writes to DIR four zfp streams of a (64, 256, 256) field (a smooth field
plus noise; float32 in fixed accuracy 1e-2, fixed rate 8 and reversible
mode, float64 in fixed precision 24), each with zfp's header as zfpy writes
it (`<name>.zfp`), what libzfp decodes (`<name>.bin`), what libzfp encodes
that into (`<name>.re.zfp`) and `manifest.json`; then times
`zfpy.decompress_numpy` and `zfpy.compress_numpy` on each (one thread, the
median of `--runs`) and writes `libzfp.json`. `bench/zfp_peer.sh` runs this, then the
Criterion group `zfp_decode` of `hot_paths.rs` on the same streams, and
prints both.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
import zfpy

SHAPE = (64, 256, 256)
# name, dtype, zfpy's arguments, numcodecs' configuration of the same mode
CASES = [
    ("float32_accuracy", "float32", {"tolerance": 1e-2}, {"mode": 4, "tolerance": 1e-2}),
    ("float32_rate8", "float32", {"rate": 8}, {"mode": 2, "rate": 8}),
    ("float32_reversible", "float32", {}, {"mode": 5}),
    ("float64_precision24", "float64", {"precision": 24}, {"mode": 3, "precision": 24}),
]


def field(dtype):
    z, y, x = np.meshgrid(*[np.linspace(0, 1, n) for n in SHAPE], indexing="ij")
    smooth = 280 + 15 * np.sin(6 * x + 2 * z) * np.cos(5 * y)
    noise = np.random.default_rng(45).standard_normal(SHAPE) * 0.3
    return (smooth + noise).astype(dtype)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest, timings = [], {}
    def median(work):
        seconds = []
        for _ in range(args.runs):
            start = time.perf_counter()
            work()
            seconds.append(time.perf_counter() - start)
        return sorted(seconds)[len(seconds) // 2]

    for name, dtype, kwargs, config in CASES:
        array = field(dtype)
        stream = zfpy.compress_numpy(array, **kwargs)
        back = zfpy.decompress_numpy(stream)
        (out / f"{name}.zfp").write_bytes(stream)
        (out / f"{name}.bin").write_bytes(back.tobytes())
        (out / f"{name}.re.zfp").write_bytes(zfpy.compress_numpy(back, **kwargs))
        manifest.append({"name": name, "dtype": dtype, "shape": list(SHAPE), "stream_bytes": len(stream),
                         "numcodecs": config})
        timings[name] = median(lambda: zfpy.decompress_numpy(stream))
        timings[f"{name}.encode"] = median(lambda: zfpy.compress_numpy(back, **kwargs))
        print(f"{name}: {len(stream) / 2**20:.1f} MiB stream, {back.nbytes / 2**20:.0f} MiB decoded, "
              f"libzfp decodes in {timings[name] * 1000:.1f} ms, encodes in {timings[name + '.encode'] * 1000:.1f} ms")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    (out / "libzfp.json").write_text(json.dumps(timings, indent=1) + "\n")


if __name__ == "__main__":
    main()
