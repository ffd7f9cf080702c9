//! numcodecs' `lzma` compressor (Zarr v2), in its `.xz` (format 1, the
//! default) and `.lzma` (format 2) containers; raw streams (format 3) need
//! their filter chain and are unsupported.
//!
//! Docs: <https://numcodecs.readthedocs.io/en/stable/compression/lzma.html>.
//! Example: `{"id": "lzma", "format": 1, "check": -1, "preset": null, "filters": null}`.

use serde_json::{Map, Value};

use super::check_size;
use crate::engine::error::{corrupt, Error, Result};

/// The container of an lzma stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LzmaCodec {
    /// `.xz`
    Xz,
    /// `.lzma` ("alone")
    Alone,
}

impl LzmaCodec {
    /// The container numcodecs' `format` names.
    pub(crate) fn from_json(config: &Map<String, Value>) -> Result<Self> {
        match config.get("format").map(|f| f.as_i64()) {
            None | Some(Some(0 | 1)) => Ok(Self::Xz),
            Some(Some(2)) => Ok(Self::Alone),
            Some(Some(3)) => Err(Error::Unsupported("lzma raw format (format 3)".into())),
            Some(_) => Err(corrupt(format!("lzma format {}", config["format"]))),
        }
    }

    /// Decompress, writing no more than one byte past `expected` (a
    /// corrupt or hostile stream cannot exhaust memory).
    /// Compress in the configured container (`.xz` or `.lzma`).
    pub(crate) fn encode(&self, decoded: &[u8]) -> Result<Vec<u8>> {
        let mut input = std::io::BufReader::new(decoded);
        let mut out = Vec::new();
        match self {
            Self::Xz => lzma_rs::xz_compress(&mut input, &mut out),
            Self::Alone => lzma_rs::lzma_compress(&mut input, &mut out),
        }
        .map_err(super::encode_failed("lzma"))?;
        Ok(out)
    }

    pub(crate) fn decode(&self, encoded: &[u8], expected: Option<usize>) -> Result<Vec<u8>> {
        let mut input = std::io::BufReader::new(encoded);
        let mut out = Bounded {
            data: Vec::with_capacity(expected.unwrap_or(0)),
            limit: expected.map_or(usize::MAX, |n| n + 1),
        };
        let done = match self {
            Self::Xz => lzma_rs::xz_decompress(&mut input, &mut out),
            Self::Alone => lzma_rs::lzma_decompress(&mut input, &mut out),
        };
        done.map_err(|e| corrupt(format!("lzma decompression failed: {e}")))?;
        check_size(out.data, expected, "lzma")
    }
}

/// A buffer that refuses writes past `limit` bytes.
struct Bounded {
    data: Vec<u8>,
    limit: usize,
}

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.data.len() + buf.len() > self.limit {
            return Err(std::io::Error::other("more data than the chunk holds"));
        }
        self.data.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_truncation() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let mut encoded = Vec::new();
        lzma_rs::xz_compress(&mut &data[..], &mut encoded).unwrap();
        assert_eq!(LzmaCodec::Xz.decode(&encoded, Some(5000)).unwrap(), data);
        assert!(LzmaCodec::Xz.decode(&encoded[..encoded.len() - 5], Some(5000)).is_err());
        let mut alone = Vec::new();
        lzma_rs::lzma_compress(&mut &data[..], &mut alone).unwrap();
        assert_eq!(LzmaCodec::Alone.decode(&alone, None).unwrap(), data);
        assert!(
            LzmaCodec::Xz.decode(&encoded, Some(4999)).is_err(),
            "more than expected"
        );
    }
}
