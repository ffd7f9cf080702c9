#!/usr/bin/env bash
# Stage load: 64 connections of mixed requests, a flood of large requests,
# and a replica drained behind nginx.
source "$(dirname "$0")/lib.sh"
need_venv
ensure_server_binary
step "load (64 connections), flood of large requests, and a replica drained behind nginx"
"$PY" tests/load/make_data.py "$WORK" >/dev/null
"$PY" tests/load/run.py --bin "$SERVER_BIN" --data "$WORK" \
  --duration "${LOAD_SECONDS:-20}" --flood 10 --drain 12 --json "$WORK/load.json"
