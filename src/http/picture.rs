//! Pictures as PNG, for every route that draws (region `format=png`, map
//! tiles, WMS maps and legends): drawn and encoded in one place, on the
//! async workers when small and off them when large.

use bytes::Bytes;

use crate::encode::png::png_picture;
use crate::engine::render::Picture;
use crate::engine::Error;

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
