#!/usr/bin/env bash
# OGC API EDR queries against xpublish-edr, and the CSV / NetCDF region downloads
# (issue 30). One command, about 4 minutes on 2 cores (the first run also makes the
# venv and the data, a minute or two more):
#
#   bench/edr_peer.sh          (EDR_RUNS=3 runs of EDR_DURATION=8 s for each wrk figure)
#
# 1. makes .venv-edr-bench (Python 3.12) from bench/requirements-edr.txt
# 2. writes .cache/bench-edr/edr-365x45x45.zarr with bench/edr_make_data.py unless it
#    is complete: tas(time, lat, lon) float32 3653 x 180 x 360 (ten years of days on a
#    1 degree grid, 947 MB decoded), chunks 365 x 45 x 45 (2.96 MB; EDR_CHUNKS=a,b,c
#    picks another shape, written to a store of its own), zstd, CF attributes, CF time
# 3. bench/edr_check.py lists: the questions, the same for both servers:
#    - position: EDR_POINTS=16 seeded random points, each the whole 10-year daily series
#      of `tas` at the cell holding the point (3653 values; 11 chunks read)
#    - area: a pentagon of about 19 x 15 degrees (~200 cells) over 4 continents, each
#      for EDR_AREA_DATETIME (default the year 2005: 365 days, 2 time chunks)
#    both as CoverageJSON, each server's default format:
#      zarr-serve:   /v1/datasets/edr/edr/collections/edr/position?coords=POINT(x y)&parameter-name=tas
#                    /v1/datasets/edr/edr/collections/edr/area?coords=POLYGON((...))&parameter-name=tas&datetime=...
#      xpublish-edr: /edr/position?coords=POINT(x y)&parameter-name=tas
#                    /edr/area?coords=POLYGON((...))&parameter-name=tas&datetime=...
# 4. starts zarr-serve (a copy of BENCH_SERVER_BIN, default target/ci/zarr-serve; its
#    built-in defaults) and xpublish-edr (xpublish + uvicorn, 1 worker,
#    bench/edr_xpublish_app.py: xr.open_zarr, dask) on free loopback ports; asks every
#    question of both once (the warm-up), and zarr-serve for the region downloads
#    GET /v1/datasets/edr/data/tas?select=...&format=csv|netcdf|binary: CSV of time
#    1960..2019 x all lat x all lon (3.9 M rows, 158 MB of text), NetCDF and binary of
#    time 365..1459 x all x all (284 MB)
# 5. before any timing, bench/edr_check.py compares every answer of both servers, value
#    for value (NaN-aware), with the other server's and with xarray's read of the store,
#    and the CSV, NetCDF and binary bodies with the store; stops on a mismatch
# 6. zarr-serve, then xpublish-edr (the idle one keeps running): EDR_RUNS rounds of
#    position and area, each with wrk -c1 (one client: sequential requests, their
#    latency) and wrk -c$EDR_CONNS (EDR_CONNS=4 clients: throughput), EDR_DURATION
#    seconds each, cycling through the list (bench/wrk_edr_list.lua; every answer must
#    be a 200); for zarr-serve also EDR_RUNS timed curl fetches of each download,
#    alternating. EDR_XP_WORKERS="1 2" adds a 2-worker xpublish-edr, EDR_CONNS clients.
# 7. the table: for each query, server and client count, req/s of each run and their
#    median, wrk's p50 and p90 latency, the server's CPU seconds a request (utime+stime
#    of /proc/PID/stat, all threads and any child processes, CLK_TCK resolution; with
#    several clients the CPU of requests still in flight when a run ends counts, not
#    the requests, so the 1-client figure is the exact one), bytes an answer, and the
#    CPU the rest of the machine spent during the run (wrk, any other load); for the
#    downloads, as bench/dap_peer.sh, MB/s (10^6 bytes a second) and CPU-s/GB; then each
#    target with its figure. Also written to .cache/bench-edr/edr_peer.txt.
#
# 8. hot positions (issue 45): bench/edr_check.py's zipf list (4000 positions drawn from a
#    Zipf law over the grid's cells) against zarr-serve alone, once for each decoded-chunk
#    cache size of EDR_ZIPF_CACHES (MiB, default "128 1024", empty to skip: the default and one that holds
#    the store's hot columns), each a fresh server: one untimed wrk pass, then EDR_RUNS
#    timed ones, EDR_CONNS clients. EDR_BASELINE_BIN (optional) runs the same with another
#    binary (the one before the change), so "today's rate" is measured in the same run.
# 9. the floor of a position answer: libzstd alone decoding the chunks each point's
#    series touches (bench/edr_check.py floor), set against the server's CPU a position
#    answer with 1 client, from a fresh server without the decoded-chunk cache (with it,
#    a repeated position decodes less than the floor's chunks).
#
# Never runs cargo. Needs curl and wrk. Everything listens on 127.0.0.1 and is stopped
# at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${EDR_BENCH_CACHE:-$ROOT/.cache/bench-edr}
VENV=${EDR_VENV:-$ROOT/.venv-edr-bench}
BIN=${BENCH_SERVER_BIN:-$ROOT/target/ci/zarr-serve}
RUNS=${EDR_RUNS:-3}
DURATION=${EDR_DURATION:-8}
CONNS=${EDR_CONNS:-4}
POINTS=${EDR_POINTS:-16}
CHUNKS=${EDR_CHUNKS:-365,45,45}
AREA_DATETIME=${EDR_AREA_DATETIME:-2005-01-01/2005-12-31}
XP_WORKERS=${EDR_XP_WORKERS:-1}
ZIPF_CACHES=${EDR_ZIPF_CACHES-128 1024}
BASELINE_BIN=${EDR_BASELINE_BIN:-}
CSV_TIME=1960:2020  # 60 days, with the missing day 1994 (empty cells)
BIG_TIME=365:1460   # 1095 days: three whole time chunks, with the missing day 997
TCK=$(getconf CLK_TCK)
step() { printf '\n==> %s\n' "$*" >&2; }
die() { echo "edr_peer: $*" >&2; exit 1; }
T_START=$(date +%s)

command -v curl >/dev/null || die "missing curl (apt-get install curl)"
command -v wrk >/dev/null || die "missing wrk (apt-get install wrk)"
mkdir -p "$CACHE/warm"

step "Python environment ($VENV)"
if [ ! -x "$VENV/bin/python" ]; then
  PY312=$(scripts/find-python312.sh)
  [ -n "$PY312" ] || die "need Python 3.12 (set PYTHON312)"
  "$PY312" -m venv "$VENV"
fi
STAMP=$(sha256sum bench/requirements-edr.txt | cut -c1-16)
if [ "$(cat "$VENV/.requirements-stamp" 2>/dev/null)" != "$STAMP" ]; then
  timeout 900 "$VENV/bin/pip" install -q --disable-pip-version-check -r bench/requirements-edr.txt
  echo "$STAMP" >"$VENV/.requirements-stamp"
fi
PY=$VENV/bin/python
export PYTHONWARNINGS=ignore

step "data (chunks $CHUNKS)"
{ read -r STORE; read -r NT NLAT NLON CT CLAT CLON; } < <(timeout 600 "$PY" bench/edr_make_data.py "$CACHE" "$CHUNKS")
[ -d "$STORE" ] || die "bench/edr_make_data.py wrote no store"
"$PY" bench/edr_check.py lists "$CACHE" edr "$POINTS" "$AREA_DATETIME"

step "the floor of a position answer (libzstd alone)"
FLOOR=$("$PY" bench/edr_check.py floor "$STORE" "$CACHE") || die "bench/edr_check.py floor failed"
echo "  $FLOOR (CPU-s an answer, chunks an answer, decoder)" >&2

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

EDR_RAW=$CACHE/edr_peer.edr.raw  # server query clients run requests duration_us bytes p50_us p90_us server_ticks machine_ticks
FMT_RAW=$CACHE/edr_peer.formats.raw  # label run bytes seconds server_ticks machine_ticks
: >"$EDR_RAW"
: >"$FMT_RAW"

# warm_edr SERVER BASE: every question of both lists once, answers kept for edr_check.py
warm_edr() {
  local s=$1 base=$2 q i path code n t0
  for q in position area; do
    i=0
    t0=$(date +%s.%N)
    while read -r path; do
      code=$(curl -gs --max-time 120 -o "$CACHE/warm/$s-$q-$i.json" -w '%{http_code}' "$base$path") \
        || die "$s: curl failed on $base$path"
      [ "$code" = 200 ] || die "$s: status $code for $base$path: $(head -c 300 "$CACHE/warm/$s-$q-$i.json")"
      i=$((i + 1))
    done <"$CACHE/$q.$s.list"
    n=$(awk -v a="$t0" -v b="$(date +%s.%N)" -v n="$i" 'BEGIN { printf "%.3f", (b - a) / n }')
    printf '  %-14s warm-up: %d %s answers, %s s each (curl, one at a time)\n' "$s" "$i" "$q" "$n" >&2
  done
}

# jnum KEY TEXT: the first number after "KEY": in TEXT
jnum() { grep -o "\"$1\":[0-9.]*" <<<"$2" | head -1 | cut -d: -f2; }

# wrk_run LABEL LIST QUERY CLIENTS RUN BASE PID
wrk_run() {
  local label=$1 list=$2 q=$3 c=$4 r=$5 base=$6 pid=$7 threads=1 c0 m0 c1 m1 out n ok nok tmo
  [ "$c" -gt 1 ] && threads=2
  c0=$(cpu_ticks "$pid")
  m0=$(machine_ticks)
  out=$(EDR_LIST="$list" WRK_DONE_LUA="$ROOT/bench/wrk_done.lua" \
    wrk -t"$threads" -c"$c" -d"${DURATION}s" --timeout 60s -s "$ROOT/bench/wrk_edr_list.lua" "$base" 2>&1) \
    || die "$label: wrk failed: $out"
  c1=$(cpu_ticks "$pid")
  m1=$(machine_ticks)
  n=$(jnum requests "$out")
  ok=$(jnum ok_200 "$out")
  nok=$(jnum bad "$out")
  tmo=$(jnum timeout "$out")
  [ -n "$n" ] && [ "$n" -gt 0 ] || die "$label $q: wrk answered no request: $out"
  [ "$nok" = 0 ] && [ "$tmo" = 0 ] || die "$label $q: $nok answers not 200, $tmo timeouts: $out"
  echo "$label $q $c $r $n $(jnum duration_us "$out") $(jnum bytes "$out") $(jnum p50 "$out") $(jnum p90 "$out") $((c1 - c0)) $((m1 - m0))" >>"$EDR_RAW"
  awk -v l="$label" -v q="$q" -v c="$c" -v r="$r" -v n="$n" -v ok="$ok" -v d="$(jnum duration_us "$out")" \
    -v p="$(jnum p50 "$out")" -v cpu="$((c1 - c0))" -v tck="$TCK" 'BEGIN {
    printf "  %-14s %-8s %d client(s) run %d: %5d answers (%d ok), %8.2f req/s, p50 %7.1f ms, %.4f CPU-s/req\n",
      l, q, c, r, n, ok, n / (d / 1e6), p / 1000, cpu / tck / n }' >&2
}

# edr_rounds LABEL SERVER BASE PID CLIENT_COUNTS: RUNS rounds of position and area
edr_rounds() {
  local label=$1 s=$2 base=$3 pid=$4 counts=$5 r q c
  for r in $(seq "$RUNS"); do
    for q in position area; do
      for c in $counts; do
        wrk_run "$label" "$CACHE/$q.$s.list" "$q" "$c" "$r" "$base" "$pid"
      done
    done
  done
}

# warm LABEL URL FILE: one fetch, body kept for edr_check.py
warm() {
  local out code secs n
  BODIES+=("$3")
  out=$(curl -gs --max-time 600 -o "$3" -w '%{http_code} %{time_total} %{size_download}' "$2") \
    || die "$1: curl failed on $2"
  read -r code secs n <<<"$out"
  [ "$code" = 200 ] || die "$1: status $code for $2: $(head -c 300 "$3")"
  printf '  %-14s warm-up: %s bytes in %s s\n' "$1" "$n" "$secs" >&2
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
  echo "$1 $2 $n $secs $((c1 - c0)) $((m1 - m0))" >>"$FMT_RAW"
  printf '  %-14s run %s: %s bytes in %s s\n' "$1" "$2" "$n" "$secs" >&2
}

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
DATA_PATH=/v1/datasets/edr/data/tas
CSV_Q="select=$CSV_TIME,:,:&format=csv"
NC_Q="select=$BIG_TIME,:,:&format=netcdf"
BIN_Q="select=$BIG_TIME,:,:&format=binary"

# start_xpublish WORKERS: sets XP and XP_PID
start_xpublish() {
  local port
  port=$(free_port)
  XP=http://127.0.0.1:$port
  start_server xpublish-edr "$CACHE/xpublish-$1.log" "$XP/edr/" \
    env EDR_BENCH_ZARR="$STORE" "$PY" -m uvicorn --app-dir "$ROOT/bench" edr_xpublish_app:app \
    --host 127.0.0.1 --port "$port" --workers "$1" --no-access-log --log-level warning
  XP_PID=$SERVER_PID
}

step "servers, warm-up and values (bench/edr_check.py), before any timing"
PORT=$(free_port)
ZS=http://127.0.0.1:$PORT
# cwd = the cache dir: no config/default.toml there, only the built-in defaults
start_server zarr-serve "$CACHE/zarr-serve.log" "$ZS/readyz" \
  env ZARR_SERVE_LOG_LEVEL=warn "$SERVER" --listen "127.0.0.1:$PORT" --dataset "edr=$STORE"
ZS_PID=$SERVER_PID
start_xpublish 1
warm_edr zs "$ZS"
warm_edr xp "$XP"
warm csv "$ZS$DATA_PATH?$CSV_Q" "$CACHE/warm-zs.csv"
warm netcdf "$ZS$DATA_PATH?$NC_Q" "$CACHE/warm-zs.nc"
warm binary "$ZS$DATA_PATH?$BIN_Q" "$CACHE/warm-zs.bin"
CHECK_OK=1
CHECK_EDR=$(timeout 300 "$PY" bench/edr_check.py edr "$STORE" "$CACHE" 2>&1) || CHECK_OK=0
CHECK_FMT=$(timeout 300 "$PY" bench/edr_check.py formats "$STORE" "$CSV_TIME,:,:" "$CACHE/warm-zs.csv" \
  "$BIG_TIME,:,:" "$CACHE/warm-zs.nc" "$CACHE/warm-zs.bin" 2>&1) || CHECK_OK=0
echo "$CHECK_EDR" >&2
echo "$CHECK_FMT" >&2
if [ "$CHECK_OK" != 1 ]; then
  BODIES=()  # keep the bodies to look at
  die "the value check failed; answers kept in $CACHE/warm/ and $CACHE/warm-zs.*"
fi
rm -f "${BODIES[@]}"  # 730 MB of downloads, checked
BODIES=()

step "zarr-serve: EDR position and area ($RUNS rounds, wrk -c1 and -c$CONNS, ${DURATION} s each)"
edr_rounds zs zs "$ZS" "$ZS_PID" "1 $CONNS"

step "zarr-serve: region downloads ($DATA_PATH?$CSV_Q, ?$NC_Q, ?$BIN_Q)"
for r in $(seq "$RUNS"); do
  timed csv "$r" "$ZS$DATA_PATH?$CSV_Q" "$ZS_PID"
  timed netcdf "$r" "$ZS$DATA_PATH?$NC_Q" "$ZS_PID"
  timed binary "$r" "$ZS$DATA_PATH?$BIN_Q" "$ZS_PID"
done
stop_server "$ZS_PID"

step "xpublish-edr, 1 worker: /edr/position and /edr/area"
edr_rounds xp1 xp "$XP" "$XP_PID" "1 $CONNS"
stop_server "$XP_PID"
for w in $XP_WORKERS; do
  [ "$w" = 1 ] && continue
  step "xpublish-edr, $w workers: /edr/position and /edr/area, $CONNS clients"
  start_xpublish "$w"
  # a pass over the lists first (each worker opens the store on its first request)
  warm_edr xp "$XP"
  edr_rounds "xp$w" xp "$XP" "$XP_PID" "$CONNS"
  stop_server "$XP_PID"
done

# fresh_rounds LABEL BINARY CACHE_MIB QUERY CLIENTS: a fresh server with that
# decoded-chunk cache, one untimed pass over $CACHE/QUERY.zs.list, then RUNS timed ones
fresh_rounds() {
  local label=$1 bin=$2 mib=$3 q=$4 c=$5 port base r
  port=$(free_port)
  base=http://127.0.0.1:$port
  start_server "$label" "$CACHE/$label.log" "$base/readyz" \
    env ZARR_SERVE_LOG_LEVEL=warn ZARR_SERVE_DECODED_CHUNK_CACHE_BYTES=$((mib << 20)) \
    "$bin" --listen "127.0.0.1:$port" --dataset "edr=$STORE"
  wrk_run "$label" "$CACHE/$q.zs.list" "$q-warm" "$c" 0 "$base" "$SERVER_PID"
  for r in $(seq "$RUNS"); do
    wrk_run "$label" "$CACHE/$q.zs.list" "$q" "$c" "$r" "$base" "$SERVER_PID"
  done
  stop_server "$SERVER_PID"
}
step "zarr-serve without the decoded-chunk cache: position, 1 client (against the floor)"
fresh_rounds zs-nocache "$SERVER" 0 position 1
if [ -n "$BASELINE_BIN" ]; then
  cp "$BASELINE_BIN" "$CACHE/zarr-serve-baseline"
  BASELINE_VERSION=$("$CACHE/zarr-serve-baseline" --version)
fi
for mib in $ZIPF_CACHES; do
  step "hot positions: the zipf list, $CONNS clients, decoded-chunk cache $mib MiB"
  fresh_rounds "zs-$mib" "$SERVER" "$mib" zipf "$CONNS"
  [ -z "$BASELINE_BIN" ] || fresh_rounds "base-$mib" "$CACHE/zarr-serve-baseline" "$mib" zipf "$CONNS"
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

# --- report --------------------------------------------------------------------------
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# edr_derived LABEL QUERY CLIENTS: "run req/s p50_ms p90_ms cpu_s_per_req bytes_per_answer rest_cpu_s" per run
edr_derived() {
  awk -v l="$1" -v q="$2" -v c="$3" -v tck="$TCK" '$1 == l && $2 == q && $3 == c {
    rest = ($11 - $10) / tck; if (rest < 0) rest = 0
    printf "%s %.2f %.1f %.1f %.4f %d %.1f\n", $4, $5 / ($6 / 1e6), $8 / 1000, $9 / 1000, $10 / tck / $5, $7 / $5, rest
  }' "$EDR_RAW"
}
edr_median() { edr_derived "$1" "$2" "$3" | awk -v c="$4" '{ print $c }' | median; }
# fmt_derived LABEL: "run bytes secs MB/s cpu_s cpu_s_per_GB rest_cpu_s" per run
fmt_derived() {
  awk -v l="$1" -v tck="$TCK" '$1 == l {
    cpu = $5 / tck; rest = ($6 - $5) / tck; if (rest < 0) rest = 0
    printf "%s %d %.3f %.1f %.2f %.3f %.2f\n", $2, $3, $4, $3 / $4 / 1e6, cpu, cpu / ($3 / 1e9), rest
  }' "$FMT_RAW"
}
fmt_median() { fmt_derived "$1" | awk -v c="$2" '{ print $c }' | median; }
thousands() { echo "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }
erow() { printf '%-9s %-22s %7s %-26s %9s %8s %8s %10s %12s %10s\n' "$@"; }
# edr_row QUERY NAME LABEL CLIENTS: the table's row of those runs (nothing when none ran)
edr_row() {
  local q=$1 name=$2 l=$3 c=$4 runs
  runs=$(edr_derived "$l" "$q" "$c" | awk '{ printf "%s%s", (NR > 1) ? " / " : "", $2 }')
  [ -n "$runs" ] || return 0
  erow "$q" "$name" "$c" "$runs" "$(edr_median "$l" "$q" "$c" 2)" "$(edr_median "$l" "$q" "$c" 3)" \
    "$(edr_median "$l" "$q" "$c" 4)" "$(edr_median "$l" "$q" "$c" 5)" \
    "$(thousands "$(edr_median "$l" "$q" "$c" 6)")" "$(edr_median "$l" "$q" "$c" 7)"
}
frow() { printf '%-9s %6s %13s %8s %8s %8s %9s %9s\n' "$@"; }
# ratio_line TEXT A B [TARGET]: A / B, against TARGET when given
ratio_line() {
  awk -v t="$1" -v a="$2" -v b="$3" -v target="$4" 'BEGIN {
    if (b + 0 == 0) { printf "%-66s %8s   target >= %-4s %s\n", t, "-", target, "(no figure)"; exit }
    r = a / b
    if (target == "") printf "%-66s %7.2fx   (no target)\n", t, r
    else printf "%-66s %7.2fx   target >= %-4s %s\n", t, r, target, (r >= target) ? "met" : "NOT met"
  }'
}

report() {
  local q c l name
  echo "OGC API EDR against xpublish-edr, and region downloads ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load $LOAD0 before, $LOAD1 after)"
  echo "zarr-serve: $("$SERVER" --version)  |  peer: $("$PY" -c 'import importlib.metadata as m; print(", ".join(f"{p} {m.version(p)}" for p in ("xpublish-edr", "xpublish", "xarray", "zarr", "dask", "numpy", "uvicorn")))')"
  echo "store: $STORE: tas(time, lat, lon) float32 ${NT}x${NLAT}x${NLON}, chunks ${CT}x${CLAT}x${CLON} ($(awk -v a="$CT" -v b="$CLAT" -v c="$CLON" 'BEGIN { printf "%.2f", a * b * c * 4 / 1e6 }') MB decoded), zstd level 3, written by xarray (Zarr v3)"
  echo "position: $POINTS points, each the whole series (${NT} days, $(((NT + CT - 1) / CT)) chunks read), CoverageJSON"
  echo "  zarr-serve:   GET /v1/datasets/edr/edr/collections/edr/position?coords=POINT(x y)&parameter-name=tas"
  echo "  xpublish-edr: GET /edr/position?coords=POINT(x y)&parameter-name=tas   (uvicorn; xr.open_zarr, dask)"
  echo "area: 4 pentagons of ~200 cells, datetime=$AREA_DATETIME, CoverageJSON"
  echo "  zarr-serve:   GET /v1/datasets/edr/edr/collections/edr/area?coords=POLYGON((...))&parameter-name=tas&datetime=$AREA_DATETIME"
  echo "  xpublish-edr: GET /edr/area?coords=POLYGON((...))&parameter-name=tas&datetime=$AREA_DATETIME"
  echo "each row: $RUNS wrk runs of ${DURATION} s cycling through the list after a warm-up pass; 1 client = one"
  echo "request at a time (latency), $CONNS clients = throughput. CPU = the server's utime+stime (1/$TCK s ticks);"
  echo "rest = CPU the rest of the machine spent in the run (wrk, other load). Values: medians of the runs."
  echo
  erow query server clients "req/s (each run)" "req/s" "p50 ms" "p90 ms" "CPU-s/req" "bytes/answer" "rest CPU s"
  for q in position area; do
    for l in zs xp1 $(for w in $XP_WORKERS; do [ "$w" = 1 ] || echo "xp$w"; done); do
      case $l in
        zs) name="zarr-serve" ;;
        xp1) name="xpublish-edr 1 worker" ;;
        *) name="xpublish-edr ${l#xp} workers" ;;
      esac
      for c in 1 "$CONNS"; do
        edr_row "$q" "$name" "$l" "$c"
      done
    done
  done
  for mib in $ZIPF_CACHES; do
    edr_row zipf "zarr-serve, $mib MiB" "zs-$mib" "$CONNS"
    edr_row zipf "baseline, $mib MiB" "base-$mib" "$CONNS"
  done
  [ -z "$BASELINE_BIN" ] || echo "zipf: baseline = $BASELINE_BIN ($BASELINE_VERSION); cache sizes in MiB"
  edr_row position "zarr-serve, no cache" zs-nocache 1
  echo "position floor: $FLOOR (libzstd CPU-s an answer, chunks an answer)"
  echo
  echo "answers and values:"
  echo "$CHECK_EDR"
  echo
  echo "region downloads (zarr-serve): csv = data/tas?$CSV_Q"
  echo "  netcdf = data/tas?$NC_Q, binary = data/tas?$BIN_Q"
  echo "  one warm-up fetch, then $RUNS timed curl fetches each to /dev/null, alternating; MB = 10^6 bytes, GB = 10^9"
  echo
  frow "" run bytes "wall s" "MB/s" "CPU s" "CPU s/GB" "rest CPU"
  for l in csv netcdf binary; do
    name=$l
    while read -r r b s mbps cpu cpugb rest; do
      frow "$name" "$r" "$(thousands "$b")" "$s" "$mbps" "$cpu" "$cpugb" "$rest"
      name=""
    done < <(fmt_derived "$l")
    frow "" median "" "$(fmt_median $l 3)" "$(fmt_median $l 4)" "$(fmt_median $l 5)" "$(fmt_median $l 6)" "$(fmt_median $l 7)"
  done
  echo
  echo "bodies and values:"
  echo "$CHECK_FMT"
  echo
  echo "targets (issue 30; medians):"
  for q in position area; do
    ratio_line "$q, 1 client: zarr-serve / xpublish-edr 1 worker (req/s)" \
      "$(edr_median zs "$q" 1 2)" "$(edr_median xp1 "$q" 1 2)" 20
    ratio_line "$q, $CONNS clients: zarr-serve / xpublish-edr 1 worker (req/s)" \
      "$(edr_median zs "$q" "$CONNS" 2)" "$(edr_median xp1 "$q" "$CONNS" 2)" 20
    for w in $XP_WORKERS; do
      [ "$w" = 1 ] && continue
      ratio_line "$q, $CONNS clients: zarr-serve / xpublish-edr $w workers (req/s)" \
        "$(edr_median zs "$q" "$CONNS" 2)" "$(edr_median "xp$w" "$q" "$CONNS" 2)" 20
    done
    ratio_line "$q, CPU-s a request: xpublish-edr 1 worker / zarr-serve (1 client)" \
      "$(edr_median xp1 "$q" 1 5)" "$(edr_median zs "$q" 1 5)" ""
  done
  echo
  echo "targets (issue 45; medians):"
  ratio_line "area, $CONNS clients: zarr-serve / xpublish-edr 1 worker (req/s)" \
    "$(edr_median zs area "$CONNS" 2)" "$(edr_median xp1 area "$CONNS" 2)" 20
  ratio_line "area, 1 client: zarr-serve / xpublish-edr 1 worker (req/s)" \
    "$(edr_median zs area 1 2)" "$(edr_median xp1 area 1 2)" 8
  awk -v cpu="$(edr_median zs-nocache position 1 5)" -v floor="${FLOOR%% *}" 'BEGIN {
    r = cpu / floor
    printf "%-66s %7.2fx   target <= %-4s %s\n", "position, 1 client, no cache: server CPU an answer / libzstd decode", r, 1.3, (r <= 1.3) ? "met" : "NOT met" }'
  for mib in $ZIPF_CACHES; do
    [ -n "$BASELINE_BIN" ] && ratio_line "hot positions (zipf), cache $mib MiB: zarr-serve / baseline (req/s)" \
      "$(edr_median "zs-$mib" zipf "$CONNS" 2)" "$(edr_median "base-$mib" zipf "$CONNS" 2)" 3
  done
  awk -v m="$(fmt_median csv 4)" 'BEGIN { printf "%-66s %7.1f    target >= %-4s %s\n", "CSV: MB/s of text", m, 200, (m >= 200) ? "met" : "NOT met" }'
  ratio_line "NetCDF / binary of the same region (MB/s)" "$(fmt_median netcdf 4)" "$(fmt_median binary 4)" 0.8
}

step "report"
echo
report | tee "$CACHE/edr_peer.txt"
step "done in $(($(date +%s) - T_START)) s; table in $CACHE/edr_peer.txt, raw figures in $EDR_RAW and $FMT_RAW"
