//! Pictures as PNG, for every route that draws (region `format=png`, map
//! tiles, WMS maps and legends): drawn and encoded in one place, on the
//! async workers when small and off them when large; and the answer for a
//! tile of a tile matrix set, which the tile route and WMTS `GetTile` both
//! give (neither calls the other).

use axum::http::{HeaderMap, Method};
use axum::response::Response;
use bytes::Bytes;

use super::query::TileQuery;
use super::respond::{Answer, Checked};
use super::{ApiError, AppState};
use crate::encode::png::png_picture;
use crate::engine::geo::{Sampling, TileMatrixSet, TILE_SIZE};
use crate::engine::render::Picture;
use crate::engine::{Error, Raster};
use crate::identity::Caller;

/// Pixels drawn and encoded on an async worker; larger pictures go to a
/// blocking thread.
const INLINE_PIXELS: u64 = 512 * 512;

/// The PNG of the `width` x `height` picture `draw` makes.
pub(crate) async fn png(
    width: u32,
    height: u32,
    draw: impl FnOnce() -> Result<Picture, Error> + Send + 'static,
) -> Result<Bytes, Error> {
    let make = move || -> Result<Bytes, Error> {
        let picture = draw()?;
        let png = png_picture(width, height, &picture).map_err(|e| Error::Internal(format!("PNG encoding: {e}")))?;
        Ok(Bytes::from(png))
    };
    if u64::from(width) * u64::from(height) <= INLINE_PIXELS {
        return make();
    }
    tokio::task::spawn_blocking(make)
        .await
        .map_err(|e| Error::Internal(format!("drawing failed: {e}")))?
}

/// The PNG tile `(t, z, row, col)` of dataset `ds` that `request` asks
/// for (a position inside the set), through the response pipeline: `key`
/// names the request's parameters in the ETag.
pub(super) async fn tile(
    state: &AppState,
    caller: &Caller,
    ds: &str,
    (t, z, row, col): (TileMatrixSet, u8, u64, u64),
    request: &TileQuery,
    key: &str,
    (method, headers): (&Method, &HeaderMap),
) -> Result<Response, ApiError> {
    let dataset = &state.dataset(ds, caller).await?;
    let var = dataset.geo_variable(&request.variable).await?;
    request.render.resolve()?;
    // The pyramid level (if any) whose cells are no larger than a pixel.
    let level = dataset.pyramid_level(&var, t.pixel_degrees(z)).await?;
    let sampling = Sampling::new(&level.grid, &t.column_longitudes(z, col), &t.row_latitudes(z, row));
    let plan = match sampling.is_empty() {
        true => None,
        false => Some(dataset.plan_raster(&level, &sampling, &request.labels).await?),
    };
    let mut described = Answer::new(state, dataset, "tile", "image/png")
        .key(format!("{}/{z}/{row}/{col}", t.id()))
        .key(key)
        .bytes(u64::from(TILE_SIZE * TILE_SIZE) * 4);
    if let Some(plan) = &plan {
        let decoded = plan.decoded_bytes();
        let deeper = (decoded as f64 / state.tile_read_limit_bytes as f64).log(4.0).ceil() as u8;
        let hint = format!("zoom {} or deeper decodes less", (z + deeper.max(1)).min(t.max_zoom()));
        described = described.plan(plan).decodes(decoded, hint);
    }
    // Refused before the default colour range is worked out (it may read).
    described.refuse_oversize()?;
    let render = dataset.rendering(&var, &request.labels, &request.render).await?;
    let described = described.key(format!("{:?}", render.rescale()));
    let ready = match described.check(method, headers).await? {
        Checked::Answered(response) => return Ok(response),
        Checked::Read(ready) => ready,
    };
    let raster = match &plan {
        None => Raster::off_grid((TILE_SIZE * TILE_SIZE) as usize),
        Some(plan) => {
            dataset
                .read_raster(&level, &sampling, plan, Some(ready.versions()))
                .await?
        }
    };
    let draw = move || Ok(render.picture_of_cells(&raster.cells, &raster.pixels));
    let png = png(TILE_SIZE, TILE_SIZE, draw).await?;
    Ok(ready.whole(png))
}
