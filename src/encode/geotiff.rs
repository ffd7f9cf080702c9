//! One-band GeoTIFF files: a 2-D result on a regular grid, uncompressed,
//! little-endian, in strips of rows, with its georeferencing (GeoTIFF 1.1:
//! the pixel scale and tie point, or a transformation matrix when the rows
//! run south to north; the EPSG code as a GeoKey) and GDAL's nodata tag.
//!
//! Every offset is known before any data is read, so the header comes
//! first and the read's slabs, rows in C order, are the image's strips as
//! they arrive.

use super::Raw;
use crate::engine::DataType;

/// About this many bytes a strip.
const STRIP_BYTES: u64 = 256 << 10;

/// Where a raster lies: the outer corner of its first pixel and the step
/// from one pixel to the next, in the CRS's units.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoTransform {
    /// X of the first pixel's outer corner.
    pub x0: f64,
    /// X step from a column to the next.
    pub dx: f64,
    /// Y of the first pixel's outer corner.
    pub y0: f64,
    /// Y step from a row to the next (negative: north-up).
    pub dy: f64,
}

/// A raster's CRS: an EPSG code, geographic (degrees) or projected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epsg {
    /// The EPSG code.
    pub code: u16,
    /// Whether it is geographic (else projected).
    pub geographic: bool,
}

/// A TIFF field type.
#[derive(Clone, Copy)]
enum Kind {
    Ascii = 2,
    Short = 3,
    Long = 4,
    Double = 12,
}

/// One IFD entry: tag, type, and values (little-endian).
struct Entry {
    tag: u16,
    kind: Kind,
    count: u32,
    values: Vec<u8>,
}

impl Entry {
    fn shorts(tag: u16, values: &[u16]) -> Self {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Self {
            tag,
            kind: Kind::Short,
            count: values.len() as u32,
            values: bytes,
        }
    }

    fn longs(tag: u16, values: &[u32]) -> Self {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Self {
            tag,
            kind: Kind::Long,
            count: values.len() as u32,
            values: bytes,
        }
    }

    fn doubles(tag: u16, values: &[f64]) -> Self {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Self {
            tag,
            kind: Kind::Double,
            count: values.len() as u32,
            values: bytes,
        }
    }

    fn ascii(tag: u16, text: &str) -> Self {
        let mut bytes = text.as_bytes().to_vec();
        bytes.push(0);
        Self {
            tag,
            kind: Kind::Ascii,
            count: bytes.len() as u32,
            values: bytes,
        }
    }
}

/// TIFF's `SampleFormat` and bits of a data type; `None` when TIFF has none.
fn sample_format(data_type: DataType) -> Option<(u16, u16)> {
    Some(match data_type {
        DataType::Bool | DataType::UInt8 => (1, 8),
        DataType::UInt16 => (1, 16),
        DataType::UInt32 => (1, 32),
        DataType::UInt64 => (1, 64),
        DataType::Int8 => (2, 8),
        DataType::Int16 => (2, 16),
        DataType::Int32 => (2, 32),
        DataType::Int64 => (2, 64),
        DataType::Float16 => (3, 16),
        DataType::Float32 => (3, 32),
        DataType::Float64 => (3, 64),
        _ => return None,
    })
}

/// The GeoTIFF encoder (its header, then the elements as they are) of a
/// raster of `height` rows of `width` elements of `data_type`,
/// placed by `transform` in `crs`, `nodata` its missing value's text.
pub fn geotiff(
    data_type: DataType,
    (height, width): (u64, u64),
    transform: GeoTransform,
    crs: Epsg,
    nodata: Option<&str>,
) -> Result<Raw, String> {
    let (format, bits) =
        sample_format(data_type).ok_or_else(|| format!("a GeoTIFF cannot hold {} values", data_type.name()))?;
    if height == 0 || width == 0 {
        return Err(format!("the raster would be empty ({height} x {width})"));
    }
    let row_bytes = width * u64::from(bits / 8);
    let data_bytes = height * row_bytes;
    let rows_per_strip = (STRIP_BYTES / row_bytes).clamp(1, height);
    let strips = height.div_ceil(rows_per_strip);
    if data_bytes + strips * 8 + 4096 > u64::from(u32::MAX) {
        return Err(format!(
            "the GeoTIFF would be over 4 GiB ({data_bytes} bytes of data): select a smaller region"
        ));
    }
    let mut entries = vec![
        Entry::longs(256, &[width as u32]),
        Entry::longs(257, &[height as u32]),
        Entry::shorts(258, &[bits]),
        Entry::shorts(259, &[1]),
        Entry::shorts(262, &[1]),
        Entry::longs(273, &vec![0; strips as usize]),
        Entry::shorts(277, &[1]),
        Entry::longs(278, &[rows_per_strip as u32]),
        Entry::longs(
            279,
            &(0..strips)
                .map(|s| ((height - s * rows_per_strip).min(rows_per_strip) * row_bytes) as u32)
                .collect::<Vec<_>>(),
        ),
        Entry::shorts(284, &[1]),
        Entry::shorts(339, &[format]),
    ];
    let GeoTransform { x0, dx, y0, dy } = transform;
    if dy < 0.0 && dx > 0.0 {
        entries.push(Entry::doubles(33550, &[dx, -dy, 0.0]));
        entries.push(Entry::doubles(33922, &[0.0, 0.0, 0.0, x0, y0, 0.0]));
    } else {
        let matrix = [
            dx, 0.0, 0.0, x0, 0.0, dy, 0.0, y0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0,
        ];
        entries.push(Entry::doubles(34264, &matrix));
    }
    let (model, crs_key) = match crs.geographic {
        true => (2, 2048),
        false => (1, 3072),
    };
    // GTModelType, GTRasterType (PixelIsArea), then the CRS's key.
    entries.push(Entry::shorts(
        34735,
        &[1, 1, 0, 3, 1024, 0, 1, model, 1025, 0, 1, 1, crs_key, 0, 1, crs.code],
    ));
    if let Some(nodata) = nodata {
        entries.push(Entry::ascii(42113, nodata));
    }
    let head = layout(&mut entries, row_bytes * rows_per_strip, strips);
    Ok(Raw::new(head, data_bytes))
}
/// Header, IFD and out-of-line values, padded so the image data (strips
/// of `strip_bytes`, the last perhaps shorter) starts right after.
fn layout(entries: &mut [Entry], strip_bytes: u64, strips: u64) -> Vec<u8> {
    let ifd_len = 2 + 12 * entries.len() + 4;
    let extra_len = |entries: &[Entry]| -> usize {
        entries
            .iter()
            .filter(|e| e.values.len() > 4)
            .map(|e| e.values.len().next_multiple_of(8))
            .sum()
    };
    let data_start = (8 + ifd_len).next_multiple_of(8) + extra_len(entries);
    let data_start = data_start.next_multiple_of(16) as u64;
    let offsets: Vec<u8> = (0..strips)
        .flat_map(|s| ((data_start + s * strip_bytes) as u32).to_le_bytes())
        .collect();
    if let Some(e) = entries.iter_mut().find(|e| e.tag == 273) {
        e.values = offsets;
    }
    let mut out = b"II\x2a\x00".to_vec();
    out.extend(8u32.to_le_bytes());
    out.extend((entries.len() as u16).to_le_bytes());
    let mut extra = Vec::new();
    let extra_start = (8 + ifd_len).next_multiple_of(8);
    for e in entries.iter() {
        out.extend(e.tag.to_le_bytes());
        out.extend((e.kind as u16).to_le_bytes());
        out.extend(e.count.to_le_bytes());
        if e.values.len() <= 4 {
            let mut value = e.values.clone();
            value.resize(4, 0);
            out.extend(value);
        } else {
            out.extend(((extra_start + extra.len()) as u32).to_le_bytes());
            extra.extend(&e.values);
            extra.resize(extra.len().next_multiple_of(8), 0);
        }
    }
    out.extend(0u32.to_le_bytes());
    out.resize(extra_start, 0);
    out.extend(extra);
    out.resize(data_start as usize, 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::Encoder;
    use bytes::Bytes;

    fn decode(file: &[u8]) -> (tiff::decoder::DecodingResult, (u32, u32)) {
        let mut decoder = tiff::decoder::Decoder::new(std::io::Cursor::new(file)).unwrap();
        let dims = decoder.dimensions().unwrap();
        (decoder.read_image().unwrap(), dims)
    }

    #[test]
    fn rasters_decode_with_their_tags() {
        let (height, width) = (700u64, 300u64);
        let values: Vec<f32> = (0..height * width).map(|i| i as f32 * 0.5).collect();
        let transform = GeoTransform {
            x0: -180.0,
            dx: 0.5,
            y0: 90.0,
            dy: -0.25,
        };
        let crs = Epsg {
            code: 4326,
            geographic: true,
        };
        let tiff = geotiff(DataType::Float32, (height, width), transform, crs, Some("nan")).unwrap();
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let file = tiff.whole(Bytes::from(data)).unwrap();
        assert_eq!(tiff.length(), Some(file.len() as u64));
        let (image, dims) = decode(&file);
        assert_eq!(dims, (width as u32, height as u32));
        assert!(matches!(image, tiff::decoder::DecodingResult::F32(v) if v == values));
        let mut decoder = tiff::decoder::Decoder::new(std::io::Cursor::new(&file[..])).unwrap();
        let mut tag = |t: u16| decoder.get_tag(tiff::tags::Tag::Unknown(t)).unwrap();
        assert_eq!(tag(33550).into_f64_vec().unwrap(), vec![0.5, 0.25, 0.0]);
        assert_eq!(
            tag(33922).into_f64_vec().unwrap(),
            vec![0.0, 0.0, 0.0, -180.0, 90.0, 0.0]
        );
        let keys = tag(34735).into_u16_vec().unwrap();
        assert_eq!(&keys[12..], &[2048, 0, 1, 4326]);
        assert_eq!(tag(42113).into_string().unwrap(), "nan");
    }

    #[test]
    fn south_up_rasters_carry_a_matrix_and_integers_decode() {
        let transform = GeoTransform {
            x0: 500_000.0,
            dx: 1000.0,
            y0: 0.0,
            dy: 1000.0,
        };
        let crs = Epsg {
            code: 32633,
            geographic: false,
        };
        let tiff = geotiff(DataType::Int16, (3, 2), transform, crs, None).unwrap();
        let values: Vec<i16> = vec![1, -2, 3, -4, 5, i16::MIN];
        let file = tiff
            .whole(Bytes::from(
                values.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>(),
            ))
            .unwrap();
        let (image, _) = decode(&file);
        assert!(matches!(image, tiff::decoder::DecodingResult::I16(v) if v == values));
        let mut decoder = tiff::decoder::Decoder::new(std::io::Cursor::new(&file[..])).unwrap();
        let matrix = decoder
            .get_tag(tiff::tags::Tag::Unknown(34264))
            .unwrap()
            .into_f64_vec()
            .unwrap();
        assert_eq!(&matrix[..8], &[1000.0, 0.0, 0.0, 500_000.0, 0.0, 1000.0, 0.0, 0.0]);
        assert!(geotiff(DataType::Complex64, (1, 1), transform, crs, None).is_err());
        assert!(geotiff(DataType::UInt8, (0, 4), transform, crs, None).is_err());
    }
}
