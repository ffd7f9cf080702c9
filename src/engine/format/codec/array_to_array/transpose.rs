//! The `transpose` codec.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/codecs/transpose/index.html>.
//! Example: `{"name": "transpose", "configuration": {"order": [1, 0]}}`.
//! Encoded dimension `i` is decoded dimension `order[i]`.

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::engine::error::{corrupt, Result};
use crate::engine::format::codec::ChunkRepr;

/// A permutation of the dimensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TransposeCodec {
    order: Vec<usize>,
}

impl TransposeCodec {
    /// Parse the configuration for a chunk of `rank` dimensions. `"C"` and
    /// `"F"` (early drafts) are accepted as the identity and the reversal.
    pub(crate) fn from_json(config: Option<&Map<String, Value>>, rank: usize) -> Result<Self> {
        let value = config
            .and_then(|c| c.get("order"))
            .ok_or_else(|| corrupt("transpose codec without configuration.order"))?;
        let order: Vec<usize> = match value {
            Value::String(s) if s == "C" => (0..rank).collect(),
            Value::String(s) if s == "F" => (0..rank).rev().collect(),
            Value::Array(items) => items
                .iter()
                .map(|v| v.as_u64().map(|u| u as usize))
                .collect::<Option<_>>()
                .ok_or_else(|| corrupt(format!("transpose order {value} is not a list of integers")))?,
            _ => return Err(corrupt(format!("transpose order {value}"))),
        };
        let mut seen = vec![false; rank];
        let valid = order.len() == rank
            && order
                .iter()
                .all(|&d| d < rank && !std::mem::replace(&mut seen[d], true));
        if !valid {
            return Err(corrupt(format!(
                "transpose order {value} is not a permutation of 0..{rank}"
            )));
        }
        Ok(Self { order })
    }

    /// The transposed representation.
    pub(crate) fn encoded_repr(&self, repr: &ChunkRepr) -> ChunkRepr {
        let shape = self.order.iter().map(|&d| repr.shape[d]).collect();
        ChunkRepr::new(shape, repr.data_type, repr.fill_value.clone())
    }

    /// Transpose elements of `decoded` into the encoded order.
    pub(crate) fn encode(&self, array: &[u8], decoded: &ChunkRepr) -> Bytes {
        let (size, moves) = self.moves(decoded);
        let mut out = vec![0u8; array.len()];
        for (enc, dec) in moves.enumerate() {
            out[enc * size..(enc + 1) * size].copy_from_slice(&array[dec * size..(dec + 1) * size]);
        }
        Bytes::from(out)
    }

    /// The element size, and for each encoded element in order the offset
    /// (in elements) of the decoded element it holds.
    fn moves(&self, decoded: &ChunkRepr) -> (usize, impl Iterator<Item = usize>) {
        let rank = decoded.shape.len();
        let mut strides = vec![1usize; rank];
        for d in (0..rank.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * decoded.shape[d + 1] as usize;
        }
        let enc_shape: Vec<usize> = self.order.iter().map(|&d| decoded.shape[d] as usize).collect();
        let enc_strides: Vec<usize> = self.order.iter().map(|&d| strides[d]).collect();
        let count = decoded.num_elements() as usize;
        let mut index = vec![0usize; rank];
        let mut at = 0usize;
        let moves = (0..count).map(move |_| {
            let here = at;
            for d in (0..rank).rev() {
                index[d] += 1;
                at += enc_strides[d];
                if index[d] < enc_shape[d] {
                    break;
                }
                at -= enc_strides[d] * index[d];
                index[d] = 0;
            }
            here
        });
        (decoded.data_type.size(), moves)
    }

    /// Transpose an encoded array back to the `decoded` representation.
    pub(crate) fn decode(&self, encoded: &[u8], decoded: &ChunkRepr) -> Bytes {
        let size = decoded.data_type.size();
        let rank = decoded.shape.len();
        // C-order strides of the decoded array, in elements.
        let mut strides = vec![1usize; rank];
        for d in (0..rank.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * decoded.shape[d + 1] as usize;
        }
        let enc_shape: Vec<usize> = self.order.iter().map(|&d| decoded.shape[d] as usize).collect();
        let enc_strides: Vec<usize> = self.order.iter().map(|&d| strides[d]).collect();
        let mut out = vec![0u8; encoded.len()];
        let mut index = vec![0usize; rank];
        let mut dst = 0usize;
        for src in encoded.chunks_exact(size) {
            out[dst * size..(dst + 1) * size].copy_from_slice(src);
            // Advance the encoded multi-index in C order, tracking the decoded offset.
            for d in (0..rank).rev() {
                index[d] += 1;
                dst += enc_strides[d];
                if index[d] < enc_shape[d] {
                    break;
                }
                dst -= enc_strides[d] * index[d];
                index[d] = 0;
            }
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
    fn transposes_3d() {
        let decoded = ChunkRepr::new(vec![2, 3, 4], DataType::UInt8, vec![0]);
        let codec = TransposeCodec::from_json(json!({"order": [2, 0, 1]}).as_object(), 3).unwrap();
        let enc = codec.encoded_repr(&decoded);
        assert_eq!(enc.shape, vec![4, 2, 3]);
        // encoded[k][i][j] = decoded[i][j][k] = 100*i + 10*j + k
        let mut encoded = Vec::new();
        for k in 0..4u8 {
            for i in 0..2u8 {
                for j in 0..3u8 {
                    encoded.push(100 * i + 10 * j + k);
                }
            }
        }
        let out = codec.decode(&encoded, &decoded);
        let expected: Vec<u8> = (0..2u8)
            .flat_map(|i| (0..3u8).flat_map(move |j| (0..4u8).map(move |k| 100 * i + 10 * j + k)))
            .collect();
        assert_eq!(&out[..], &expected[..]);
    }

    #[test]
    fn rejects_non_permutations() {
        for order in [json!([0, 0]), json!([0]), json!([0, 2]), json!("X")] {
            assert!(TransposeCodec::from_json(json!({"order": order}).as_object(), 2).is_err());
        }
    }
}
