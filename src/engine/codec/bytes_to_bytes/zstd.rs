//! The `zstd` codec.
//!
//! Spec: <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/zstd>.
//! Example: `{"name": "zstd", "configuration": {"level": 1, "checksum": false}}`.
//! Frames may lack the content size, so unknown sizes use a streaming decoder.

use serde_json::{Map, Value};

use super::{int_field, read_limited};
use crate::engine::error::{corrupt, Result};

/// Zstandard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZstdCodec;

thread_local! {
    /// One decompression context per thread, reused: creating one per chunk
    /// showed up in profiles of large reads.
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

impl ZstdCodec {
    /// Validate the configuration (`level`, optional `checksum`).
    pub fn from_json(config: Option<&Map<String, Value>>) -> Result<Self> {
        int_field(config, "zstd", "level", -131072..=22, Some(0))?;
        if let Some(v) = config.and_then(|c| c.get("checksum")) {
            if !v.is_boolean() {
                return Err(corrupt(format!("zstd codec checksum {v} is not a boolean")));
            }
        }
        Ok(Self)
    }

    /// Decompress one or more frames.
    pub fn decode(&self, encoded: &[u8], expected: Option<usize>) -> Result<Vec<u8>> {
        if let Some(n) = expected {
            // One-shot decode into an exactly sized buffer: works with or
            // without the content size in the frame header.
            let mut out = Vec::with_capacity(n);
            let written = DECOMPRESSOR
                .with_borrow_mut(|d| match d {
                    Some(d) => d.decompress_to_buffer(encoded, &mut out),
                    None => zstd::bulk::Decompressor::new().and_then(|mut fresh| {
                        let written = fresh.decompress_to_buffer(encoded, &mut out);
                        *d = Some(fresh);
                        written
                    }),
                })
                .map_err(|e| corrupt(format!("zstd decompression failed: {e}")))?;
            if written != n {
                return Err(corrupt(format!("zstd decompressed to {written} bytes, expected {n}")));
            }
            return Ok(out);
        }
        let decoder = zstd::stream::read::Decoder::with_buffer(encoded)
            .map_err(|e| corrupt(format!("zstd decompression failed: {e}")))?;
        read_limited(decoder, None, "zstd")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_frames_without_content_size() {
        let data: Vec<u8> = (0..10000u32).map(|i| (i % 13) as u8).collect();
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
        enc.include_contentsize(false).unwrap();
        enc.include_checksum(true).unwrap();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        let encoded = enc.finish().unwrap();
        assert_eq!(ZstdCodec.decode(&encoded, None).unwrap(), data);
        assert_eq!(ZstdCodec.decode(&encoded, Some(10000)).unwrap(), data);
        assert!(ZstdCodec.decode(&encoded, Some(9999)).is_err());
        assert!(ZstdCodec.decode(&encoded[..encoded.len() / 2], Some(10000)).is_err());
        assert!(ZstdCodec.decode(&encoded[..encoded.len() / 2], None).is_err());
    }
}
