//! numcodecs' `bz2` compressor (Zarr v2).
//!
//! Docs: <https://numcodecs.readthedocs.io/en/stable/compression/bz2.html>.
//! Example: `{"id": "bz2", "level": 1}`.

use super::read_limited;
use crate::engine::error::Result;

/// bzip2 streams (concatenated streams accepted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bz2Codec {
    /// numcodecs' `level` (1 to 9, default 1).
    pub(crate) level: u32,
}

impl Bz2Codec {
    /// Decompress.
    /// Compress at the configured level.
    pub(crate) fn encode(&self, decoded: &[u8]) -> Result<Vec<u8>> {
        use std::io::Write;
        let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(self.level));
        encoder.write_all(decoded).map_err(super::encode_failed("bz2"))?;
        encoder.finish().map_err(super::encode_failed("bz2"))
    }

    pub(crate) fn decode(&self, encoded: &[u8], expected: Option<usize>) -> Result<Vec<u8>> {
        read_limited(bzip2::read::MultiBzDecoder::new(encoded), expected, "bz2")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn roundtrip_and_truncation() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(1));
        enc.write_all(&data).unwrap();
        let encoded = enc.finish().unwrap();
        assert_eq!(Bz2Codec { level: 1 }.decode(&encoded, Some(5000)).unwrap(), data);
        assert!(Bz2Codec { level: 1 }
            .decode(&encoded[..encoded.len() - 5], Some(5000))
            .is_err());
    }
}
