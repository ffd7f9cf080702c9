#!/usr/bin/env bash
# Stage docker: build the Dockerfile and probe the image's entrypoint with
# the workplace's check (podman; needs ../shared/tools/docker-check.sh).
source "$(dirname "$0")/lib.sh"
CHECK=$ROOT/../shared/tools/docker-check.sh
if [ ! -x "$CHECK" ] || ! command -v podman >/dev/null; then
  echo "SKIPPED docker: needs podman and $CHECK"
  exit 0
fi
step "docker: build the image and probe it"
"$CHECK" "$ROOT"
