#!/usr/bin/env bash
# zarr-serve soak: 20 minutes (SOAK_SECONDS) at 64 connections of the mixed
# load of tests/load/mix.lua (node documents, tiles, 8 MiB regions, JSON
# regions) against one fresh server, on the load-test dataset.
#
#   bench/soak.sh            # after bench/run.sh (uses its venv) or with BENCH_VENV set
#
# Warms up until the caches stop growing (as /metrics reports them), then
# passes with zero errors, flat RSS (the last third's median within 10% and
# 32 MiB of the first third's) and RSS 10 s after the load within 64 MiB of
# start-up RSS plus the cache budgets. Prints the figures; saves bench-data/soak.json.
# Uses the already-built binary (BENCH_SERVER_BIN); never runs cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DATA=${BENCH_DATA:-$ROOT/bench-data}
VENV=${BENCH_VENV:-$ROOT/bench/.venv}
BIN=${BENCH_SERVER_BIN:-$ROOT/target/dist/zarr-serve}
mkdir -p "$DATA/load"
[ -f "$DATA/load/load.zarr/zarr.json" ] || "$VENV/bin/python" tests/load/make_data.py "$DATA/load" >/dev/null
"$VENV/bin/python" tests/load/run.py --bin "$BIN" --data "$DATA/load" --phases load \
  --duration "${SOAK_SECONDS:-1200}" --json "$DATA/soak.json"
