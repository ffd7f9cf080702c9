"""The xpublish-opendap peer of bench/dap_peer.sh, as an ASGI app for uvicorn.

    DAP_BENCH_ZARR=.cache/bench-dap/dap.zarr uvicorn --app-dir bench dap_xpublish_app:app

Opens the Zarr v3 store with xr.open_zarr's defaults (dask arrays, one dask chunk per
Zarr chunk), the way xpublish-opendap's README serves a dataset: opendap-protocol
then encodes a dask array in blocks of about 20 MB (its DASK_ENCODE_CHUNK_SIZE).
With `chunks=None` instead, xpublish-opendap's conversion (`DataArray.data`) would
load the whole 512 MiB variable into memory on the first request, which measures
an in-memory copy, not a read of the store.

Publishes it as one dataset with only the OpenDapPlugin: xpublish mounts the
plugin's dataset router (prefix "/opendap", routes ".dds", ".das", ".dods") at the
root, so the URLs are

    /opendap.dds   /opendap.das   /opendap.dods?t[a:b][c:d][e:f]
"""
import os

import xarray as xr
import xpublish
from xpublish_opendap import OpenDapPlugin

path = os.environ["DAP_BENCH_ZARR"]
ds = xr.open_zarr(path, consolidated=False)
app = xpublish.SingleDatasetRest(ds, plugins={"opendap": OpenDapPlugin()}).app
