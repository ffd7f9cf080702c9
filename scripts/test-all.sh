#!/usr/bin/env bash
# Every test of zarr-serve, from a fresh clone: this is the README's test
# command and what CI runs (.ci/run). Needs cargo and python3 (3.11+) with
# venv; installs the Python packages it uses (pinned) into .venv-test.
#
#   scripts/test-all.sh            # everything
#   SKIP_PYTHON=1 scripts/test-all.sh   # Rust tests only
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
step() { printf '\n==> %s\n' "$*"; }

step "format and lints"
cargo fmt --all -- --check
cargo clippy --release --all-targets --locked -- -D warnings

step "Rust tests (unit, interop on committed fixtures, HTTP integration)"
cargo test --release --locked

if [ "${SKIP_PYTHON:-}" = 1 ]; then exit 0; fi

step "Python environment (pinned: tests/fixtures/requirements.txt, tests/python/requirements.txt)"
VENV=${ZS_VENV:-$ROOT/.venv-test}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check \
  -r tests/fixtures/requirements.txt -r tests/python/requirements.txt -r tests/s3/requirements.txt
PY=$VENV/bin/python

step "fresh fixtures from zarr-python and tensorstore, verified by both, then the Rust suites on them"
FRESH=$(mktemp -d)
cleanup() {
  local rc=$?
  for pid in ${SERVER_PID:-} ${S3_PID:-}; do kill "$pid" 2>/dev/null || true; done
  if [ "$rc" != 0 ]; then
    for log in "$FRESH"/*.log; do [ -f "$log" ] && { echo "--- last lines of $log"; tail -40 "$log"; }; done
  fi
  rm -rf "$FRESH"
}
trap cleanup EXIT
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_for() { for _ in $(seq 100); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done; echo "no answer from $1"; return 1; }
start_server() {  # start_server FIXTURES_URL: zarr-serve with the fixtures and the sample, on a free port
  PORT=$(free_port)
  ./target/release/zarr-serve --listen "127.0.0.1:$PORT" \
    --dataset "fixtures=$1" --dataset "sample=$ROOT/sample/sample.zarr" >>"$FRESH/server.log" 2>&1 &
  SERVER_PID=$!
  wait_for "http://127.0.0.1:$PORT/healthz"
  export TEST_SERVER_URL=http://127.0.0.1:$PORT
}
stop_server() { kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=; }
"$PY" tests/fixtures/generate.py "$FRESH/interop" >/dev/null
"$PY" tests/fixtures/verify.py "$FRESH/interop"
ZARR_FIXTURES=$FRESH/interop cargo test --release --locked --test interop --test http

step "the service over HTTP: zarr-python through the passthrough, numpy.load, schemathesis"
export ZARR_FIXTURES=$FRESH/interop
start_server "$FRESH/interop/data.zarr"
"$PY" -m pytest -q tests/python
PATH=$VENV/bin:$PATH bash tests/python/run_schemathesis.sh "$TEST_SERVER_URL"
stop_server

step "the same over S3: a real S3-protocol server (moto) on loopback"
S3_PORT=$(free_port)
"$VENV/bin/moto_server" -H 127.0.0.1 -p "$S3_PORT" >"$FRESH/s3.log" 2>&1 &
S3_PID=$!
wait_for "http://127.0.0.1:$S3_PORT/"
export AWS_ACCESS_KEY_ID=zarr-serve-test AWS_SECRET_ACCESS_KEY=zarr-serve-test AWS_REGION=us-east-1
export AWS_ENDPOINT=http://127.0.0.1:$S3_PORT AWS_ALLOW_HTTP=true
"$PY" tests/s3/upload.py "$AWS_ENDPOINT" zarr-fixtures interop/data.zarr "$FRESH/interop/data.zarr"
export ZARR_FIXTURES_STORE=s3://zarr-fixtures/interop/data.zarr
cargo test --release --locked --test interop --test http --test s3_faults
start_server "$ZARR_FIXTURES_STORE"
"$PY" -m pytest -q tests/python
stop_server
step "all tests passed"
