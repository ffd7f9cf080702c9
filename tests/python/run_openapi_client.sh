#!/usr/bin/env bash
# A client generated from openapi.yaml by openapi-python-client calls a running
# zarr-serve: a GET with label selection and a POST of points, both answered
# as the contract says. Needs .venv-openapi (scripts/ci/setup.sh makes it from
# tests/python/requirements-openapi.txt) or ZS_VENV_OPENAPI.
#
#   bash tests/python/run_openapi_client.sh http://127.0.0.1:8080
set -euo pipefail
URL="${1:-${TEST_SERVER_URL:-http://127.0.0.1:8080}}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
VENV="${ZS_VENV_OPENAPI:-$ROOT/.venv-openapi}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/zarr-serve-client.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
(cd "$WORK" && PATH="$VENV/bin:$PATH" openapi-python-client generate \
    --path "$ROOT/openapi.yaml" --meta none >"$WORK/generate.log" 2>&1) || {
    cat "$WORK/generate.log" >&2
    exit 1
}
PYTHONPATH="$WORK" "$VENV/bin/python" "$ROOT/tests/python/openapi_client_check.py" "$URL" "$ROOT"
