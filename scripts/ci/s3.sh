#!/usr/bin/env bash
# Stage s3: the store suites over a real S3-protocol server (moto) on
# loopback, S3 fault injection, then moto stopped and restarted under a
# running service.
source "$(dirname "$0")/lib.sh"
ensure_fixtures
ensure_server_binary
step "s3: moto on loopback"
S3_PORT=$(free_port)
"$VENV/bin/moto_server" -H 127.0.0.1 -p "$S3_PORT" >"$WORK/s3.log" 2>&1 &
S3_PID=$!
PIDS+=("$S3_PID")
wait_for "http://127.0.0.1:$S3_PORT/"
export AWS_ACCESS_KEY_ID=zarr-serve-test AWS_SECRET_ACCESS_KEY=zarr-serve-test AWS_REGION=us-east-1
export AWS_ENDPOINT=http://127.0.0.1:$S3_PORT AWS_ALLOW_HTTP=true
"$PY" tests/s3/upload.py "$AWS_ENDPOINT" zarr-fixtures interop/data.zarr "$ZARR_FIXTURES/data.zarr"
store_suites s3://zarr-fixtures/interop/data.zarr --test s3_faults
step "s3: writes through two server processes on moto (its conditional puts are not atomic: the sequential part)"
ZS_WRITES_URL=s3://zarr-fixtures/writes-http ZS_SERVER_BIN=$SERVER_BIN "$PY" -m pytest -q -p no:cacheprovider tests/writes/test_object_stores.py
step "s3: Icechunk repositories (native and virtual chunks) and kerchunk references on S3"
ZS_IC_S3_ENDPOINT=$AWS_ENDPOINT ZS_SERVER_BIN=$SERVER_BIN "${ZS_VENV_DAP:-$ROOT/.venv-dap}/bin/python" -m pytest -q -p no:cacheprovider tests/icechunk
kill "$S3_PID"
step "s3: the S3 server stopped and restarted under a running service"
"$PY" tests/s3/outage.py --bin "$SERVER_BIN" --fixtures "$ZARR_FIXTURES/data.zarr"
