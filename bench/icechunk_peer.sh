#!/usr/bin/env bash
# A 128 MiB region from an Icechunk repository against the same array as plain
# Zarr v3 (both served by zarr-serve) and against icechunk-python + zarr-python
# in-process (issue 31). One command, about two minutes on 2 cores (the first run
# also writes the data, 256 MiB twice, into .cache/bench-icechunk):
#
#   bench/icechunk_peer.sh        (ICECHUNK_RUNS=3 runs of ICECHUNK_READS=5 reads each)
#
# Uses .venv-dap (Python 3.12 with icechunk, zarr and numpy; scripts/ci/setup.sh
# makes it) and BENCH_SERVER_BIN (default target/dist/zarr-serve, built here).
# See bench/icechunk_peer.py for what is measured.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${ZS_VENV_DAP:-.venv-dap}
[ -x "$VENV/bin/python" ] || { echo "no $VENV: run scripts/ci/setup.sh first"; exit 1; }
BIN=${BENCH_SERVER_BIN:-target/dist/zarr-serve}
if [ -z "${BENCH_SERVER_BIN:-}" ]; then cargo build --profile dist --bin zarr-serve; fi
for run in $(seq 1 "${ICECHUNK_RUNS:-3}"); do
  echo "== run $run"
  "$VENV/bin/python" bench/icechunk_peer.py --bin "$BIN" --data .cache/bench-icechunk --reads "${ICECHUNK_READS:-5}"
done
