#!/usr/bin/env bash
# Fuzz a running zarr-serve against its own OpenAPI document with Schemathesis.
#
#   tests/python/run_schemathesis.sh [BASE_URL]      # default $TEST_SERVER_URL or http://127.0.0.1:8080
#
# Needs the packages of tests/python/requirements.txt (schemathesis 4.x CLI) and python3.
# Exits non-zero when Schemathesis reports a failure, or when the run exceeds the time
# bound (exit 124).
#
# Knobs (environment):
#   SCHEMATHESIS       the schemathesis executable (default: found on PATH, else next to python3)
#   ST_MAX_EXAMPLES    test cases per operation and phase (default 200)
#   ST_TIME_LIMIT      hard wall-clock bound in seconds (default 420: a missing node on
#                      stations_http, a store that cannot list, costs object_store's retries)
#   ST_SEED            seed, for reproducible runs (default 20240601)
#   ST_WORKERS         concurrent workers (default 1: with more, CPython 3.11.7 can fail
#                      inside hypothesis with "AST constructor recursion depth mismatch")
#   ST_SKIP_PREFIXES   comma-separated node-path prefixes never offered as realistic
#                      values (default "corrupt/,v2_corrupt/,v2_types_corrupt/": the fixture
#                      arrays that must answer 502)
#   ST_REPORT_DIR      where the JUnit + NDJSON reports go (default: a temp dir, printed)
#   ST_SCHEMA          schema file (default: a copy of $BASE_URL/openapi.yaml); a local file lets you
#                      try an openapi.yaml edit before the server that embeds it is rebuilt
#
# Realistic values. Left alone, Schemathesis only ever asks for the example dataset
# "ocean" and the node "a/b", gets 404 everywhere and never reaches the decoder. So the
# script first walks the server's own node documents and writes a schemathesis.toml with
# dictionaries of real dataset names, node paths, store keys (zarr.json documents and the
# first chunk of every array) and NumPy selections; the generator draws from them most of
# the time and still generates arbitrary values the rest of the time.
#
# Checks. Every check Schemathesis has is enabled, except:
#   * positive_data_acceptance: it wants a 2xx for every request whose parameters match
#     the schema, but the schema cannot express which `ds`/`path`/`key`/`select` values
#     exist or are in bounds (any string is schema-valid), so 400/404/416/501 answers to
#     schema-valid input are what the contract requires, not defects.
#   * ignored_auth, object_level_authorization: datasets served here have no bearer
#     token (security is `[{}, {bearerAuth: []}]`, i.e. optional); these checks would
#     only report that an unprotected dataset answers without credentials.
#   * use_after_free, ensure_resource_availability: stateful checks for APIs that create
#     and delete resources; this API is read-only (GET/HEAD only).
# not_a_server_error keeps its default (any 5xx is a failure): the dictionaries leave out
# unreadable arrays (501) and ST_SKIP_PREFIXES (502), so a 5xx found here is a real bug.
set -euo pipefail

URL="${1:-${TEST_SERVER_URL:-http://127.0.0.1:8080}}"
URL="${URL%/}"
MAX_EXAMPLES="${ST_MAX_EXAMPLES:-200}"
TIME_LIMIT="${ST_TIME_LIMIT:-420}"
SEED="${ST_SEED:-20240601}"
WORKERS="${ST_WORKERS:-1}"
SKIP_PREFIXES="${ST_SKIP_PREFIXES:-corrupt/,v2_corrupt/,v2_types_corrupt/}"
SCHEMA="${ST_SCHEMA:-}"

if [[ -n "${SCHEMATHESIS:-}" ]]; then
    ST="$SCHEMATHESIS"
elif command -v schemathesis >/dev/null 2>&1; then
    ST="$(command -v schemathesis)"
elif [[ -x "$(dirname "$(command -v python3)")/schemathesis" ]]; then
    ST="$(dirname "$(command -v python3)")/schemathesis"
else
    echo "run_schemathesis.sh: schemathesis not found (pip install -r tests/python/requirements.txt, or set SCHEMATHESIS)" >&2
    exit 2
fi

# Under scripts/test-all.sh the run's work directory holds it (removed when the
# run ends); alone, it stays in $TMPDIR for its reports.
WORK="$(mktemp -d "${ZS_WORK:-${TMPDIR:-/tmp}}/zarr-serve-st.XXXXXX")"
REPORT_DIR="${ST_REPORT_DIR:-$WORK/report}"
mkdir -p "$REPORT_DIR"
REPORT_DIR="$(cd "$REPORT_DIR" && pwd)"
if [[ -n "$SCHEMA" && "$SCHEMA" != /* && "$SCHEMA" != *://* ]]; then
    SCHEMA="$PWD/$SCHEMA"
fi
CONFIG="$WORK/schemathesis.toml"

# The served document is saved and loaded as a file: loaded by URL, Schemathesis 4 leaves
# the operation that serves the schema (GET /openapi.yaml) out of the run.
if ! curl -fsS --max-time 10 "$URL/openapi.yaml" -o "$WORK/openapi.yaml"; then
    echo "run_schemathesis.sh: $URL/openapi.yaml is not reachable; start zarr-serve first" >&2
    exit 2
fi
SCHEMA="${SCHEMA:-$WORK/openapi.yaml}"

# ---- discover realistic values and write the config ---------------------------------------
python3 - "$URL" "$SKIP_PREFIXES" >"$CONFIG" <<'PY'
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

base, skip = sys.argv[1], [p for p in sys.argv[2].split(",") if p]
MAX_NODES = 400


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            return json.load(r)
    except (urllib.error.URLError, ValueError):
        return None


def q(s):
    return urllib.parse.quote(s, safe="")


datasets = [d["name"] for d in (get(f"{base}/v1/datasets") or {"datasets": []})["datasets"]]
nodes, keys = set(), {"zarr.json"}
# Datasets none of whose nodes is left out: a DAP4 dataset of a root group
# spans its whole hierarchy, so one with a corrupt array below it answers 502.
tainted = set()
for ds in datasets:
    queue, seen = [""], 0
    while queue and seen < MAX_NODES:
        path = queue.pop(0)
        seen += 1
        url = f"{base}/v1/datasets/{q(ds)}/nodes" + (f"/{urllib.parse.quote(path)}" if path else "")
        doc = get(url)
        if doc is None:
            continue
        if any((path + "/").startswith(p) for p in skip):
            tainted.add(ds)
            continue
        if path:
            nodes.add(path)
        if doc.get("metadata") is not None:
            keys.add(f"{path}/zarr.json" if path else "zarr.json")
        if doc.get("node_type") == "group":
            queue.extend(c["path"].lstrip("/") for c in doc.get("children", []))
        elif doc.get("node_type") == "array":
            if not doc.get("readable", False):
                nodes.discard(path)  # 501 by design; covered by the pytest suite
                continue
            enc = (doc.get("metadata") or {}).get("chunk_key_encoding") or {}
            sep = (enc.get("configuration") or {}).get("separator")
            nd = len(doc.get("shape") or [])
            if enc.get("name") == "v2":
                chunk = (sep or ".").join(["0"] * nd) or "0"
            else:
                chunk = (sep or "/").join(["c"] + ["0"] * nd)
            keys.add(f"{path}/{chunk}" if path else chunk)

selects = ["0", "-1", ":", "...", "::2", "::-1", "1:100:3", "0:2,0:3", "-3:", "5:0:-2",
           "...,0", "0,...", "[0:2, ...]", "[...]", "1:1", "-100:100", ":,::-2", "0,0", "0,0,0"]


def toml_list(values):
    return "[" + ", ".join(json.dumps(v) for v in sorted(values)) + "]"


print("# generated by tests/python/run_schemathesis.sh")
if datasets:
    print(f"[dictionaries.datasets]\nvalues = {toml_list(datasets)}\n")
if nodes:
    print(f"[dictionaries.nodes]\nvalues = {toml_list(nodes)}\n")
print(f"[dictionaries.keys]\nvalues = {toml_list(keys)}\n")
print(f"[dictionaries.selects]\nvalues = {toml_list(selects)}\n")
print("[parameters]")
if datasets:
    print('"path.ds" = { dictionary = "datasets", probability = 0.9 }')
if nodes:
    print('"path.path" = { dictionary = "nodes", probability = 0.8 }')
print('"path.key" = { dictionary = "keys", probability = 0.8 }')
print('"query.select" = { dictionary = "selects", probability = 0.6 }')
whole = [d for d in datasets if d not in tainted]
if whole:
    print(f"\n[dictionaries.whole_datasets]\nvalues = {toml_list(whole)}\n")
    print("[[operations]]")
    print('include-operation-id = ["dap4Root", "dap4Services"]')
    print('parameters = { "path.ds" = { dictionary = "whole_datasets", probability = 0.9 } }')
print(f"# {len(datasets)} datasets ({len(whole)} without left-out nodes), {len(nodes)} nodes, {len(keys)} keys",
      file=sys.stderr)
PY

echo "run_schemathesis.sh: $URL, schema $SCHEMA, config $CONFIG, reports in $REPORT_DIR" >&2

set +e
# Run inside $WORK: Schemathesis keeps a crash cache in ./.schemathesis, not in the repo.
cd "$WORK"
timeout --kill-after=10 "$TIME_LIMIT" \
    "$ST" --config-file "$CONFIG" run "$SCHEMA" \
    --url "$URL" \
    --checks all \
    --exclude-checks positive_data_acceptance,ignored_auth,object_level_authorization,use_after_free,ensure_resource_availability \
    --phases examples,coverage,fuzzing \
    --max-examples "$MAX_EXAMPLES" \
    --seed "$SEED" \
    --workers "$WORKERS" \
    --request-timeout 20 \
    --generation-database none \
    --continue-on-failure \
    --no-color \
    --report junit,ndjson --report-dir "$REPORT_DIR"
rc=$?
set -e
if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    echo "run_schemathesis.sh: schemathesis did not finish within ${TIME_LIMIT}s" >&2
    exit 124
fi
exit "$rc"
