"""The xpublish-edr peer of bench/edr_peer.sh, as an ASGI app for uvicorn.

    EDR_BENCH_ZARR=.cache/bench-edr/edr.zarr uvicorn --app-dir bench edr_xpublish_app:app

Opens the Zarr v3 store as xpublish-edr's README does (`xr.open_zarr`) and
publishes it as one dataset with only the CfEdrPlugin. EDR_BENCH_XP_CHUNKS picks
how: "dask" (the default, xr.open_zarr's defaults: one dask chunk per Zarr chunk)
or "none" (`chunks=None`: xarray's lazy backend arrays, so xpublish-edr's
`ds.load_async()` reads the selected chunks through zarr-python's async API with
no dask graph); bench/edr_peer.sh uses whichever it is told (EDR_XP_CHUNKS).
xpublish mounts the plugin's dataset router (prefix "/edr") at the root:

    /edr/position?coords=POINT(x y)&parameter-name=tas
    /edr/area?coords=POLYGON((...))&parameter-name=tas

both CoverageJSON (xpublish-edr's `to_cf_covjson`) without `f`.
"""
import os

import xarray as xr
import xpublish
from xpublish_edr import CfEdrPlugin

path = os.environ["EDR_BENCH_ZARR"]
mode = os.environ.get("EDR_BENCH_XP_CHUNKS", "dask")
if mode == "none":
    ds = xr.open_zarr(path, consolidated=False, chunks=None)
else:
    ds = xr.open_zarr(path, consolidated=False)
app = xpublish.SingleDatasetRest(ds, plugins={"edr": CfEdrPlugin()}).app
