#!/usr/bin/env bash
# Map tiles against xpublish-tiles (issue 28) and titiler-xarray (issue 45): one command,
# about 8 minutes on 2 cores.
#
#   bench/tiles_peer.sh [--duration 20] [--runs 3] [--conns 32] [--workers 1,2] ...
#
# 1. makes .venv-tiles-bench (Python 3.12: xpublish-tiles needs >= 3.12) from
#    bench/requirements-tiles.txt (xpublish-tiles and titiler-xarray)
# 2. writes bench-data/map.zarr with bench/make_map_data.py unless it is complete
# 3. bench/tiles_peer.py: the tile list, zarr-serve, xpublish-tiles and titiler-xarray (uvicorn)
#    on free loopback ports, a pixel comparison, warm-up, wrk runs, the table
#    (bench-data/tiles_peer.md, raw figures in bench-data/tiles_peer.json)
# Uses the already-built binary (BENCH_SERVER_BIN, default target/dist/zarr-serve);
# never runs cargo. Needs wrk on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DATA=${BENCH_DATA:-$ROOT/bench-data}
VENV=${TILES_VENV:-$ROOT/.venv-tiles-bench}
BIN=${BENCH_SERVER_BIN:-$ROOT/target/dist/zarr-serve}
step() { printf '\n==> %s\n' "$*" >&2; }
T0=$(date +%s)

command -v wrk >/dev/null || { echo "missing wrk (apt-get install wrk)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "no zarr-serve binary at $BIN (set BENCH_SERVER_BIN)" >&2; exit 1; }

step "Python environment ($VENV)"
if [ ! -x "$VENV/bin/python" ]; then
  PY312=$(scripts/find-python312.sh)
  [ -n "$PY312" ] || { echo "need Python 3.12 (set PYTHON312)" >&2; exit 1; }
  "$PY312" -m venv "$VENV"
fi
STAMP=$(sha256sum bench/requirements-tiles.txt | cut -c1-16)
if [ "$(cat "$VENV/.requirements-stamp" 2>/dev/null)" != "$STAMP" ]; then
  timeout 900 "$VENV/bin/pip" install -q --disable-pip-version-check -r bench/requirements-tiles.txt
  echo "$STAMP" >"$VENV/.requirements-stamp"
fi
PY=$VENV/bin/python
export PYTHONWARNINGS=ignore

step "map data ($DATA/map.zarr)"
mkdir -p "$DATA"
timeout 300 "$PY" bench/make_map_data.py "$DATA"

step "measurements"
timeout 1500 "$PY" bench/tiles_peer.py --data "$DATA" --bin "$BIN" "$@"
step "done in $(( $(date +%s) - T0 )) s; table in $DATA/tiles_peer.md, raw figures in $DATA/tiles_peer.json"
