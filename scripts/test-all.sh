#!/usr/bin/env bash
# Every test of zarr-serve, from a fresh clone: the README's test command
# and what CI runs (.ci/run). Installs what it lacks first
# (scripts/ci/setup.sh), then runs the stages in order, each a script in
# scripts/ci/ that a developer can also run alone:
#
#   scripts/test-all.sh                 # setup, then every stage
#   scripts/test-all.sh lint unit       # just these stages
#   SKIP_SETUP=1 scripts/test-all.sh unit
#
# Stages: lint unit interop load s3 azure gcs fuzz, and docker (podman; run
# when named, or in the full run with ZS_DOCKER=1).
set -euo pipefail
cd "$(dirname "$0")/.."
ALL=(lint unit interop load s3 azure gcs fuzz)
[ "${ZS_DOCKER:-}" = 1 ] && ALL+=(docker)
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=("${ALL[@]}")
for stage in "${stages[@]}"; do
  [ -x "scripts/ci/$stage.sh" ] || { echo "unknown stage '$stage' (stages: ${ALL[*]} docker)"; exit 2; }
done
# lint and unit need only cargo; every other stage needs the setup.
needs_setup=
for stage in "${stages[@]}"; do
  case $stage in lint | unit) ;; *) needs_setup=1 ;; esac
done
if [ -n "$needs_setup" ] && [ "${SKIP_SETUP:-}" != 1 ]; then
  printf '\n==> setup: what the tests need\n'
  scripts/ci/setup.sh
fi
# One work directory per run, shared by its stages (fixtures generated once).
if [ -z "${ZS_WORK:-}" ]; then
  ZS_WORK=$(mktemp -d)
  trap 'rm -rf "$ZS_WORK"' EXIT
fi
export ZS_WORK
mkdir -p "$ZS_WORK"
# Free disk, printed with each stage: a linker that runs out of it dies of
# SIGBUS rather than saying so.
disk_free() { df -h --output=avail . "$ZS_WORK" | awk 'NR == 2 { a = $1 } NR == 3 { t = $1 } END { printf "free: %s here, %s in the work directory", a, t }'; }
printf '==> %s\n' "$(disk_free)"
passed=0
started=$SECONDS
for stage in "${stages[@]}"; do
  t=$SECONDS
  # A failing stage ends with the logs of the services it ran; its own
  # reason comes again after them, so the end of the output names it.
  if ! "scripts/ci/$stage.sh" 2>&1 | tee "$ZS_WORK/stage.out"; then
    printf '\n==> stage %s FAILED after %d s; its last lines before the service logs:\n' "$stage" $((SECONDS - t))
    sed '/^--- last lines of /,$d' "$ZS_WORK/stage.out" | tail -60
    printf '==> stage %s FAILED (%d stages passed before it)\n' "$stage" "$passed"
    exit 1
  fi
  passed=$((passed + 1))
  printf '==> stage %s passed in %d s (%s)\n' "$stage" $((SECONDS - t)) "$(disk_free)"
done
printf '\n==> all %d stages passed in %d s: %s\n' "$passed" $((SECONDS - started)) "${stages[*]}"
