# Shared by the CI stages (sourced, not run): paths, the Python venv, ports,
# the fixtures generated once per run, and a server over them.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
export PATH=$PATH:/usr/sbin
VENV=${ZS_VENV:-$ROOT/.venv-test}
PY=$VENV/bin/python
# Fresh fixtures, logs and emulator data of this run; every stage uses the same.
WORK=${ZS_WORK:-$ROOT/.cache/ci}
mkdir -p "$WORK"

step() { printf '\n==> %s\n' "$*"; }
need_venv() { [ -x "$PY" ] || { echo "no Python venv at $VENV: run scripts/ci/setup.sh"; exit 1; }; }
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_for URL [SECONDS]: until URL answers (30 s by default; a cold
# Node or Java emulator can take more than 10 s to start on a busy runner).
wait_for() {
  local tries=$((${2:-30} * 10))
  for _ in $(seq "$tries"); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done
  echo "no answer from $1 after ${2:-30} s"
  return 1
}

PIDS=()
stop_all() {
  local rc=$?
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [ "$rc" != 0 ]; then
    for log in "$WORK"/*.log; do [ -f "$log" ] && { echo "--- last lines of $log"; tail -40 "$log"; }; done
  fi
}
trap stop_all EXIT

# Fixtures written by zarr-python and tensorstore in this run, verified by both.
ensure_fixtures() {
  need_venv
  if [ ! -f "$WORK/interop/manifest.json" ]; then
    rm -rf "$WORK/interop"
    # generate.py has zarr-python 2.18 write its arrays in its own venv.
    export ZARR2_PYTHON=${ZS_VENV_ZARR2:-$ROOT/.venv-zarr2}/bin/python
    "$PY" tests/fixtures/generate.py "$WORK/interop" >/dev/null
    "$PY" tests/fixtures/verify.py "$WORK/interop"
  fi
  export ZARR_FIXTURES=$WORK/interop
}

# Tests build with Cargo.toml's `ci` profile: the release profile's code
# without its link-time optimisation, which would give each test binary a
# whole-program link like the server's. The server the stages start is
# built so too.
CARGO_PROFILE=(--profile ci --locked)
SERVER_BIN=target/ci/zarr-serve
ensure_server_binary() { cargo build "${CARGO_PROFILE[@]}" --bin zarr-serve; }

# zarr-serve over the fixtures at URL and the samples, on a free port; the
# v2 sample also from a plain static HTTP server (no listing: its children
# come from .zmetadata) as dataset stations_http.
start_server() {
  PORT=$(free_port)
  STATIC_PORT=$(free_port)
  python3 -m http.server --bind 127.0.0.1 --directory "$ROOT/sample" "$STATIC_PORT" >>"$WORK/static.log" 2>&1 &
  STATIC_PID=$!
  PIDS+=("$STATIC_PID")
  wait_for "http://127.0.0.1:$STATIC_PORT/stations.zarr/.zmetadata"
  "./$SERVER_BIN" --listen "127.0.0.1:$PORT" \
    --dataset "fixtures=$1" --dataset "sample=$ROOT/sample/sample.zarr" \
    --dataset "stations=$ROOT/sample/stations.zarr" \
    --dataset "codecs=$ROOT/tests/fixtures/codecs/data.zarr" \
    --dataset "climate=$ROOT/sample/climate.zarr" \
    --dataset "projected=$ROOT/sample/projected.zarr" \
    --dataset "stations_http=http://127.0.0.1:$STATIC_PORT/stations.zarr" >>"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  wait_for "http://127.0.0.1:$PORT/healthz"
  export TEST_SERVER_URL=http://127.0.0.1:$PORT
}
stop_server() {
  kill "$SERVER_PID" "$STATIC_PID"
  wait "$SERVER_PID" "$STATIC_PID" 2>/dev/null || true
}

# The suites every store backend runs: the store contract, region reads and
# HTTP against the fixtures in that store, and the Python clients through it.
store_suites() {  # store_suites URL [extra cargo test args]
  export ZARR_FIXTURES_STORE=$1
  shift
  cargo test "${CARGO_PROFILE[@]}" --test storage --test interop --test http --test dap2 --test dap4 --test formats --test edr "$@"
  start_server "$ZARR_FIXTURES_STORE"
  # The v2 view and listings read through the engine like any route: checked
  # once, locally, in the interop stage.
  "$PY" -m pytest -q tests/python/test_interop_http.py
  stop_server
  unset ZARR_FIXTURES_STORE
}
