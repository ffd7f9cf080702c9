#!/usr/bin/env bash
# zfp decoding: zarr-serve's decoder against libzfp 1.0.1 (through zfpy) on
# the same four streams of a 16 MiB (float32) / 32 MiB (float64) field.
#   bash bench/zfp_peer.sh            (about 4 minutes, most of it building the bench)
# 1. makes .venv-zfp-bench (Python 3.12) from bench/requirements-zfp.txt;
# 2. bench/zfp_peer.py writes the streams to .cache/bench-zfp and times libzfp;
# 3. the Criterion group zfp_decode (bench/hot_paths.rs) decodes them through
#    the numcodecs.zfpy codec, checking each against libzfp's output first;
# 4. prints a table: median ms, MB/s of decoded values, the ratio.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
VENV=${ZFP_VENV:-$ROOT/.venv-zfp-bench}
DIR=$ROOT/.cache/bench-zfp
PY312=${PY312:-$(ls -d ~/.pyenv/versions/3.12*/bin/python 2>/dev/null | head -1)}
if [ ! -x "$VENV/bin/python" ]; then
  "${PY312:-python3}" -m venv "$VENV"
  "$VENV/bin/pip" install -q -r bench/requirements-zfp.txt
fi
"$VENV/bin/python" bench/zfp_peer.py "$DIR" --runs "${ZFP_RUNS:-7}"
ZFP_BENCH_DIR=$DIR cargo bench --bench hot_paths -- zfp_decode --output-format bencher 2>/dev/null |
  tee "$DIR/criterion.txt" | grep '^test' || true
"$VENV/bin/python" - "$DIR" <<'PY'
import json, re, sys
from pathlib import Path
d = Path(sys.argv[1])
lib = json.loads((d / "libzfp.json").read_text())
ours = {}
for line in (d / "criterion.txt").read_text().splitlines():
    m = re.match(r"test zfp_decode/(\S+)\s+\.\.\. bench:\s+([\d,]+) ns/iter", line)
    if m:
        ours[m.group(1)] = int(m.group(2).replace(",", "")) / 1e9
print(f"\n| stream | decoded MiB | libzfp ms | zarr-serve ms | zarr-serve MB/s | libzfp / zarr-serve |")
print("|---|---|---|---|---|---|")
for case in json.loads((d / "manifest.json").read_text()):
    n = case["name"]
    size = (d / f"{n}.bin").stat().st_size
    if n not in ours:
        print(f"| {n} | {size / 2**20:.0f} | {lib[n] * 1e3:.1f} | (missing) | | |")
        continue
    print(f"| {n} | {size / 2**20:.0f} | {lib[n] * 1e3:.1f} | {ours[n] * 1e3:.1f} | "
          f"{size / ours[n] / 1e6:.0f} | {lib[n] / ours[n]:.2f}x |")
PY
