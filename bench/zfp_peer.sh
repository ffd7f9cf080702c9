#!/usr/bin/env bash
# zfp decoding: zarr-serve's decoder against libzfp 1.0.1 (through zfpy) on
# the same four streams of a 16 MiB (float32) / 32 MiB (float64) field.
#   bash bench/zfp_peer.sh            (about 4 minutes, most of it building the bench)
# 1. makes .venv-zfp-bench (Python 3.12) from bench/requirements-zfp.txt;
# 2. bench/zfp_peer.py writes the streams to .cache/bench-zfp and times libzfp;
# 3. the Criterion groups zfp_decode and zfp_encode (bench/hot_paths.rs)
#    decode them and encode the decoded values again through the
#    numcodecs.zfpy codec, each checked byte for byte against libzfp first;
# 4. prints a table: median ms, MB/s of decoded values, the ratios.
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
ZFP_BENCH_DIR=$DIR cargo bench --bench hot_paths -- zfp_ --output-format bencher 2>/dev/null |
  tee "$DIR/criterion.txt" | grep '^test' || true
"$VENV/bin/python" - "$DIR" <<'PY'
import json, re, sys
from pathlib import Path
d = Path(sys.argv[1])
lib = json.loads((d / "libzfp.json").read_text())
ours = {}
for line in (d / "criterion.txt").read_text().splitlines():
    m = re.match(r"test zfp_(decode|encode)/(\S+)\s+\.\.\. bench:\s+([\d,]+) ns/iter", line)
    if m:
        key = m.group(2) + (".encode" if m.group(1) == "encode" else "")
        ours[key] = int(m.group(3).replace(",", "")) / 1e9
print("\n| stream | decoded MiB | | libzfp ms | zarr-serve ms | zarr-serve MB/s | libzfp / zarr-serve |")
print("|---|---|---|---|---|---|---|")
for case in json.loads((d / "manifest.json").read_text()):
    size = (d / f"{case['name']}.bin").stat().st_size
    for what, key in [("decode", case["name"]), ("encode", case["name"] + ".encode")]:
        if key not in ours:
            print(f"| {case['name']} | {size / 2**20:.0f} | {what} | {lib[key] * 1e3:.1f} | (missing) | | |")
            continue
        print(f"| {case['name']} | {size / 2**20:.0f} | {what} | {lib[key] * 1e3:.1f} | {ours[key] * 1e3:.1f} | "
              f"{size / ours[key] / 1e6:.0f} | {lib[key] / ours[key]:.2f}x |")
PY
