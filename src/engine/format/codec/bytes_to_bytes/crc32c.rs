//! The `crc32c` codec.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/codecs/crc32c/index.html>.
//! Example: `{"name": "crc32c"}`. The encoded form is the data followed by
//! its CRC-32C, little-endian; the checksum is verified on every read.

use bytes::Bytes;

use crate::engine::error::{corrupt, Result};

/// CRC-32C (Castagnoli) checksum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Crc32cCodec;

impl Crc32cCodec {
    /// Verify and strip the checksum.
    pub(crate) fn decode(&self, encoded: Bytes) -> Result<Bytes> {
        if encoded.len() < 4 {
            return Err(corrupt(format!(
                "crc32c: {} bytes is too short for a checksum",
                encoded.len()
            )));
        }
        let n = encoded.len() - 4;
        let stored = u32::from_le_bytes(encoded[n..].try_into().expect("4 bytes"));
        let actual = crc32c::crc32c(&encoded[..n]);
        if stored != actual {
            return Err(corrupt(format!(
                "crc32c checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
            )));
        }
        Ok(encoded.slice(..n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifies() {
        let mut data = b"hello zarr".to_vec();
        data.extend(crc32c::crc32c(b"hello zarr").to_le_bytes());
        assert_eq!(
            &Crc32cCodec.decode(Bytes::from(data.clone())).unwrap()[..],
            b"hello zarr"
        );
        data[0] ^= 1;
        assert!(Crc32cCodec.decode(Bytes::from(data)).is_err());
        assert!(Crc32cCodec.decode(Bytes::from_static(b"abc")).is_err());
    }
}
