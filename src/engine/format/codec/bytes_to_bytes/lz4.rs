//! numcodecs' `lz4` compressor (Zarr v2): a 4-byte little-endian decoded
//! size, then one LZ4 block.
//!
//! Docs: <https://numcodecs.readthedocs.io/en/stable/compression/lz4.html>.
//! Example: `{"id": "lz4", "acceleration": 1}`.

use crate::engine::error::{corrupt, Error, Result};

/// LZ4 blocks in numcodecs' framing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lz4Codec;

/// Largest decoded size accepted when the chain does not know the size.
const MAX_UNKNOWN_SIZE: usize = 1 << 31;

impl Lz4Codec {
    /// Decompress.
    /// numcodecs' framing: the size (4 bytes, little-endian), then an LZ4 block.
    pub(crate) fn encode(&self, decoded: &[u8]) -> Result<Vec<u8>> {
        let size =
            u32::try_from(decoded.len()).map_err(|_| Error::Unsupported("lz4 chunks of 4 GiB or more".into()))?;
        let mut out = size.to_le_bytes().to_vec();
        out.extend(lz4_flex::block::compress(decoded));
        Ok(out)
    }

    pub(crate) fn decode(&self, encoded: &[u8], expected: Option<usize>) -> Result<Vec<u8>> {
        let (header, block) = encoded
            .split_first_chunk::<4>()
            .ok_or_else(|| corrupt("lz4: shorter than its 4-byte size header"))?;
        let size = u32::from_le_bytes(*header) as usize;
        match expected {
            Some(n) if n != size => return Err(corrupt(format!("lz4 block holds {size} bytes, expected {n}"))),
            None if size > MAX_UNKNOWN_SIZE => return Err(corrupt(format!("lz4 block claims {size} bytes"))),
            _ => {}
        }
        let out =
            lz4_flex::block::decompress(block, size).map_err(|e| corrupt(format!("lz4 decompression failed: {e}")))?;
        if out.len() != size {
            return Err(corrupt(format!(
                "lz4 decompressed to {} bytes, expected {size}",
                out.len()
            )));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_truncation() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let mut encoded = (data.len() as u32).to_le_bytes().to_vec();
        encoded.extend(lz4_flex::block::compress(&data));
        assert_eq!(Lz4Codec.decode(&encoded, Some(5000)).unwrap(), data);
        assert_eq!(Lz4Codec.decode(&encoded, None).unwrap(), data);
        assert!(Lz4Codec.decode(&encoded[..encoded.len() - 5], Some(5000)).is_err());
        assert!(Lz4Codec.decode(&encoded, Some(4999)).is_err());
        assert!(Lz4Codec.decode(&[1, 0], None).is_err());
    }
}
