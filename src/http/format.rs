//! Response formats of region reads: `binary`, `npy`, `json`, and their
//! negotiation from `format=` and `Accept`.

use std::borrow::Cow;
use std::fmt::Write;

use base64::Engine;

use super::problem::ApiError;
use crate::engine::render::Picture;
use crate::engine::values::text_values;
use crate::engine::{vlen, DataType, NAT};

/// A representation of a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// C-order little-endian elements.
    Binary,
    /// A NumPy `.npy` file (format 1.0).
    Npy,
    /// `{"shape", "data_type", "data"}`.
    Json,
    /// A 2-D result drawn as an 8-bit RGBA PNG.
    Png,
}

impl Format {
    /// The media type.
    pub(super) fn media_type(self) -> &'static str {
        match self {
            Format::Binary => "application/octet-stream",
            Format::Npy => "application/x-npy",
            Format::Json => "application/json",
            Format::Png => "image/png",
        }
    }

    /// The `format=` name, also used in ETags.
    pub(super) fn name(self) -> &'static str {
        match self {
            Format::Binary => "binary",
            Format::Npy => "npy",
            Format::Json => "json",
            Format::Png => "png",
        }
    }

    /// `format=` wins; else `Accept` with q-values; `*/*` or none is
    /// binary, or JSON for text and bytes, which binary cannot represent.
    pub(super) fn negotiate(query: Option<&str>, accept: Option<&str>, data_type: DataType) -> Result<Self, ApiError> {
        let textual = data_type.is_text_or_bytes();
        let default = if textual { Format::Json } else { Format::Binary };
        if let Some(name) = query {
            return match name {
                "binary" if textual => Err(ApiError::BadRequest(format!(
                    "format=binary cannot represent {} data: use json or npy",
                    data_type.name()
                ))),
                "binary" => Ok(Format::Binary),
                "npy" => Ok(Format::Npy),
                "json" => Ok(Format::Json),
                "png" => Ok(Format::Png),
                other => Err(ApiError::BadRequest(format!(
                    "unknown format '{other}': use binary, npy, json or png"
                ))),
            };
        }
        let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
            return Ok(default);
        };
        let mut best: Option<(f32, usize, Format)> = None;
        for (media, q) in accept_items(accept) {
            let format = match media.as_str() {
                "*/*" | "application/*" => default,
                "application/octet-stream" if !textual => Format::Binary,
                "application/x-npy" | "application/npy" => Format::Npy,
                "application/json" => Format::Json,
                "image/png" if !textual => Format::Png,
                _ => continue,
            };
            if q <= 0.0 {
                continue;
            }
            // Higher q wins; among equals, an exact media type beats a wildcard, then order.
            let specific = usize::from(!media.contains('*'));
            let rank = (q, specific);
            if best.is_none_or(|(bq, bs, _)| rank > (bq, bs)) {
                best = Some((q, specific, format));
            }
        }
        best.map(|(_, _, f)| f).ok_or_else(|| {
            let offered = match textual {
                true => "application/x-npy, application/json",
                false => "application/octet-stream, application/x-npy, application/json, image/png",
            };
            ApiError::NotAcceptable(format!(
                "Accept '{accept}' matches no format of this {} array: {offered}",
                data_type.name()
            ))
        })
    }
}

/// The media ranges of an `Accept` header, lower-cased, with their q-values
/// (1 when absent).
pub(super) fn accept_items(accept: &str) -> impl Iterator<Item = (String, f32)> + '_ {
    accept.split(',').map(|item| {
        let mut parts = item.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        (media, q)
    })
}

/// A picture as a PNG: indexed colour (a palette, and `tRNS` when some of
/// its colours are transparent) when it has at most 256 colours, one byte a
/// pixel; else RGBA. Both decode to the same RGBA (api.md 3.3).
///
/// Indexed pictures whose rows mostly repeat the row above (map tiles
/// zoomed in past their cells, smooth fields) are deflated with fdeflate
/// and the `Up` filter, which makes those pixels zeros that fdeflate codes
/// almost free: a map tile of the bench's 0.25° field is 5.7 KB on average
/// instead of 67 KB, for no loss of tiles a second. Noisy pictures are
/// stored: deflating them costs a third of the PNG tile rate and saves 7%
/// (BENCHMARKS.md). RGBA pictures (four times the bytes) are stored too;
/// HTTP compression (`Accept-Encoding`) compresses them when asked.
pub(super) fn png_picture(width: u32, height: u32, picture: &Picture) -> Result<Vec<u8>, png::EncodingError> {
    let (indices, palette) = match picture {
        Picture::Rgba(rgba) => return png_body(width, height, rgba),
        Picture::Indexed { indices, palette } => (indices, palette),
    };
    let mut out = Vec::with_capacity(indices.len() + indices.len() / 64 + 2048);
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Indexed);
    encoder.set_depth(png::BitDepth::Eight);
    if repeats_rows(indices, width as usize) {
        encoder.set_compression(png::Compression::Fast);
        // Per row adaptive filtering costs 20% more time for a larger
        // tile; `Sub` gives tiles 2.6x larger, no filter 11x.
        encoder.set_filter(png::Filter::Up);
    } else {
        encoder.set_compression(png::Compression::NoCompression);
    }
    encoder.set_palette(palette.iter().flat_map(|c| [c[0], c[1], c[2]]).collect::<Vec<u8>>());
    if let Some(last) = palette.iter().rposition(|c| c[3] != 255) {
        encoder.set_trns(palette[..=last].iter().map(|c| c[3]).collect::<Vec<u8>>());
    }
    let mut writer = encoder.write_header()?;
    writer.write_image_data(indices)?;
    writer.finish()?;
    Ok(out)
}

/// Whether about half the pixels or more equal the pixel above them: rows
/// equal to the row above count whole (one comparison of the row), of the
/// other rows every eighth is counted pixel by pixel (a full count costs
/// 27% of a noisy tile's PNG rate; this one about 10%).
fn repeats_rows(indices: &[u8], width: usize) -> bool {
    if width == 0 || indices.len() <= width {
        return false;
    }
    let (mut same, mut seen) = (0usize, 0usize);
    let pairs = indices.chunks_exact(width).zip(indices.chunks_exact(width).skip(1));
    for (i, (above, row)) in pairs.enumerate() {
        if above == row {
            (same, seen) = (same + width, seen + width);
        } else if i % 8 == 0 {
            let equal: usize = above.iter().zip(row).map(|(a, b)| usize::from(a == b)).sum();
            (same, seen) = (same + equal, seen + width);
        }
    }
    2 * same >= seen
}

pub(super) fn png_body(width: u32, height: u32, rgba: &[u8]) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::with_capacity(rgba.len() + rgba.len() / 64 + 1024);
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::NoCompression);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgba)?;
    writer.finish()?;
    Ok(out)
}

/// The `.npy` type of fixed-size elements (`None` for text and bytes,
/// whose width depends on the result: [`npy_text`]).
fn npy_descr(data_type: DataType) -> Option<String> {
    match data_type.is_text_or_bytes() {
        true => None,
        false => data_type.numpy_dtype(),
    }
}

/// Whether a result of `data_type` in `format` can be sent as its slabs
/// arrive: its size is known up front (so not text or bytes).
pub(super) fn streamable(format: Format, data_type: DataType) -> bool {
    matches!(format, Format::Binary | Format::Npy) && npy_descr(data_type).is_some()
}

/// The `.npy` (format 1.0) header for fixed-size elements of `data_type`.
pub(super) fn npy_header(data_type: DataType, shape: &[u64]) -> Vec<u8> {
    npy_header_of(&npy_descr(data_type).expect("a fixed-size data type"), shape)
}

/// The `.npy` (format 1.0) header for an array of `shape` and NumPy type `descr`.
fn npy_header_of(descr: &str, shape: &[u64]) -> Vec<u8> {
    let shape_text = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        dims => format!("({})", dims.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")),
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_text}, }}");
    // magic (6) + version (2) + length (2) + dict + '\n' is padded to a multiple of 64.
    let unpadded = 10 + dict.len() + 1;
    dict.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((dict.len() as u16).to_le_bytes());
    out.extend(dict.as_bytes());
    out
}

/// The elements of a text or bytes result, as NumPy shows them (trailing
/// NULs of fixed-length types removed); `None` for other types. Errors
/// say what is wrong with the data.
enum Texts<'a> {
    Text(Vec<Cow<'a, str>>),
    Bytes(Vec<&'a [u8]>),
}

fn texts(data_type: DataType, data: &[u8]) -> Result<Option<Texts<'_>>, String> {
    let trim = |b: &[u8]| b.len() - b.iter().rev().take_while(|c| **c == 0).count();
    Ok(Some(match data_type {
        DataType::String | DataType::FixedUtf32(_) => Texts::Text(
            text_values(data_type, data)
                .expect("a text type")
                .map_err(|e| reason(&e))?,
        ),
        DataType::Bytes(_) => Texts::Bytes(vlen::items(data).map_err(|e| reason(&e))?),
        DataType::FixedBytes(n) => Texts::Bytes(data.chunks_exact(n).map(|b| &b[..trim(b)]).collect()),
        _ => return Ok(None),
    }))
}

/// What is wrong with damaged data, without the (empty) key of a codec-level error.
fn reason(e: &crate::engine::Error) -> String {
    match e {
        crate::engine::Error::Corrupt { reason, .. } => reason.clone(),
        other => other.to_string(),
    }
}

/// A text or bytes result as `.npy`: `<U{n}` or `|S{n}`, `n` the longest
/// element of the result (at least 1).
pub(super) fn npy_text(data_type: DataType, shape: &[u64], data: &[u8]) -> Result<Vec<u8>, String> {
    let texts = texts(data_type, data)?.expect("a text or bytes data type");
    let (descr, width, elements): (String, usize, Vec<Vec<u8>>) = match texts {
        Texts::Text(items) => {
            let n = items.iter().map(|s| s.chars().count()).max().unwrap_or(0).max(1);
            let utf32 = items
                .iter()
                .map(|s| s.chars().flat_map(|c| (c as u32).to_le_bytes()).collect())
                .collect();
            (format!("<U{n}"), n * 4, utf32)
        }
        Texts::Bytes(items) => {
            let n = items.iter().map(|b| b.len()).max().unwrap_or(0).max(1);
            (format!("|S{n}"), n, items.iter().map(|b| b.to_vec()).collect())
        }
    };
    let mut out = npy_header_of(&descr, shape);
    for mut element in elements {
        element.resize(width, 0);
        out.extend(element);
    }
    Ok(out)
}

/// A result's `dimension_names` and `coords` (see `Dataset::result_coords`).
pub(super) type ResultLabels = (Vec<serde_json::Value>, serde_json::Map<String, serde_json::Value>);

/// The JSON document of a region: nested lists in C order, with the
/// result's dimension names and coordinate labels when given.
pub(super) fn json_body(
    data_type: DataType,
    shape: &[u64],
    data: &[u8],
    labels: Option<&ResultLabels>,
) -> Result<String, String> {
    let mut out = json_head(data_type, shape, labels);
    out.reserve(data.len() * 3);
    match texts(data_type, data)? {
        Some(Texts::Text(items)) => {
            let mut items = items.iter();
            nested(&mut out, shape, &mut |out| {
                let item = items.next().expect("element count matches shape");
                out.push_str(&serde_json::to_string(item).expect("a string"));
            });
        }
        Some(Texts::Bytes(items)) => {
            let mut items = items.iter();
            nested(&mut out, shape, &mut |out| {
                let item = items.next().expect("element count matches shape");
                let _ = write!(out, "\"{}\"", base64::engine::general_purpose::STANDARD.encode(item));
            });
        }
        None => {
            let mut elements = data.chunks_exact(data_type.size());
            nested(&mut out, shape, &mut |out| {
                write_element(out, data_type, elements.next().expect("element count matches shape"));
            });
        }
    }
    out.push('}');
    Ok(out)
}

/// A JSON document up to its `data` value: shape, data type, and the
/// dimension names and coordinate labels when given.
fn json_head(data_type: DataType, shape: &[u64], labels: Option<&ResultLabels>) -> String {
    let mut out = String::with_capacity(64);
    let shape_json = serde_json::to_string(shape).expect("shape");
    let _ = write!(out, "{{\"shape\":{shape_json},\"data_type\":\"{}\",", data_type.name());
    if let Some((names, coords)) = labels {
        let _ = write!(
            out,
            "\"dimension_names\":{},\"coords\":{},",
            serde_json::to_string(names).expect("names"),
            serde_json::to_string(coords).expect("coords")
        );
    }
    out.push_str("\"data\":");
    out
}

/// A JSON document written slab by slab, as the slabs of a streamed read
/// arrive: slabs are cut along result dimension `slab_dim`, and every
/// dimension before it has length 1, so the document is a head, each
/// slab's items along `slab_dim` (comma-separated), and a tail.
pub(super) struct JsonSlabs {
    data_type: DataType,
    /// The result's dimensions after `slab_dim`: the shape of one item.
    item_shape: Vec<u64>,
}

impl JsonSlabs {
    /// The encoder, and the document's head and tail, for numeric, bool or
    /// datetime elements (not text or bytes).
    pub(super) fn new(
        data_type: DataType,
        shape: &[u64],
        slab_dim: usize,
        labels: Option<&ResultLabels>,
    ) -> (Self, String, String) {
        let mut head = json_head(data_type, shape, labels);
        head.push_str(&"[".repeat(slab_dim + 1));
        let tail = format!("{}}}", "]".repeat(slab_dim + 1));
        let item_shape = shape[slab_dim + 1..].to_vec();
        (Self { data_type, item_shape }, head, tail)
    }

    /// The bytes of one item (a position along the slab dimension).
    pub(super) fn item_bytes(&self) -> usize {
        self.item_shape.iter().product::<u64>() as usize * self.data_type.size()
    }

    /// Whole items of a slab (C-order little-endian elements) as JSON text,
    /// preceded by a comma unless they are the document's first.
    pub(super) fn slab(&self, data: &[u8], first: bool) -> String {
        let size = self.data_type.size();
        let item_bytes = self.item_bytes();
        // Room for the widest elements: reserved, not touched, so it costs
        // no memory, and the text is never copied to grow.
        let widest = match self.data_type {
            DataType::Float32 | DataType::Float16 => 17,
            DataType::Float64 | DataType::Complex64 => 26,
            DataType::Complex128 => 50,
            DataType::DateTime64(_) => 40,
            _ => 21,
        };
        let elements = data.len() / size.max(1);
        let mut out = String::with_capacity(elements * widest + data.len() / item_bytes.max(1) * 2 + 16);
        let mut elements = data.chunks_exact(size);
        for (i, _) in data.chunks_exact(item_bytes.max(1)).enumerate() {
            if i > 0 || !first {
                out.push(',');
            }
            nested(&mut out, &self.item_shape, &mut |out| {
                write_element(
                    out,
                    self.data_type,
                    elements.next().expect("element count matches shape"),
                );
            });
        }
        out
    }
}

fn nested(out: &mut String, shape: &[u64], element: &mut dyn FnMut(&mut String)) {
    match shape.split_first() {
        None => element(out),
        Some((&n, rest)) => {
            out.push('[');
            for i in 0..n {
                if i > 0 {
                    out.push(',');
                }
                nested(out, rest, element);
            }
            out.push(']');
        }
    }
}

/// A float: NaN and infinities as strings, finite values in their
/// shortest round-trip form (ryu, as serde_json writes them).
fn write_float<F: ryu::Float>(out: &mut String, value: f64, finite: F) {
    if value.is_nan() {
        out.push_str("\"NaN\"");
    } else if value.is_infinite() {
        out.push_str(if value > 0.0 { "\"Infinity\"" } else { "\"-Infinity\"" });
    } else {
        out.push_str(ryu::Buffer::new().format_finite(finite));
    }
}

/// One fixed-size element of a numeric, bool, raw or datetime type.
fn write_element(out: &mut String, data_type: DataType, b: &[u8]) {
    macro_rules! int {
        ($t:ty) => {{
            out.push_str(itoa::Buffer::new().format(<$t>::from_le_bytes(b.try_into().expect("element size"))));
        }};
    }
    let f32_at = |b: &[u8]| f32::from_le_bytes(b.try_into().expect("4 bytes"));
    let f64_at = |b: &[u8]| f64::from_le_bytes(b.try_into().expect("8 bytes"));
    let i64_at = |b: &[u8]| i64::from_le_bytes(b.try_into().expect("8 bytes"));
    match data_type {
        DataType::Bool => out.push_str(if b[0] != 0 { "true" } else { "false" }),
        DataType::Int8 => int!(i8),
        DataType::Int16 => int!(i16),
        DataType::Int32 => int!(i32),
        DataType::Int64 => int!(i64),
        DataType::UInt8 => int!(u8),
        DataType::UInt16 => int!(u16),
        DataType::UInt32 => int!(u32),
        DataType::UInt64 => int!(u64),
        DataType::Float16 => {
            let v = half::f16::from_le_bytes([b[0], b[1]]);
            write_float(out, v.to_f64(), v.to_f32());
        }
        DataType::Float32 => {
            let v = f32_at(b);
            write_float(out, v as f64, v);
        }
        DataType::Float64 => {
            let v = f64_at(b);
            write_float(out, v, v);
        }
        DataType::Complex64 | DataType::Complex128 => {
            let (part, half) = match data_type {
                DataType::Complex64 => (DataType::Float32, 4),
                _ => (DataType::Float64, 8),
            };
            out.push('[');
            write_element(out, part, &b[..half]);
            out.push(',');
            write_element(out, part, &b[half..]);
            out.push(']');
        }
        DataType::Raw(_) => {
            let _ = write!(out, "{}", serde_json::to_string(b).expect("bytes"));
        }
        DataType::DateTime64(unit) => match unit.format_datetime(i64_at(b)) {
            Some(text) => {
                let _ = write!(out, "\"{text}\"");
            }
            None => out.push_str("null"),
        },
        DataType::TimeDelta64(_) => match i64_at(b) {
            NAT => out.push_str("null"),
            count => {
                let _ = write!(out, "{count}");
            }
        },
        DataType::String | DataType::Bytes(_) | DataType::FixedUtf32(_) | DataType::FixedBytes(_) => {
            unreachable!("text and bytes are written from their elements")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An indexed PNG decodes (palette and tRNS expanded) to the RGBA of
    /// its picture, transparent entries or none.
    #[test]
    fn indexed_pngs_decode_to_their_pictures() {
        for (width, height, clear) in [(1u32, 1u32, false), (256, 256, true), (129, 257, true), (300, 2, false)] {
            let mut palette: Vec<[u8; 4]> = (0..256u32)
                .map(|i| [i as u8, (i * 3) as u8, 255 - i as u8, 255])
                .collect();
            if clear {
                palette[17] = [0, 0, 0, 0];
            }
            let indices: Vec<u8> = (0..width * height).map(|i| (i * 31 + i / 7) as u8).collect();
            let picture = Picture::Indexed { indices, palette };
            let png = png_picture(width, height, &picture).unwrap();
            let mut decoder = png::Decoder::new(std::io::Cursor::new(png));
            decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::ALPHA);
            let mut reader = decoder.read_info().unwrap();
            assert_eq!(reader.info().color_type, png::ColorType::Indexed);
            let mut decoded = vec![0; reader.output_buffer_size().unwrap()];
            let info = reader.next_frame(&mut decoded).unwrap();
            assert_eq!(info.color_type, png::ColorType::Rgba);
            assert_eq!(decoded, picture.to_rgba(), "{width}x{height}");
        }
    }

    #[test]
    fn pngs_decode_to_their_rasters() {
        // One pixel, a row, and images whose data spans several stored blocks.
        for (width, height) in [(1u32, 1u32), (300, 1), (1, 300), (256, 256), (129, 257)] {
            let rgba: Vec<u8> = (0..width * height * 4).map(|i| (i * 7 + i / 1021) as u8).collect();
            let png = png_body(width, height, &rgba).unwrap();
            let mut reader = png::Decoder::new(std::io::Cursor::new(png)).read_info().unwrap();
            let mut decoded = vec![0; reader.output_buffer_size().unwrap()];
            let info = reader.next_frame(&mut decoded).unwrap();
            assert_eq!((info.width, info.height), (width, height));
            assert_eq!(
                (info.color_type, info.bit_depth),
                (png::ColorType::Rgba, png::BitDepth::Eight)
            );
            assert_eq!(decoded, rgba, "{width}x{height}");
        }
    }

    #[test]
    fn negotiates() {
        let n = |q: Option<&str>, a: Option<&str>| {
            Format::negotiate(q, a, DataType::UInt8).map_err(|e| e.status().as_u16())
        };
        assert_eq!(n(None, None), Ok(Format::Binary));
        assert_eq!(n(None, Some("*/*")), Ok(Format::Binary));
        assert_eq!(n(Some("json"), Some("application/x-npy")), Ok(Format::Json));
        assert_eq!(n(Some("csv"), None), Err(400));
        assert_eq!(n(None, Some("text/html")), Err(406));
        assert_eq!(
            n(None, Some("application/json;q=0.5, application/x-npy;q=0.9")),
            Ok(Format::Npy)
        );
        assert_eq!(n(None, Some("*/*;q=0.1, application/json")), Ok(Format::Json));
        assert_eq!(n(None, Some("application/json;q=0")), Err(406));
        let text = |q: Option<&str>, a: Option<&str>| {
            Format::negotiate(q, a, DataType::String).map_err(|e| e.status().as_u16())
        };
        assert_eq!(text(None, None), Ok(Format::Json));
        assert_eq!(text(None, Some("*/*")), Ok(Format::Json));
        assert_eq!(text(Some("npy"), None), Ok(Format::Npy));
        assert_eq!(text(Some("binary"), None), Err(400));
        assert_eq!(text(None, Some("application/octet-stream")), Err(406));
        assert_eq!(
            text(None, Some("application/octet-stream, application/x-npy;q=0.5")),
            Ok(Format::Npy)
        );
    }

    fn items(items: &[&[u8]]) -> Vec<u8> {
        items
            .iter()
            .flat_map(|i| [&(i.len() as u32).to_le_bytes()[..], i].concat())
            .collect()
    }

    #[test]
    fn text_and_bytes_as_json_and_npy() {
        let data = items(&[b"a", "b\u{e9}".as_bytes(), b""]);
        assert_eq!(
            json_body(DataType::String, &[3], &data, None).unwrap(),
            r#"{"shape":[3],"data_type":"string","data":["a","bé",""]}"#
        );
        let npy = npy_text(DataType::String, &[3], &data).unwrap();
        let header_len = 10 + u16::from_le_bytes([npy[8], npy[9]]) as usize;
        let header = String::from_utf8_lossy(&npy[..header_len]).to_string();
        assert!(header.contains("'descr': '<U2'"), "{header}");
        assert_eq!(&npy[header_len..header_len + 8], &[b'a', 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(npy.len(), header_len + 3 * 8);
        // `<U2` elements "ab" and "c" (NUL padded), and `|S3` b"a\0b", b"".
        let utf32: Vec<u8> = "abc\0".chars().flat_map(|c| (c as u32).to_le_bytes()).collect();
        assert_eq!(
            json_body(DataType::FixedUtf32(8), &[2], &utf32, None).unwrap(),
            r#"{"shape":[2],"data_type":"fixed_length_utf32","data":["ab","c"]}"#
        );
        assert!(json_body(DataType::FixedUtf32(4), &[1], &[0, 0xd8, 0, 0], None).is_err());
        assert_eq!(
            json_body(DataType::FixedBytes(3), &[2], b"a\0b\0\0\0", None).unwrap(),
            r#"{"shape":[2],"data_type":"null_terminated_bytes","data":["YQBi",""]}"#
        );
        let npy = npy_text(DataType::FixedBytes(3), &[2], b"a\0b\0\0\0").unwrap();
        assert!(String::from_utf8_lossy(&npy).contains("'descr': '|S3'"));
        let empty = npy_text(DataType::Bytes(crate::engine::BytesName::Bytes), &[0], &[]).unwrap();
        assert!(String::from_utf8_lossy(&empty).contains("'descr': '|S1'"));
        assert!(json_body(DataType::String, &[1], &items(&[b"\xff"]), None).is_err());
    }

    #[test]
    fn datetimes_as_json_and_npy() {
        let unit = crate::engine::TimeUnit::parse("s").unwrap();
        let data: Vec<u8> = [0i64, NAT, 86_400].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(
            json_body(DataType::DateTime64(unit), &[3], &data, None).unwrap(),
            r#"{"shape":[3],"data_type":"numpy.datetime64","data":["1970-01-01T00:00:00",null,"1970-01-02T00:00:00"]}"#
        );
        assert_eq!(
            json_body(DataType::TimeDelta64(unit), &[3], &data, None).unwrap(),
            r#"{"shape":[3],"data_type":"numpy.timedelta64","data":[0,null,86400]}"#
        );
        let h = String::from_utf8_lossy(&npy_header(DataType::TimeDelta64(unit), &[3])).to_string();
        assert!(h.contains("'descr': '<m8[s]'"), "{h}");
    }

    #[test]
    fn npy_header_is_aligned() {
        for shape in [vec![], vec![3], vec![10, 20, 30]] {
            let h = npy_header(DataType::UInt16, &shape);
            assert_eq!(h.len() % 64, 0);
            assert!(h.ends_with(b"\n"));
        }
        let h = String::from_utf8_lossy(&npy_header(DataType::Complex128, &[2, 3])).to_string();
        assert!(h.contains("'descr': '<c16'") && h.contains("'shape': (2, 3)"), "{h}");
    }

    #[test]
    fn json_values() {
        let data: Vec<u8> = [1.5f64, f64::NAN, f64::NEG_INFINITY, -0.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        assert_eq!(
            json_body(DataType::Float64, &[2, 2], &data, None).unwrap(),
            r#"{"shape":[2,2],"data_type":"float64","data":[[1.5,"NaN"],["-Infinity",-0.0]]}"#
        );
        assert_eq!(
            json_body(DataType::UInt64, &[], &u64::MAX.to_le_bytes(), None).unwrap(),
            r#"{"shape":[],"data_type":"uint64","data":18446744073709551615}"#
        );
        assert_eq!(
            json_body(DataType::Bool, &[2], &[1, 0], None).unwrap(),
            r#"{"shape":[2],"data_type":"bool","data":[true,false]}"#
        );
        assert_eq!(
            json_body(DataType::Int8, &[0, 3], &[], None).unwrap(),
            r#"{"shape":[0,3],"data_type":"int8","data":[]}"#
        );
    }
}
