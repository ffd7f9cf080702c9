"""The titiler-xarray peer of bench/tiles_peer.py, as an ASGI app for uvicorn.

    TILES_BENCH_ZARR=bench-data/map.zarr uvicorn --app-dir bench tiles_titiler_app:app

titiler-xarray's own TilerFactory with its default Reader (obstore's local store,
zarr-python 3 and xarray, no dask; `open_zarr` keeps the opened dataset for the life
of each worker). Only the dataset path is fixed here, from the environment, instead
of a `url` query parameter. Tiles (x = column, y = row; `.png` asks for PNG, which
titiler would otherwise send as JPEG for tiles without transparent pixels):

    /tiles/WebMercatorQuad/{z}/{x}/{y}.png?variable=t2m&sel=time=<a step>
        &colormap_name=viridis&rescale=LO,HI&tilesize=256
"""
import os

from fastapi import FastAPI
from titiler.core.errors import DEFAULT_STATUS_CODES, add_exception_handlers
from titiler.xarray.factory import TilerFactory

path = os.path.abspath(os.environ["TILES_BENCH_ZARR"])

app = FastAPI()
tiler = TilerFactory(path_dependency=lambda: path, add_viewer=False, add_part=False)
app.include_router(tiler.router)
add_exception_handlers(app, DEFAULT_STATUS_CODES)


@app.get("/healthz")
def healthz():
    return {"ok": True}
