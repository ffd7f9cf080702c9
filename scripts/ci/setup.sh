#!/usr/bin/env bash
# Install what the tests need and the machine lacks: Debian packages (curl,
# python3-venv, wrk, nginx-light, chromium and chromium-driver, gdal-bin,
# python3-qgis and netcdf-bin; with sudo when not root), the pinned Python
# packages into .venv-test (zarr-python 2.18 into .venv-zarr2, openapi-python-client
# into .venv-openapi, the DAP2 clients into .venv-dap with Python 3.12), Azurite
# (npm, pinned) into .cache/azurite, Leaflet and OpenLayers (npm, pinned) into
# .cache/mapjs, node-oidc-provider (npm, pinned) into .cache/oidc and cargo-fuzz. Safe to run again: it skips what is there.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
export PATH=$PATH:/usr/sbin
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
pkgs=()
command -v curl >/dev/null || pkgs+=(curl)
python3 -c 'import venv, ensurepip' 2>/dev/null || pkgs+=(python3-venv)
command -v wrk >/dev/null || pkgs+=(wrk)
command -v nginx >/dev/null || pkgs+=(nginx-light)
# The explorer's browser tests: Debian's Chromium and its WebDriver.
command -v chromium >/dev/null || pkgs+=(chromium)
command -v chromedriver >/dev/null || pkgs+=(chromium-driver)
# The map clients (test_map_clients.py): GDAL's WMS, TMS and WMTS drivers, and QGIS
# for Debian's own Python (about 190 MB to fetch, 900 MB installed).
command -v gdal_translate >/dev/null || pkgs+=(gdal-bin)
# The DAP2 clients (tests/dap): netCDF-C's ncdump.
command -v ncdump >/dev/null || pkgs+=(netcdf-bin)
/usr/bin/python3 -c 'import qgis.core' 2>/dev/null || pkgs+=(python3-qgis)
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "installing ${pkgs[*]}"
  # Keep the packaged nginx service from starting on port 80 (the tests run their own).
  [ -e /usr/sbin/policy-rc.d ] || printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

VENV=${ZS_VENV:-$ROOT/.venv-test}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --disable-pip-version-check \
  -r tests/fixtures/requirements.txt -r tests/python/requirements.txt -r tests/s3/requirements.txt \
  -r tests/azure/requirements.txt -r tests/gcs/requirements.txt -r tests/identity/requirements.txt

# zarr-python 2.18 for the Zarr v2 view tests, in a venv of its own.
VENV2=${ZS_VENV_ZARR2:-$ROOT/.venv-zarr2}
[ -x "$VENV2/bin/python" ] || python3 -m venv "$VENV2"
"$VENV2/bin/pip" install -q --disable-pip-version-check -r tests/python/requirements-zarr2.txt

# The DAP2 clients (netCDF4, pydap, xarray) in Python 3.12: pydap 3.5.11 needs it.
VENV_DAP=${ZS_VENV_DAP:-$ROOT/.venv-dap}
if [ ! -x "$VENV_DAP/bin/python" ]; then
  PY312=$(scripts/find-python312.sh)
  [ -n "$PY312" ] || { echo "need Python 3.12 for the DAP2 clients (set PYTHON312)"; exit 1; }
  "$PY312" -m venv "$VENV_DAP"
fi
"$VENV_DAP/bin/pip" install -q --disable-pip-version-check -r tests/dap/requirements.txt -r tests/icechunk/requirements.txt

# openapi-python-client, to check that a generated client calls the API.
VENV3=${ZS_VENV_OPENAPI:-$ROOT/.venv-openapi}
[ -x "$VENV3/bin/python" ] || python3 -m venv "$VENV3"
"$VENV3/bin/pip" install -q --disable-pip-version-check -r tests/python/requirements-openapi.txt

if command -v npm >/dev/null; then
  AZ_DIR=$ROOT/.cache/azurite
  if [ ! -x "$AZ_DIR/node_modules/.bin/azurite-blob" ]; then
    mkdir -p "$AZ_DIR"
    (cd "$AZ_DIR" && npm install --silent --no-audit --no-fund --no-save azurite@3.37.0 >/dev/null)
  fi
  # A real OpenID provider for the identity tests (tests/identity).
  OIDC_DIR=$ROOT/.cache/oidc
  if [ ! -d "$OIDC_DIR/node_modules/oidc-provider" ]; then
    mkdir -p "$OIDC_DIR"
    (cd "$OIDC_DIR" && npm install --silent --no-audit --no-fund --no-save oidc-provider@9.13.3 >/dev/null)
  fi
  # The web map pages of test_map_clients.py load these from a local server.
  MAPJS_DIR=$ROOT/.cache/mapjs
  MAPJS_PKGS=(leaflet@1.9.4 ol@10.11.0)
  if [ "$(cat "$MAPJS_DIR/installed" 2>/dev/null)" != "${MAPJS_PKGS[*]}" ]; then
    mkdir -p "$MAPJS_DIR"
    npm install --prefix "$MAPJS_DIR" --silent --no-audit --no-fund --no-save "${MAPJS_PKGS[@]}" >/dev/null
    echo "${MAPJS_PKGS[*]}" >"$MAPJS_DIR/installed"
  fi
else
  echo "npm not found: the azure stage will be skipped, the web map tests fail in CI (skip elsewhere)"
fi

command -v cargo-fuzz >/dev/null || cargo install --locked --quiet cargo-fuzz@0.13.1
echo "setup done"
