//! numcodecs' `shuffle` (Zarr v2 filter; `numcodecs.shuffle` in v3).
//!
//! Docs: <https://numcodecs.readthedocs.io/en/stable/filter/shuffle.html>.
//! Example: `{"id": "shuffle", "elementsize": 4}`. Byte `b` of element `i`
//! is stored at `b * count + i`; bytes past the last whole element stay
//! where they are.

use serde_json::{Map, Value};

use super::int_field;
use crate::engine::error::Result;

/// Bytes of each element grouped by their position in the element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShuffleCodec {
    element_size: usize,
}

impl ShuffleCodec {
    /// From a numcodecs configuration (`elementsize`, default 4).
    pub(crate) fn from_json(config: &Map<String, Value>) -> Result<Self> {
        let size = int_field(Some(config), "shuffle", "elementsize", 0..=1024, Some(4))?;
        Ok(Self {
            element_size: size as usize,
        })
    }

    /// Undo the shuffle.
    /// Byte planes: every element's first byte, then every second byte, ...
    pub(crate) fn encode(&self, decoded: &[u8]) -> Vec<u8> {
        let size = self.element_size;
        if size <= 1 {
            return decoded.to_vec();
        }
        let count = decoded.len() / size;
        let mut out = decoded.to_vec();
        for (i, element) in decoded[..count * size].chunks_exact(size).enumerate() {
            for (b, &byte) in element.iter().enumerate() {
                out[b * count + i] = byte;
            }
        }
        out
    }

    pub(crate) fn decode(&self, encoded: &[u8]) -> Vec<u8> {
        let size = self.element_size;
        if size <= 1 {
            return encoded.to_vec();
        }
        let count = encoded.len() / size;
        let mut out = encoded.to_vec();
        for (b, plane) in encoded[..count * size].chunks_exact(count.max(1)).enumerate() {
            for (i, &byte) in plane.iter().enumerate() {
                out[i * size + b] = byte;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codec(size: u64) -> ShuffleCodec {
        ShuffleCodec::from_json(json!({"elementsize": size}).as_object().unwrap()).unwrap()
    }

    #[test]
    fn undoes_numcodecs_layout() {
        // Elements [0x0102, 0x0304, 0x0506] stored low bytes first, then high bytes.
        assert_eq!(codec(2).decode(&[2, 4, 6, 1, 3, 5]), vec![2, 1, 4, 3, 6, 5]);
        // A trailing partial element stays in place.
        assert_eq!(codec(2).decode(&[2, 4, 1, 3, 9]), vec![2, 1, 4, 3, 9]);
        assert_eq!(codec(4).decode(&[1, 2, 3]), vec![1, 2, 3]);
        assert_eq!(codec(1).decode(&[1, 2, 3]), vec![1, 2, 3]);
        assert!(ShuffleCodec::from_json(json!({"elementsize": -1}).as_object().unwrap()).is_err());
    }
}
