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
"$VENV/bin/pip" install -q --disable-pip-version-check -r tests/fixtures/requirements.txt -r tests/python/requirements.txt
PY=$VENV/bin/python

step "fresh fixtures from zarr-python and tensorstore, verified by both, then the Rust suites on them"
FRESH=$(mktemp -d)
trap 'rm -rf "$FRESH"; [ -n "${SERVER_PID:-}" ] && kill "$SERVER_PID" 2>/dev/null || true' EXIT
"$PY" tests/fixtures/generate.py "$FRESH/interop" >/dev/null
"$PY" tests/fixtures/verify.py "$FRESH/interop"
ZARR_FIXTURES=$FRESH/interop cargo test --release --locked --test interop --test http

step "the service over HTTP: zarr-python through the passthrough, numpy.load, schemathesis"
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
./target/release/zarr-serve --listen "127.0.0.1:$PORT" \
  --dataset "fixtures=$FRESH/interop/data.zarr" --dataset "sample=$ROOT/sample/sample.zarr" \
  >"$FRESH/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
export ZARR_SERVE_URL=http://127.0.0.1:$PORT ZARR_FIXTURES=$FRESH/interop
"$PY" -m pytest -q tests/python
PATH=$VENV/bin:$PATH bash tests/python/run_schemathesis.sh "$ZARR_SERVE_URL"
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=
step "all tests passed"
