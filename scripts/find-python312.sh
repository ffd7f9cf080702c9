#!/usr/bin/env bash
# Print the path of a Python 3.12 interpreter that runs, or nothing.
# pyenv's python3.12 shim exists even when 3.12 is not a selected pyenv
# version, and then refuses to run: each candidate is tried, not just found.
set -uo pipefail
for c in ${PYTHON312:-} "$(command -v python3.12 || true)" \
         $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python 2>/dev/null | sort -V | tail -1); do
  [ -n "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null \
    && { echo "$c"; exit 0; }
done
exit 0
