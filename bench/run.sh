#!/usr/bin/env bash
# zarr-serve performance benchmark: one command, ~5-10 minutes on 2 cores.
#
#   bench/run.sh [--duration 10] [--warmup 3] [--conns 32] [--skip-peers] ...
#
# 1. installs missing Debian packages (nginx-light, wrk, curl) with apt-get
# 2. makes bench/.venv from bench/requirements.txt (pinned like tests/fixtures)
# 3. writes bench-data/bench.zarr with zarr-python unless it is already complete,
#    and the 1024 tiles as static files for nginx
# 4. bench/bench.py: peers in-process, the floor of the bulk reads on these cores
#    (bench/floor.py), zarr-serve over loopback HTTP (curl, wrk),
#    nginx on the same files, peak RSS, store economy from /metrics
# Prints the Markdown table; saves bench-data/results.md and bench-data/results.json.
# Uses the already-built binary (BENCH_SERVER_BIN, default target/dist/zarr-serve);
# never runs cargo. Everything listens on 127.0.0.1 and is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DATA=${BENCH_DATA:-$ROOT/bench-data}
VENV=${BENCH_VENV:-$ROOT/bench/.venv}
BIN=${BENCH_SERVER_BIN:-$ROOT/target/dist/zarr-serve}
step() { printf '\n==> %s\n' "$*" >&2; }
T0=$(date +%s)

step "Debian packages"
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
pkgs=()
command -v curl >/dev/null || pkgs+=(curl)
command -v wrk >/dev/null || pkgs+=(wrk)
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
  # bookworm: nginx-light is the small build; fall back to plain nginx where it is gone
  if apt-cache policy nginx-light 2>/dev/null | grep -q 'Candidate: [0-9]'; then pkgs+=(nginx-light); else pkgs+=(nginx); fi
fi
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "installing: ${pkgs[*]}" >&2
  # policy-rc.d (if present) keeps the packaged nginx service from starting on :80
  timeout 300 $SUDO apt-get install -y --no-install-recommends "${pkgs[@]}" >&2 \
    || { timeout 300 $SUDO apt-get update >&2 && timeout 300 $SUDO apt-get install -y --no-install-recommends "${pkgs[@]}" >&2; }
fi
export PATH=$PATH:/usr/sbin
for c in curl wrk nginx; do command -v $c >/dev/null || { echo "missing $c" >&2; exit 1; }; done
echo "nginx: $(nginx -v 2>&1 | sed 's/.*version: //'), wrk: $(wrk -v 2>&1 | head -1 | awk '{print $2}'), curl: $(curl --version | head -1 | awk '{print $2}')" >&2

step "Python environment ($VENV)"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
STAMP=$(sha256sum bench/requirements.txt | cut -c1-16)
if [ "$(cat "$VENV/.requirements-stamp" 2>/dev/null)" != "$STAMP" ]; then
  timeout 600 "$VENV/bin/pip" install -q --disable-pip-version-check -r bench/requirements.txt
  echo "$STAMP" >"$VENV/.requirements-stamp"
fi
PY=$VENV/bin/python
export PYTHONWARNINGS=ignore

step "benchmark data ($DATA)"
mkdir -p "$DATA"
timeout 900 "$PY" bench/make_data.py "$DATA"
timeout 300 "$PY" bench/make_static.py "$DATA"

step "measurements"
timeout 1200 "$PY" bench/bench.py --data "$DATA" --bin "$BIN" "$@"
step "done in $(( $(date +%s) - T0 )) s; table in $DATA/results.md, raw figures in $DATA/results.json"
