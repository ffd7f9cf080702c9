#!/usr/bin/env python3
"""Write src/engine/compute/render/colormaps.txt: the 256-entry RGB tables of the
colormaps `format=png` offers, taken from matplotlib (the version pinned in
tests/python/requirements.txt). Run once; the output is committed.

    .venv-test/bin/python scripts/colormaps.py

One line a colormap: its name, then 256 colours as `rrggbb`, index 0 first.
The tables are matplotlib's own 8-bit form, `cmap(range(256), bytes=True)`.
"""
import pathlib
import sys

import matplotlib
import numpy as np

NAMES = ["gray", "viridis", "plasma", "inferno", "magma", "cividis", "turbo", "coolwarm", "RdBu_r"]


def main() -> None:
    out = pathlib.Path(__file__).resolve().parent.parent / "src/engine/compute/render/colormaps.txt"
    lines = [f"# 256-entry RGB tables from matplotlib {matplotlib.__version__}, written by scripts/colormaps.py"]
    for name in NAMES:
        cmap = matplotlib.colormaps[name].resampled(256)
        rgba = cmap(np.arange(256), bytes=True)
        lines.append(name + " " + " ".join(f"{r:02x}{g:02x}{b:02x}" for r, g, b, _ in rgba))
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out} ({len(NAMES)} colormaps)", file=sys.stderr)


if __name__ == "__main__":
    main()
