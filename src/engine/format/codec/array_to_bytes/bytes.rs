//! The `bytes` codec.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/codecs/bytes/index.html>.
//! Example: `{"name": "bytes", "configuration": {"endian": "little"}}`; the
//! configuration may be absent for single-byte types.

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::engine::error::{corrupt, Result};
use crate::engine::format::codec::ChunkRepr;

/// Byte order of multi-byte elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endian {
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
}

/// The `bytes` codec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BytesCodec {
    endian: Option<Endian>,
}

impl BytesCodec {
    /// Parse the configuration for chunks of `repr`.
    pub(crate) fn from_json(config: Option<&Map<String, Value>>, repr: &ChunkRepr) -> Result<Self> {
        if repr.data_type.is_variable() {
            return Err(corrupt(format!(
                "the bytes codec cannot encode {}: it needs vlen-utf8 or vlen-bytes",
                repr.data_type.name()
            )));
        }
        let endian = match config.and_then(|c| c.get("endian")) {
            None => None,
            Some(Value::String(s)) if s == "little" => Some(Endian::Little),
            Some(Value::String(s)) if s == "big" => Some(Endian::Big),
            Some(other) => return Err(corrupt(format!("bytes codec endian {other}"))),
        };
        if endian.is_none() && repr.data_type.swap_unit() > 1 {
            return Err(corrupt(format!(
                "bytes codec without endian for the multi-byte data type {}",
                repr.data_type.name()
            )));
        }
        Ok(Self { endian })
    }

    /// A codec for elements of `repr` stored in `endian` byte order.
    pub(crate) fn new(endian: Endian, repr: &ChunkRepr) -> Self {
        let endian = (repr.data_type.swap_unit() > 1).then_some(endian);
        Self { endian }
    }

    /// The chunk's elements, little-endian; the size must be exact.
    pub(crate) fn decode(&self, encoded: Bytes, repr: &ChunkRepr) -> Result<Bytes> {
        let expected = repr.size_bytes();
        if encoded.len() != expected {
            return Err(corrupt(format!(
                "decoded chunk has {} bytes, expected {expected} for shape {:?} of {}",
                encoded.len(),
                repr.shape,
                repr.data_type.name()
            )));
        }
        Ok(self.to_little_endian(encoded, repr))
    }

    /// The chunk's little-endian elements in the configured byte order.
    pub(crate) fn encode(&self, array: Bytes, repr: &ChunkRepr) -> Bytes {
        // Swapping is its own inverse.
        self.to_little_endian(array, repr)
    }

    /// The first `encoded.len()` bytes of the chunk's elements (a whole
    /// number of elements), little-endian.
    pub(crate) fn decode_prefix(&self, encoded: Bytes, repr: &ChunkRepr) -> Result<Bytes> {
        if encoded.len() > repr.size_bytes() || !encoded.len().is_multiple_of(repr.data_type.size()) {
            return Err(corrupt(format!(
                "a prefix of {} bytes does not fit chunks of shape {:?} of {}",
                encoded.len(),
                repr.shape,
                repr.data_type.name()
            )));
        }
        Ok(self.to_little_endian(encoded, repr))
    }

    /// Whether encoded chunks of `repr` are their little-endian elements as they are.
    pub(crate) fn is_identity(&self, repr: &ChunkRepr) -> bool {
        self.endian != Some(Endian::Big) || repr.data_type.swap_unit() == 1
    }

    fn to_little_endian(&self, encoded: Bytes, repr: &ChunkRepr) -> Bytes {
        if self.is_identity(repr) {
            return encoded;
        }
        let unit = repr.data_type.swap_unit();
        let mut out = encoded.to_vec();
        for element in out.chunks_exact_mut(unit) {
            element.reverse();
        }
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::format::data_type::DataType;
    use serde_json::json;

    #[test]
    fn big_endian_complex_swaps_each_part() {
        let repr = ChunkRepr::new(vec![1], DataType::Complex64, vec![0; 8]);
        let codec = BytesCodec::from_json(json!({"endian": "big"}).as_object(), &repr).unwrap();
        let mut enc = 1.5f32.to_be_bytes().to_vec();
        enc.extend(2.5f32.to_be_bytes());
        let out = codec.decode(Bytes::from(enc), &repr).unwrap();
        assert_eq!(&out[..4], 1.5f32.to_le_bytes());
        assert_eq!(&out[4..], 2.5f32.to_le_bytes());
    }

    #[test]
    fn wrong_size_is_corrupt_and_endian_rules_hold() {
        let repr = ChunkRepr::new(vec![4], DataType::UInt16, vec![0; 2]);
        let codec = BytesCodec::from_json(json!({"endian": "little"}).as_object(), &repr).unwrap();
        assert!(codec.decode(Bytes::from(vec![0u8; 7]), &repr).is_err());
        assert!(BytesCodec::from_json(None, &repr).is_err());
        let single = ChunkRepr::new(vec![4], DataType::UInt8, vec![0]);
        assert!(BytesCodec::from_json(None, &single).is_ok());
    }
}
