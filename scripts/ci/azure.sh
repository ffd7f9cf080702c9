#!/usr/bin/env bash
# Stage azure: the store suites over Azure Blob (Azurite from npm) on loopback.
source "$(dirname "$0")/lib.sh"
AZ_BIN=$ROOT/.cache/azurite/node_modules/.bin/azurite-blob
if [ ! -x "$AZ_BIN" ]; then
  echo "SKIPPED azure: no Azurite (needs npm; scripts/ci/setup.sh installs it)"
  exit 0
fi
ensure_fixtures
ensure_server_binary
step "azure: Azurite on loopback"
AZ_PORT=$(free_port)
"$AZ_BIN" --blobHost 127.0.0.1 --blobPort "$AZ_PORT" --inMemoryPersistence \
  --skipApiVersionCheck --silent >"$WORK/azurite.log" 2>&1 &
PIDS+=($!)
wait_for "http://127.0.0.1:$AZ_PORT/" 60
export AZURE_STORAGE_USE_EMULATOR=true AZURITE_BLOB_STORAGE_URL=http://127.0.0.1:$AZ_PORT
"$PY" tests/azure/upload.py "$AZURITE_BLOB_STORAGE_URL" zarr-fixtures interop/data.zarr "$ZARR_FIXTURES/data.zarr"
store_suites az://zarr-fixtures/interop/data.zarr
step "azure: writes through two server processes on Azurite: concurrent writers and appenders on both"
ZS_WRITES_URL=az://zarr-fixtures/writes-http ZS_WRITES_ATOMIC=1 ZS_SERVER_BIN=$SERVER_BIN "$PY" -m pytest -q -p no:cacheprovider tests/writes/test_object_stores.py
step "azure: Icechunk writes and transactions on Azurite, two server processes on one repository"
mkdir -p "$WORK/empty"
"$PY" tests/azure/upload.py "$AZURITE_BLOB_STORAGE_URL" icechunk-tests none "$WORK/empty"  # makes the container
ZS_IC_AZURE_URL=$AZURITE_BLOB_STORAGE_URL AZURE_STORAGE_ACCOUNT_NAME=devstoreaccount1 ZS_SERVER_BIN=$SERVER_BIN \
  "${ZS_VENV_DAP:-$ROOT/.venv-dap}/bin/python" -m pytest -q -p no:cacheprovider tests/icechunk/test_writes.py tests/icechunk/test_transactions.py
