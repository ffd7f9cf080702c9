//! The `gzip` codec.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/codecs/gzip/index.html>.
//! Example: `{"name": "gzip", "configuration": {"level": 5}}`.

use serde_json::{Map, Value};

use super::{int_field, read_limited};
use crate::engine::error::Result;

/// gzip (RFC 1952); decoding accepts concatenated members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GzipCodec {
    level: u32,
}

impl GzipCodec {
    /// Validate the configuration (`level` 0..=9).
    pub(crate) fn from_json(config: Option<&Map<String, Value>>) -> Result<Self> {
        let level = int_field(config, "gzip", "level", 0..=9, Some(6))?;
        Ok(Self { level: level as u32 })
    }

    /// Decompress.
    /// Compress at the configured level.
    pub(crate) fn encode(&self, decoded: &[u8]) -> Result<Vec<u8>> {
        use std::io::Write;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(self.level));
        encoder.write_all(decoded).map_err(super::encode_failed("gzip"))?;
        encoder.finish().map_err(super::encode_failed("gzip"))
    }

    pub(crate) fn decode(&self, encoded: &[u8], expected: Option<usize>) -> Result<Vec<u8>> {
        read_limited(flate2::read::MultiGzDecoder::new(encoded), expected, "gzip")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn roundtrip_and_truncation() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(5));
        enc.write_all(&data).unwrap();
        let encoded = enc.finish().unwrap();
        assert_eq!(
            GzipCodec::from_json(None)
                .unwrap()
                .decode(&encoded, Some(5000))
                .unwrap(),
            data
        );
        assert_eq!(
            GzipCodec::from_json(None).unwrap().decode(&encoded, None).unwrap(),
            data
        );
        assert!(GzipCodec::from_json(None)
            .unwrap()
            .decode(&encoded[..encoded.len() - 9], Some(5000))
            .is_err());
        assert!(GzipCodec::from_json(None)
            .unwrap()
            .decode(&encoded, Some(4999))
            .is_err());
    }
}
