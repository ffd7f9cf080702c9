//! Rendering a 2-D result as an RGBA raster (`format=png`): each drawn
//! element is rescaled from `[LO, HI]` to one of a colormap's 256 colours;
//! NaN and `nodata` elements are transparent.

mod colormap;
mod default_range;

pub use colormap::Colormap;

use crate::engine::error::{Error, Result};
use crate::engine::format::data_type::DataType;
use crate::engine::format::values::{is_real, real_values};

/// A drawn picture: palette indices (one byte a pixel, at most 256 RGBA
/// colours), or RGBA pixels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Picture {
    /// Indices into `palette`.
    Indexed {
        /// One index a pixel.
        indices: Vec<u8>,
        /// RGBA colours.
        palette: Vec<[u8; 4]>,
    },
    /// Four bytes a pixel.
    Rgba(Vec<u8>),
}

impl Picture {
    /// The RGBA pixels the picture shows.
    pub fn to_rgba(&self) -> Vec<u8> {
        match self {
            Picture::Rgba(rgba) => rgba.clone(),
            Picture::Indexed { indices, palette } => indices.iter().flat_map(|&i| palette[usize::from(i)]).collect(),
        }
    }

    /// Every transparent pixel in `colour` instead (an opaque map's background).
    pub fn fill_transparent(&mut self, colour: [u8; 4]) {
        match self {
            Picture::Rgba(rgba) => {
                for pixel in rgba.chunks_exact_mut(4).filter(|p| p[3] == 0) {
                    pixel.copy_from_slice(&colour);
                }
            }
            Picture::Indexed { palette, .. } => {
                for entry in palette.iter_mut().filter(|p| p[3] == 0) {
                    *entry = colour;
                }
            }
        }
    }
}

/// The largest side of a rendered picture, in pixels.
pub const MAX_SIDE: u64 = 16_384;

/// `rescale`, `colormap` and `nodata` as the request gave them.
#[derive(Debug, Default, Clone)]
pub struct RenderRequest {
    /// `LO,HI`.
    pub rescale: Option<String>,
    /// A colormap name.
    pub colormap: Option<String>,
    /// A number.
    pub nodata: Option<String>,
}

/// A checked [`RenderRequest`].
#[derive(Debug, Clone)]
pub struct Render {
    range: Option<(f64, f64)>,
    colormap: &'static Colormap,
    nodata: Option<f64>,
}

fn invalid(message: String) -> Error {
    Error::InvalidRequest(message)
}

impl RenderRequest {
    /// Whether any rendering parameter was given.
    pub fn is_empty(&self) -> bool {
        self.rescale.is_none() && self.colormap.is_none() && self.nodata.is_none()
    }

    /// The parameters' names and values, for ETags.
    pub fn key(&self) -> String {
        let part = |v: &Option<String>| v.as_deref().unwrap_or("-").to_string();
        format!(
            "{}|{}|{}",
            part(&self.rescale),
            part(&self.colormap),
            part(&self.nodata)
        )
    }

    /// Check the parameters.
    pub fn resolve(&self) -> Result<Render> {
        let range = self.rescale.as_deref().map(parse_rescale).transpose()?;
        let colormap = match self.colormap.as_deref() {
            None => Colormap::named("gray").expect("gray is built in"),
            Some(name) => Colormap::named(name).ok_or_else(|| {
                invalid(format!(
                    "colormap '{name}' is not known: use one of {}",
                    Colormap::names().join(", ")
                ))
            })?,
        };
        let nodata = match self.nodata.as_deref() {
            None => None,
            Some(text) => Some(
                text.trim()
                    .parse::<f64>()
                    .map_err(|_| invalid(format!("nodata '{text}' is not a number")))?,
            ),
        };
        Ok(Render {
            range,
            colormap,
            nodata,
        })
    }
}

fn parse_rescale(text: &str) -> Result<(f64, f64)> {
    let bad = || invalid(format!("rescale '{text}' is not LO,HI (two finite numbers)"));
    let (lo, hi) = text.split_once(',').ok_or_else(bad)?;
    let number = |s: &str| s.trim().parse::<f64>().ok().filter(|v| v.is_finite());
    let (lo, hi) = (number(lo).ok_or_else(bad)?, number(hi).ok_or_else(bad)?);
    if hi < lo {
        return Err(invalid(format!("rescale '{text}': HI is less than LO")));
    }
    Ok((lo, hi))
}

/// Whether a result of `data_type` and `shape` can be drawn: 2-D, of a
/// real type (integer, float or bool).
pub fn check(data_type: DataType, shape: &[u64]) -> Result<()> {
    if !is_real(data_type) {
        return Err(invalid(format!(
            "format=png draws integer, float or bool data, not {}",
            data_type.name()
        )));
    }
    if shape.len() != 2 {
        return Err(invalid(format!(
            "format=png draws a 2-D result; this result has {} dimensions (select an index in the others)",
            shape.len()
        )));
    }
    Ok(())
}

impl Render {
    /// The `rescale` range, when given.
    pub fn rescale(&self) -> Option<(f64, f64)> {
        self.range
    }

    /// The RGBA pixels of `data`, C-order elements of `data_type` (row by
    /// row, first dimension top to bottom).
    pub fn rgba(&self, data_type: DataType, data: &[u8]) -> Result<Vec<u8>> {
        if matches!(data_type, DataType::Bool | DataType::Int8 | DataType::UInt8) {
            return Ok(self.rgba_bytes(data_type, data));
        }
        let values = real_values(data_type, data)?;
        let nodata = self.nodata.map(|v| in_type(data_type, v));
        let (lo, hi) = self.range(values.iter().copied(), nodata);
        let palette = self.palette();
        let mut out = vec![0u8; values.len() * 4];
        for (pixel, &v) in out.chunks_exact_mut(4).zip(&values) {
            if drawn(v, nodata) {
                pixel.copy_from_slice(&palette[usize::from(index(v, lo, hi))]);
            }
        }
        Ok(out)
    }

    /// The picture of `data` with one byte a pixel: indices into a palette
    /// of at most 256 RGBA colours, which decodes to exactly what
    /// [`Render::rgba`] draws. A picture that uses all 256 colours and has
    /// transparent pixels too needs 257 entries: then RGBA.
    pub fn picture(&self, data_type: DataType, data: &[u8]) -> Result<Picture> {
        if matches!(data_type, DataType::Bool | DataType::Int8 | DataType::UInt8) {
            return Ok(self.byte_picture(data_type, data));
        }
        let values = real_values(data_type, data)?;
        let nodata = self.nodata.map(|v| in_type(data_type, v));
        Ok(self.paint(self.codes(&values, nodata)))
    }

    /// One-byte types: each byte value's index is found once, then every
    /// pixel is one table lookup.
    fn byte_picture(&self, data_type: DataType, data: &[u8]) -> Picture {
        let by_byte = self.byte_codes(data_type, data);
        // Which colours are used matters only when transparency needs a
        // colour no pixel uses.
        let used = match by_byte.contains(&CLEAR) {
            false => [false; 257],
            true => {
                let mut present = [false; 256];
                for &b in data {
                    present[usize::from(b)] = true;
                }
                used_codes((0..256).filter(|&b| present[b]).map(|b| by_byte[b]))
            }
        };
        self.looked_up(&by_byte, &used, data.iter().map(|&b| usize::from(b)))
    }

    /// The picture of a raster whose pixel `i` shows `cells[pixels[i]]`
    /// (`u32::MAX`: no value), as [`Render::picture`] would draw those
    /// values: each cell is coloured once, then every pixel is a lookup.
    /// The palette is chosen from the cells' colours (every cell is some
    /// pixel's), so the transparent slot may differ from `picture`'s; the
    /// RGBA is the same.
    pub fn picture_of_cells(&self, cells: &[f64], pixels: &[u32]) -> Picture {
        let mut codes = self.codes(cells, self.nodata);
        let mut used = used_codes(codes.iter().copied());
        // A pixel off the grid is transparent: one more code, at the end.
        let off_grid = codes.len();
        codes.push(CLEAR);
        used[usize::from(CLEAR)] |= pixels.iter().any(|&p| p as usize >= off_grid);
        self.looked_up(&codes, &used, pixels.iter().map(|&p| (p as usize).min(off_grid)))
    }

    /// The picture whose pixels show the codes `table[key]`, one key a
    /// pixel, `used` marking the codes they use: each table entry's index
    /// is found once.
    fn looked_up(&self, table: &[u16], used: &[bool; 257], keys: impl Iterator<Item = usize>) -> Picture {
        let Some((palette, clear)) = self.palette_for(used) else {
            return self.paint(keys.map(|k| table[k]).collect());
        };
        let index: Vec<u8> = table
            .iter()
            .map(|&c| if c == CLEAR { clear } else { c as u8 })
            .collect();
        Picture::Indexed {
            indices: keys.map(|k| index[k]).collect(),
            palette,
        }
    }

    /// The palette code of each value ([`CLEAR`] where it is not drawn).
    fn codes(&self, values: &[f64], nodata: Option<f64>) -> Vec<u16> {
        let (lo, hi) = self.range(values.iter().copied(), nodata);
        values
            .iter()
            .map(|&v| match drawn(v, nodata) {
                true => u16::from(index(v, lo, hi)),
                false => CLEAR,
            })
            .collect()
    }

    /// The picture of one palette code a pixel: indexed, or RGBA when all
    /// 256 colours and transparency are used (257 entries).
    fn paint(&self, codes: Vec<u16>) -> Picture {
        let Some((palette, clear)) = self.palette_for(&used_codes(codes.iter().copied())) else {
            let colours = self.palette();
            let rgba = codes
                .iter()
                .flat_map(|&c| colours.get(usize::from(c)).copied().unwrap_or([0; 4]))
                .collect();
            return Picture::Rgba(rgba);
        };
        let indices = codes
            .into_iter()
            .map(|c| if c == CLEAR { clear } else { c as u8 })
            .collect();
        Picture::Indexed { indices, palette }
    }

    /// The palette for pictures using the codes marked in `used`, and the
    /// index transparency takes: the first colour unused, when [`CLEAR`]
    /// is used. `None` when all 257 are (then only RGBA will do).
    fn palette_for(&self, used: &[bool; 257]) -> Option<(Vec<[u8; 4]>, u8)> {
        let mut colours = self.palette().to_vec();
        if !used[usize::from(CLEAR)] {
            return Some((colours, 0));
        }
        let slot = used[..256].iter().position(|u| !u)?;
        colours[slot] = [0, 0, 0, 0];
        Some((colours, slot as u8))
    }

    /// The palette code of each byte value (256: transparent), for one-byte types.
    fn byte_codes(&self, data_type: DataType, data: &[u8]) -> [u16; 256] {
        let value = |b: u8| byte_value(data_type, b);
        let nodata = self.nodata;
        let (lo, hi) = match (self.range, nodata) {
            (Some(range), _) => range,
            // Every element is drawn: the range is that of the extremes.
            (None, None) => self.range(byte_extremes(data_type, data).into_iter().flatten().map(value), None),
            (None, Some(_)) => {
                let mut present = [false; 256];
                for &b in data {
                    present[usize::from(b)] = true;
                }
                let present_values = (0..=255u8).filter(|b| present[usize::from(*b)]).map(value);
                self.range(present_values, nodata)
            }
        };
        std::array::from_fn(|b| {
            let v = value(b as u8);
            if drawn(v, nodata) {
                u16::from(index(v, lo, hi))
            } else {
                CLEAR
            }
        })
    }

    /// One-byte types (bool, int8, uint8): each of the 256 byte values is
    /// coloured once, then every pixel is a table lookup.
    fn rgba_bytes(&self, data_type: DataType, data: &[u8]) -> Vec<u8> {
        let palette = self.palette();
        let by_byte: [[u8; 4]; 256] = self
            .byte_codes(data_type, data)
            .map(|code| palette.get(usize::from(code)).copied().unwrap_or([0; 4]));
        let by_byte = by_byte.map(u32::from_ne_bytes);
        let mut out = vec![0u8; data.len() * 4];
        // Eight pixels a step: one 32-byte store the compiler can keep in registers.
        let (blocks, rest) = data.split_at(data.len() - data.len() % 8);
        for (dst, src) in out.chunks_exact_mut(32).zip(blocks.chunks_exact(8)) {
            let pixels: [u32; 8] = std::array::from_fn(|i| by_byte[usize::from(src[i])]);
            for (d, p) in dst.chunks_exact_mut(4).zip(pixels) {
                d.copy_from_slice(&p.to_ne_bytes());
            }
        }
        let tail = blocks.len() * 4;
        for (d, &b) in out[tail..].chunks_exact_mut(4).zip(rest) {
            d.copy_from_slice(&by_byte[usize::from(b)].to_ne_bytes());
        }
        out
    }

    /// `rescale`, or by default the range of the finite elements drawn
    /// (infinities are drawn at its ends).
    fn range(&self, values: impl Iterator<Item = f64>, nodata: Option<f64>) -> (f64, f64) {
        match self.range {
            Some(range) => range,
            None => values
                .filter(|&v| drawn(v, nodata) && v.is_finite())
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v))),
        }
    }

    /// The colormap as opaque RGBA.
    fn palette(&self) -> [[u8; 4]; 256] {
        std::array::from_fn(|i| {
            let [r, g, b] = self.colormap.color(i as u8);
            [r, g, b, 255]
        })
    }
}

/// The value of a one-byte element (bool, int8 or uint8).
fn byte_value(data_type: DataType, b: u8) -> f64 {
    match data_type {
        DataType::Bool => f64::from(u8::from(b != 0)),
        DataType::Int8 => f64::from(b as i8),
        _ => f64::from(b),
    }
}

/// The bytes of the smallest and the largest element of one-byte `data`
/// (bool, int8 or uint8) in its type's order; `None` when it is empty.
fn byte_extremes(data_type: DataType, data: &[u8]) -> Option<[u8; 2]> {
    if data.is_empty() {
        return None;
    }
    // One fold per extreme, over values (not `min()` over references): these vectorize.
    Some(if data_type == DataType::Int8 {
        let lo = data.iter().fold(i8::MAX, |lo, &b| lo.min(b as i8));
        let hi = data.iter().fold(i8::MIN, |hi, &b| hi.max(b as i8));
        [lo as u8, hi as u8]
    } else {
        // Bool is ordered as its bytes are: 0 is false, any other is true.
        let lo = data.iter().fold(u8::MAX, |lo, &b| lo.min(b));
        let hi = data.iter().fold(u8::MIN, |hi, &b| hi.max(b));
        [lo, hi]
    })
}

/// The palette code of a pixel not drawn (transparent).
const CLEAR: u16 = 256;

/// Which of the 257 palette codes occur.
fn used_codes(codes: impl Iterator<Item = u16>) -> [bool; 257] {
    let mut used = [false; 257];
    for c in codes {
        used[usize::from(c)] = true;
    }
    used
}

/// Whether an element is drawn: neither NaN nor `nodata` (compared in the
/// element's own type, so that a float32 -9999.9 matches `nodata=-9999.9`).
fn drawn(v: f64, nodata: Option<f64>) -> bool {
    !v.is_nan() && nodata != Some(v)
}

/// `v` as an element of `data_type` would hold it, back as `f64`.
fn in_type(data_type: DataType, v: f64) -> f64 {
    match data_type {
        DataType::Float32 => v as f32 as f64,
        DataType::Float16 => half::f16::from_f64(v).to_f64(),
        _ => v,
    }
}

/// `min(255, floor(256 * clamp((v - lo) / (hi - lo), 0, 1)))`, 0 when `hi == lo`.
fn index(v: f64, lo: f64, hi: f64) -> u8 {
    if hi <= lo {
        return 0;
    }
    let t = match hi - lo {
        // Bounds near ±f64::MAX: their difference overflows, halves do not.
        span if span.is_infinite() => (v / 2.0 - lo / 2.0) / (hi / 2.0 - lo / 2.0),
        span => (v - lo) / span,
    };
    // Infinite values or bounds: ∞/∞ is NaN; place it by which side it is on.
    let t = if t.is_nan() { f64::from(u8::from(v >= hi)) } else { t };
    // Non-negative, so the conversion truncates as floor would.
    ((256.0 * t.clamp(0.0, 1.0)) as u32).min(255) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(rescale: Option<&str>, colormap: Option<&str>, nodata: Option<&str>) -> RenderRequest {
        RenderRequest {
            rescale: rescale.map(str::to_string),
            colormap: colormap.map(str::to_string),
            nodata: nodata.map(str::to_string),
        }
    }

    #[test]
    fn maps_values_to_indices_as_the_contract_says() {
        assert_eq!(index(0.0, 0.0, 1.0), 0);
        assert_eq!(index(1.0, 0.0, 1.0), 255);
        assert_eq!(index(0.5, 0.0, 1.0), 128);
        assert_eq!(index(255.0 / 256.0, 0.0, 1.0), 255);
        assert_eq!(index(254.999 / 256.0, 0.0, 1.0), 254);
        assert_eq!(index(-3.0, 0.0, 1.0), 0);
        assert_eq!(index(7.0, 0.0, 1.0), 255);
        assert_eq!(index(5.0, 5.0, 5.0), 0);
        assert_eq!(index(f64::INFINITY, 0.0, f64::INFINITY), 255);
        assert_eq!(index(3.0, 0.0, f64::INFINITY), 0);
    }

    #[test]
    fn draws_gray_with_transparency() {
        let data: Vec<u8> = [0.0f32, 2.0, f32::NAN, 4.0, -9999.9, f32::INFINITY]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let render = request(None, None, Some("-9999.9")).resolve().unwrap();
        let rgba = render.rgba(DataType::Float32, &data).unwrap();
        let pixels: Vec<&[u8]> = rgba.chunks(4).collect();
        assert_eq!(pixels[0], [0, 0, 0, 255]);
        assert_eq!(pixels[1], [128, 128, 128, 255]);
        assert_eq!(pixels[2], [0, 0, 0, 0]);
        assert_eq!(pixels[3], [255, 255, 255, 255]);
        assert_eq!(pixels[4], [0, 0, 0, 0]);
        assert_eq!(
            pixels[5],
            [255, 255, 255, 255],
            "infinity: drawn at the end of the finite range"
        );
        // A fixed range and another colormap.
        let render = request(Some("0,8"), Some("viridis"), None).resolve().unwrap();
        let rgba = render.rgba(DataType::Float32, &data).unwrap();
        let viridis = Colormap::named("viridis").unwrap();
        assert_eq!(rgba[4..7], viridis.color(64));
        assert_eq!(rgba[16..19], viridis.color(0), "below LO clamps to the first colour");
    }

    /// Each pixel of a one-byte raster, drawn the plain way: the element's
    /// value, the range of the drawn values, the colour of its index.
    fn naive_bytes(render: &Render, data_type: DataType, data: &[u8]) -> Vec<u8> {
        let value = |b: u8| byte_value(data_type, b);
        let drawn_values = data.iter().map(|&b| value(b)).filter(|&v| drawn(v, render.nodata));
        let (lo, hi) = render.range(drawn_values, render.nodata);
        let palette = render.palette();
        data.iter()
            .flat_map(|&b| match drawn(value(b), render.nodata) {
                true => palette[usize::from(index(value(b), lo, hi))],
                false => [0; 4],
            })
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn one_byte_rasters_equal_the_plain_drawing(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..70),
            type_index in 0usize..3,
            nodata in proptest::option::of(-3i32..300),
            rescale in proptest::option::of((-200i32..200, 0i32..300)),
        ) {
            // Bool bytes other than 0 and 1 too: any non-zero byte is true.
            let data_type = [DataType::Bool, DataType::Int8, DataType::UInt8][type_index];
            let render = request(
                rescale.map(|(lo, span)| format!("{lo},{}", lo + span)).as_deref(),
                Some("viridis"),
                nodata.map(|v| v.to_string()).as_deref(),
            )
            .resolve()
            .unwrap();
            proptest::prop_assert_eq!(render.rgba(data_type, &data).unwrap(), naive_bytes(&render, data_type, &data));
            proptest::prop_assert_eq!(render.picture(data_type, &data).unwrap().to_rgba(), naive_bytes(&render, data_type, &data));
        }

        /// Indexed pictures show exactly the RGBA drawing, floats with NaN
        /// and nodata included; all 256 colours and transparency: RGBA.
        #[test]
        fn pictures_show_what_rgba_draws(
            values in proptest::collection::vec(proptest::prop_oneof![-1e3f64..1e3, proptest::prelude::Just(f64::NAN), proptest::prelude::Just(7.0)], 0..300),
            nodata in proptest::option::of(proptest::prelude::Just(7.0f64)),
        ) {
            let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            let render = request(None, Some("magma"), nodata.map(|v| v.to_string()).as_deref()).resolve().unwrap();
            let rgba = render.rgba(DataType::Float64, &data).unwrap();
            let picture = render.picture(DataType::Float64, &data).unwrap();
            proptest::prop_assert_eq!(picture.to_rgba(), rgba);
        }
    }

    #[test]
    fn a_picture_of_every_colour_and_transparency_is_rgba() {
        let mut values: Vec<f64> = (0..256).map(f64::from).collect();
        let render = request(Some("0,256"), None, None).resolve().unwrap();
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert!(matches!(
            render.picture(DataType::Float64, &data).unwrap(),
            Picture::Indexed { .. }
        ));
        values.push(f64::NAN);
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let picture = render.picture(DataType::Float64, &data).unwrap();
        assert!(matches!(picture, Picture::Rgba(_)));
        assert_eq!(picture.to_rgba(), render.rgba(DataType::Float64, &data).unwrap());
    }

    #[test]
    fn rejects_bad_parameters_and_shapes() {
        for (rescale, colormap, nodata) in [
            (Some("1"), None, None),
            (Some("2,1"), None, None),
            (Some("0,inf"), None, None),
            (None, Some("jet"), None),
            (None, None, Some("none")),
        ] {
            assert!(request(rescale, colormap, nodata).resolve().is_err());
        }
        assert!(check(DataType::Float32, &[3]).is_err());
        assert!(check(DataType::Complex64, &[3, 3]).is_err());
        assert!(check(DataType::String, &[3, 3]).is_err());
        assert!(check(DataType::Bool, &[3, 3]).is_ok());
    }

    #[test]
    fn cells_looked_up_per_pixel_draw_what_the_values_draw() {
        let cells = [1.0, f64::NAN, 3.5, -2.0, 7.0];
        let pixels = [0, 2, u32::MAX, 4, 4, 1, 3, 0, u32::MAX];
        for (rescale, nodata) in [(Some("0,5"), None), (None, Some("7")), (None, None)] {
            let render = request(rescale, Some("viridis"), nodata).resolve().unwrap();
            let values: Vec<u8> = pixels
                .iter()
                .map(|&p| cells.get(p as usize).copied().unwrap_or(f64::NAN))
                .flat_map(f64::to_le_bytes)
                .collect();
            let want = render.picture(DataType::Float64, &values).unwrap();
            assert_eq!(render.picture_of_cells(&cells, &pixels), want, "{rescale:?} {nodata:?}");
        }
    }
}
