#!/usr/bin/env bash
# Stage interop: fixtures freshly written by zarr-python and tensorstore
# (verified by both), the Rust suites on them, then zarr-python, numpy.load
# schemathesis, the explorer in headless Chromium, the map clients (GDAL,
# Leaflet, OpenLayers, QGIS), the DAP2 and DAP4 clients (ncdump, netCDF4,
# xarray, pydap), the file clients (pandas, netCDF4, xarray, rasterio) against a
# running server, and identity against a real OpenID provider.
source "$(dirname "$0")/lib.sh"
step "interop: fresh fixtures from zarr-python and tensorstore, the Rust suites on them"
ensure_fixtures
cargo test "${CARGO_PROFILE[@]}" --test storage --test interop --test http --test dap2 --test dap4 --test formats --test edr --test writes
step "interop: the service over HTTP: zarr-python through the passthrough, numpy.load, schemathesis"
ensure_server_binary
start_server "$ZARR_FIXTURES/data.zarr"
"$PY" -m pytest -q tests/python
echo "explorer screenshot (headless Chromium): ${ZS_ARTIFACTS:-$ROOT/artifacts}/explorer-array.png"
echo "map clients' pictures (GDAL, Leaflet, OpenLayers, QGIS): ${ZS_ARTIFACTS:-$ROOT/artifacts}/map-*.png"
step "interop: OPeNDAP DAP2 and DAP4 (ncdump, netCDF4, xarray, pydap) and CSV/NetCDF/GeoTIFF downloads (pandas, netCDF4, xarray, ncdump, rasterio)"
"${ZS_VENV_DAP:-$ROOT/.venv-dap}/bin/python" -m pytest -q -p no:cacheprovider tests/dap
step "interop: Icechunk repositories and kerchunk references written by icechunk-python, xarray, netCDF4 and kerchunk"
ZS_SERVER_BIN=$SERVER_BIN "${ZS_VENV_DAP:-$ROOT/.venv-dap}/bin/python" -m pytest -q -p no:cacheprovider tests/icechunk
step "interop: identity against a real OpenID provider (node-oidc-provider): grants, bad tokens, rotation, an issuer down, 429s"
ZS_SERVER_BIN=$SERVER_BIN OIDC_PROVIDER_MODULES=$ROOT/.cache/oidc/node_modules "$PY" -m pytest -q -p no:cacheprovider tests/identity
step "interop: writes (api.md 4.2) read back by zarr-python 3, tensorstore and zarr-python 2.18; mixed writers, bad input, 16 writers in one shard, kill -9 mid-write"
ZS_SERVER_BIN=$SERVER_BIN "$PY" -m pytest -q -p no:cacheprovider tests/writes
ZS_SERVER_BIN=$SERVER_BIN "${ZS_VENV_ZARR2:-$ROOT/.venv-zarr2}/bin/python" -m pytest -q -p no:cacheprovider tests/writes/test_zarr2.py
step "interop: the Zarr v2 view read by zarr-python 2.18 and xarray"
"${ZS_VENV_ZARR2:-$ROOT/.venv-zarr2}/bin/python" -m pytest -q tests/python/test_v2_view.py tests/python/test_codecs_http.py
PATH=$VENV/bin:$PATH bash tests/python/run_schemathesis.sh "$TEST_SERVER_URL"
step "interop: openapi.yaml is valid OpenAPI 3.1 (openapi-spec-validator)"
"${ZS_VENV_OPENAPI:-$ROOT/.venv-openapi}/bin/python" -m openapi_spec_validator openapi.yaml
step "interop: a client generated from openapi.yaml calls GET and POST"
bash tests/python/run_openapi_client.sh "$TEST_SERVER_URL"
stop_server
