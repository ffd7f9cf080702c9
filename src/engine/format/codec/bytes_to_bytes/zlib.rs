//! numcodecs' `zlib` compressor (Zarr v2; `numcodecs.zlib` in v3).
//!
//! Docs: <https://numcodecs.readthedocs.io/en/stable/compression/zlib.html>.
//! Example: `{"id": "zlib", "level": 1}`.

use super::read_limited;
use crate::engine::error::Result;

/// zlib (RFC 1950).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ZlibCodec {
    /// numcodecs' `level` (default 1).
    pub(crate) level: u32,
}

impl ZlibCodec {
    /// Decompress.
    /// Compress at the configured level.
    pub(crate) fn encode(&self, decoded: &[u8]) -> Result<Vec<u8>> {
        use std::io::Write;
        let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(self.level));
        encoder.write_all(decoded).map_err(super::encode_failed("zlib"))?;
        encoder.finish().map_err(super::encode_failed("zlib"))
    }

    pub(crate) fn decode(&self, encoded: &[u8], expected: Option<usize>) -> Result<Vec<u8>> {
        read_limited(flate2::read::ZlibDecoder::new(encoded), expected, "zlib")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn roundtrip_and_truncation() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(1));
        enc.write_all(&data).unwrap();
        let encoded = enc.finish().unwrap();
        assert_eq!(ZlibCodec { level: 1 }.decode(&encoded, Some(5000)).unwrap(), data);
        assert!(ZlibCodec { level: 1 }
            .decode(&encoded[..encoded.len() - 5], Some(5000))
            .is_err());
    }
}
