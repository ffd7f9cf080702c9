#!/usr/bin/env bash
# OPeNDAP DAP2 `.dods` and DAP4 `.dap` throughput: zarr-serve against its own binary
# region read of the same hyperslab, and (DAP2) against xpublish-opendap serving the
# same store. One
# command, about 2 minutes on 2 cores (the first run also makes the venv and the data):
#
#   bash bench/dap_peer.sh                  (DAP_RUNS=3 timed runs of each by default)
#
# 1. makes .venv-dap-bench (Python 3.12) from bench/requirements-dap.txt
# 2. writes .cache/bench-dap/dap.zarr with bench/dap_make_data.py unless it is
#    complete: t(time, lat, lon) float32 64 x 1024 x 2048 (512 MiB), 4 MiB zstd chunks
# 3. zarr-serve (a copy of BENCH_SERVER_BIN, default target/ci/zarr-serve) on a free
#    loopback port: the hyperslab t[24..39][all][all] (16 x 1024 x 2048 float32, exactly
#    128 MiB) as DAP2 `.dods` (the Grid t with its maps), as DAP4 `.dap` (t with its
#    CRC-32, as netCDF-C and pydap ask for it) and as the binary region read;
#    each fetched once to warm up (bodies kept for step 5), then DAP_RUNS timed curl
#    runs of each, alternating
# 4. xpublish-opendap (uvicorn, 1 worker, bench/dap_xpublish_app.py) on a free loopback
#    port: the same `.dods`, a warm-up, then DAP_RUNS timed runs
# 5. bench/dap_check.py: the four warm-up bodies, element for element, against the
#    store as xarray reads it
# 6. the table: each run and the median of wall time, MB/s (10^6 bytes a second), the
#    server's CPU seconds (utime+stime of /proc/PID/stat, all threads and any child
#    processes; CLK_TCK resolution) and CPU seconds per GB (10^9 bytes) of response, and
#    the CPU the rest of the machine spent meanwhile (curl, and any other load: a busy
#    machine makes the figures noisy); then the two ratios against their targets.
#    Also written to .cache/bench-dap/dap_peer.txt.
#
# The xpublish-opendap URL spells the ranges [start:stop], not [start:1:stop]: both
# are the same DAP2 hyperslab, but opendap-protocol 1.1.1 (under xpublish-opendap
# 0.2.0) reads the second number of a three-part range as the stop, so [24:1:39]
# becomes slice(24, 2, 39) and answers an empty array (its DDS says time = 0).
# Never runs cargo. Needs curl. Everything listens on 127.0.0.1 and is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${DAP_BENCH_CACHE:-$ROOT/.cache/bench-dap}
VENV=${DAP_VENV:-$ROOT/.venv-dap-bench}
BIN=${BENCH_SERVER_BIN:-$ROOT/target/ci/zarr-serve}
RUNS=${DAP_RUNS:-3}
SLAB_BYTES=$((128 << 20))
TCK=$(getconf CLK_TCK)
step() { printf '\n==> %s\n' "$*" >&2; }
die() { echo "dap_peer: $*" >&2; exit 1; }
T_START=$(date +%s)

command -v curl >/dev/null || die "missing curl (apt-get install curl)"
mkdir -p "$CACHE"

step "Python environment ($VENV)"
if [ ! -x "$VENV/bin/python" ]; then
  PY312=$(scripts/find-python312.sh)
  [ -n "$PY312" ] || die "need Python 3.12 (set PYTHON312)"
  "$PY312" -m venv "$VENV"
fi
STAMP=$(sha256sum bench/requirements-dap.txt | cut -c1-16)
if [ "$(cat "$VENV/.requirements-stamp" 2>/dev/null)" != "$STAMP" ]; then
  timeout 900 "$VENV/bin/pip" install -q --disable-pip-version-check -r bench/requirements-dap.txt
  echo "$STAMP" >"$VENV/.requirements-stamp"
fi
PY=$VENV/bin/python
export PYTHONWARNINGS=ignore

step "data ($CACHE/dap.zarr)"
SHAPE=$(timeout 600 "$PY" bench/dap_make_data.py "$CACHE")
read -r NT NLAT NLON <<<"$SHAPE"
STEP_BYTES=$((NLAT * NLON * 4))
[ $((SLAB_BYTES % STEP_BYTES)) -eq 0 ] || die "a time step ($STEP_BYTES bytes) does not divide 128 MiB"
NTS=$((SLAB_BYTES / STEP_BYTES))
T0=$(((NT - NTS) / 2 / 2 * 2))  # the middle of the time axis, on an even step
T1=$((T0 + NTS - 1))            # inclusive, as DAP2 writes it
[ "$T0" -ge 0 ] || die "the store has fewer than $NTS time steps"

step "zarr-serve binary ($BIN)"
# a copy, so that a rebuild of $BIN during the run changes nothing
SERVER=$CACHE/zarr-serve
for i in $(seq 60); do
  if [ -x "$BIN" ] && cp "$BIN" "$SERVER.tmp" 2>/dev/null && "$SERVER.tmp" --version >/dev/null 2>&1; then
    mv -f "$SERVER.tmp" "$SERVER"
    break
  fi
  [ "$i" -lt 60 ] || die "no working zarr-serve binary at $BIN after 5 minutes (set BENCH_SERVER_BIN)"
  echo "waiting for $BIN ..." >&2
  sleep 5
done

# --- servers -------------------------------------------------------------------------
PIDS=()
BODIES=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do
    kill -0 "$p" 2>/dev/null && kill -TERM -- "-$p" 2>/dev/null || true
  done
  rm -f "${BODIES[@]}" "$SERVER.tmp"
}
trap cleanup EXIT

free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_server NAME LOG PROBE_URL CMD...: its own session (so stop_server ends it and
# any children); sets SERVER_PID once PROBE_URL answers 200
start_server() {
  local name=$1 log=$2 probe=$3 i
  shift 3
  (cd "$CACHE" && exec setsid "$@") >"$log" 2>&1 &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  for i in $(seq 450); do
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -20 "$log" >&2; die "$name exited; see $log"; }
    [ "$(curl -gs -o /dev/null -w '%{http_code}' --max-time 5 "$probe" || true)" = 200 ] && return
    sleep 0.2
  done
  die "$name did not answer in 90 s; see $log"
}

stop_server() {
  local pid=$1 i
  kill -TERM -- "-$pid" 2>/dev/null || return 0
  for i in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    sleep 0.2
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# --- measurement ---------------------------------------------------------------------
tree_pids() {
  local c
  echo "$1"
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do tree_pids "$c"; done
}
# utime+stime ticks of a process (all its threads) and its descendants
cpu_ticks() {
  local t=0 p s
  for p in $(tree_pids "$1"); do
    s=$(cat /proc/"$p"/stat 2>/dev/null) || continue
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $s
    t=$((t + ${12} + ${13}))
  done
  echo "$t"
}
# ticks all CPUs spent busy since boot (user nice system irq softirq steal)
machine_ticks() {
  local _ user nice system idle iowait irq softirq steal
  read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
  echo $((user + nice + system + irq + softirq + steal))
}

RAW=$CACHE/dap_peer.raw  # label run bytes seconds server_ticks machine_ticks
: >"$RAW"

# warm LABEL URL FILE EXPECT_MIN: one fetch, body kept for dap_check.py
warm() {
  local out code secs n
  BODIES+=("$3")
  out=$(curl -gs --max-time 600 -o "$3" -w '%{http_code} %{time_total} %{size_download}' "$2") \
    || die "$1: curl failed on $2"
  read -r code secs n <<<"$out"
  [ "$code" = 200 ] || die "$1: status $code for $2: $(head -c 300 "$3")"
  [ "$n" -ge "$4" ] || die "$1: $n bytes, expected at least $4"
  printf '  %-24s warm-up: %s bytes in %s s\n' "$1" "$n" "$secs" >&2
}

# timed LABEL RUN URL PID: one fetch to /dev/null with the server's CPU around it
timed() {
  local c0 m0 c1 m1 out code secs n
  c0=$(cpu_ticks "$4")
  m0=$(machine_ticks)
  out=$(curl -gs --max-time 600 -o /dev/null -w '%{http_code} %{time_total} %{size_download}' "$3") \
    || die "$1: curl failed on $3"
  c1=$(cpu_ticks "$4")
  m1=$(machine_ticks)
  read -r code secs n <<<"$out"
  [ "$code" = 200 ] || die "$1: status $code for $3"
  echo "$1 $2 $n $secs $((c1 - c0)) $((m1 - m0))" >>"$RAW"
  printf '  %-24s run %s: %s bytes in %s s\n' "$1" "$2" "$n" "$secs" >&2
}

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
ZS_DODS="t[$T0:1:$T1][0:1:$((NLAT - 1))][0:1:$((NLON - 1))]"
XP_DODS="t[$T0:$T1][0:$((NLAT - 1))][0:$((NLON - 1))]"
ZS_SELECT="select=$T0:$((T1 + 1)),:,:&format=binary"
ZS_DAP4="dap4.ce=/t%5B$T0:1:$T1%5D%5B0:1:$((NLAT - 1))%5D%5B0:1:$((NLON - 1))%5D&dap4.checksum=true"

step "zarr-serve: .dods?$ZS_DODS and data/t?$ZS_SELECT"
PORT=$(free_port)
ZS=http://127.0.0.1:$PORT/v1/datasets/bench
# cwd = the cache dir: no config/default.toml there, only the built-in defaults
start_server zarr-serve "$CACHE/zarr-serve.log" "http://127.0.0.1:$PORT/readyz" \
  env ZARR_SERVE_LOG_LEVEL=warn "$SERVER" --listen "127.0.0.1:$PORT" --dataset "bench=$CACHE/dap.zarr"
ZS_PID=$SERVER_PID
warm "zarr-serve .dods" "$ZS/dap.dods?$ZS_DODS" "$CACHE/warm-zs.dods" $((SLAB_BYTES + 8))
warm "zarr-serve binary" "$ZS/data/t?$ZS_SELECT" "$CACHE/warm-zs.bin" "$SLAB_BYTES"
warm "zarr-serve DAP4 .dap" "$ZS/dap4.dap?$ZS_DAP4" "$CACHE/warm-zs.dap" $((SLAB_BYTES + 8))
for r in $(seq "$RUNS"); do
  timed zs_dods "$r" "$ZS/dap.dods?$ZS_DODS" "$ZS_PID"
  timed zs_bin "$r" "$ZS/data/t?$ZS_SELECT" "$ZS_PID"
  timed zs_dap "$r" "$ZS/dap4.dap?$ZS_DAP4" "$ZS_PID"
done
stop_server "$ZS_PID"

step "xpublish-opendap: /opendap.dods?$XP_DODS"
PORT=$(free_port)
XP=http://127.0.0.1:$PORT
start_server xpublish-opendap "$CACHE/xpublish.log" "$XP/opendap.dds" \
  env DAP_BENCH_ZARR="$CACHE/dap.zarr" "$PY" -m uvicorn --app-dir "$ROOT/bench" dap_xpublish_app:app \
  --host 127.0.0.1 --port "$PORT" --workers 1 --no-access-log --log-level warning
XP_PID=$SERVER_PID
warm "xpublish-opendap .dods" "$XP/opendap.dods?$XP_DODS" "$CACHE/warm-xp.dods" $((SLAB_BYTES + 8))
for r in $(seq "$RUNS"); do
  timed xp_dods "$r" "$XP/opendap.dods?$XP_DODS" "$XP_PID"
done
stop_server "$XP_PID"
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

step "values (bench/dap_check.py)"
CHECK=$(timeout 300 "$PY" bench/dap_check.py "$CACHE/dap.zarr" "$T0" "$T1" \
  "$CACHE/warm-zs.dods" "$CACHE/warm-zs.bin" "$CACHE/warm-xp.dods" "$CACHE/warm-zs.dap" 2>&1) && CHECK_OK=1 || CHECK_OK=0
[ "$CHECK_OK" = 1 ] || BODIES=()  # keep the bodies to look at

# --- report --------------------------------------------------------------------------
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# derived LABEL: "run bytes secs MB/s cpu_s cpu_s_per_GB rest_cpu_s" per run
derived() {
  awk -v l="$1" -v tck="$TCK" '$1 == l {
    cpu = $5 / tck; rest = ($6 - $5) / tck; if (rest < 0) rest = 0
    printf "%s %d %.3f %.1f %.2f %.3f %.2f\n", $2, $3, $4, $3 / $4 / 1e6, cpu, cpu / ($3 / 1e9), rest
  }' "$RAW"
}
col_median() { derived "$1" | awk -v c="$2" '{ print $c }' | median; }
thousands() { echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }
row() { printf '%-26s %6s %13s %8s %8s %8s %9s %9s\n' "$@"; }

report() {
  local l name d
  echo "OPeNDAP DAP2 .dods and DAP4 .dap throughput ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $LOAD0 before, $LOAD1 after)"
  echo "zarr-serve: $("$SERVER" --version)  |  xpublish-opendap: $("$PY" -c 'import importlib.metadata as m; print(", ".join(f"{p} {m.version(p)}" for p in ("xpublish-opendap", "opendap-protocol", "xpublish", "xarray", "zarr", "dask", "numpy", "uvicorn")))')"
  echo "store: $CACHE/dap.zarr, t(time, lat, lon) float32 ${NT}x${NLAT}x${NLON}, 4 MiB zstd chunks"
  echo "hyperslab: time $T0..$T1 (inclusive) x all lat x all lon = ${NTS}x${NLAT}x${NLON} float32 = $SLAB_BYTES bytes"
  echo "  zarr-serve .dods:        GET /v1/datasets/bench/dap.dods?$ZS_DODS"
  echo "  zarr-serve binary:       GET /v1/datasets/bench/data/t?$ZS_SELECT"
  echo "  zarr-serve DAP4 .dap:    GET /v1/datasets/bench/dap4.dap?$ZS_DAP4"
  echo "  xpublish-opendap .dods:  GET /opendap.dods?$XP_DODS   (uvicorn, 1 worker; xr.open_zarr, dask)"
  echo "each: one warm-up fetch, then $RUNS timed curl fetches to /dev/null; MB = 10^6 bytes, GB = 10^9 bytes;"
  echo "CPU = the server process's utime+stime (1/$TCK s ticks); rest = CPU the rest of the machine spent (curl, other load)"
  echo
  row "" run bytes "wall s" "MB/s" "CPU s" "CPU s/GB" "rest CPU s"
  for l in zs_dods zs_bin zs_dap xp_dods; do
    case $l in
      zs_dods) name="zarr-serve .dods" ;;
      zs_bin) name="zarr-serve binary" ;;
      zs_dap) name="zarr-serve DAP4 .dap" ;;
      xp_dods) name="xpublish-opendap .dods" ;;
    esac
    while read -r r b s mbps cpu cpugb rest; do
      row "$name" "$r" "$(thousands "$b")" "$s" "$mbps" "$cpu" "$cpugb" "$rest"
      name=""
    done < <(derived "$l")
    row "" median "" "$(col_median $l 3)" "$(col_median $l 4)" "$(col_median $l 5)" "$(col_median $l 6)" "$(col_median $l 7)"
  done
  echo
  echo "response sizes (warm-up bodies) and values:"
  echo "$CHECK"
  echo
  local zd zb xd z4 c4 cb
  zd=$(col_median zs_dods 4)
  zb=$(col_median zs_bin 4)
  xd=$(col_median xp_dods 4)
  z4=$(col_median zs_dap 4)
  c4=$(col_median zs_dap 6)
  cb=$(col_median zs_bin 6)
  awk -v zd="$zd" -v zb="$zb" -v xd="$xd" -v z4="$z4" -v c4="$c4" -v cb="$cb" 'BEGIN {
    r1 = zd / zb; r2 = zd / xd; r3 = z4 / zb; r4 = (c4 > 0) ? cb / c4 : 0
    printf "ratio zarr-serve .dods / zarr-serve binary   (median MB/s): %6.2f   target >= 0.8: %s\n", r1, (r1 >= 0.8) ? "met" : "NOT met"
    printf "ratio zarr-serve .dods / xpublish-opendap    (median MB/s): %6.2f   target >= 5:   %s\n", r2, (r2 >= 5) ? "met" : "NOT met"
    printf "ratio zarr-serve .dap  / zarr-serve binary   (median MB/s): %6.2f   target >= 0.8: %s\n", r3, (r3 >= 0.8) ? "met" : "NOT met"
    printf "ratio of server CPU per GB, binary / .dap    (median):      %6.2f\n", r4
  }'
}

step "report"
echo
report | tee "$CACHE/dap_peer.txt"
step "done in $(($(date +%s) - T_START)) s; table in $CACHE/dap_peer.txt, raw figures in $RAW"
[ "$CHECK_OK" = 1 ] || die "the value check failed; bodies kept in $CACHE/warm-*"
