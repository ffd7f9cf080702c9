//! Pictures as PNG files.

use crate::engine::render::Picture;

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
pub fn png_picture(width: u32, height: u32, picture: &Picture) -> Result<Vec<u8>, png::EncodingError> {
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

/// An RGBA picture as a stored (uncompressed) PNG.
pub fn png_body(width: u32, height: u32, rgba: &[u8]) -> Result<Vec<u8>, png::EncodingError> {
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
}
