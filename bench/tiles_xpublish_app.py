"""The xpublish-tiles peer of bench/tiles_peer.py, as an ASGI app for uvicorn.

    TILES_BENCH_ZARR=bench-data/map.zarr uvicorn --app-dir bench tiles_xpublish_app:app

Opens the Zarr v3 store lazily with xarray (no dask: `chunks=None`, as
xpublish-tiles' own CLI does for `zarr+file://`) and publishes it as one dataset
with only the xpublish-tiles TilesPlugin. Tiles:

    /tiles/WebMercatorQuad/{z}/{y}/{x}?variables=t2m&style=raster/viridis
        &colorscalerange=LO,HI&width=256&height=256
"""
import os

import xarray as xr
import xpublish
from xpublish_tiles.xpublish.tiles.plugin import TilesPlugin

path = os.environ["TILES_BENCH_ZARR"]
ds = xr.open_zarr(path, consolidated=False, chunks=None, decode_coords="all")
ds.attrs["_xpublish_id"] = f"zarr+file:{path}"
app = xpublish.SingleDatasetRest(ds, plugins={"tiles": TilesPlugin()}).app
