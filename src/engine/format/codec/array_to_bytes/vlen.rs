//! The `vlen-utf8` and `vlen-bytes` codecs (and numcodecs' `VLenUTF8` and
//! `VLenBytes` filters, which write the same bytes).
//!
//! Spec: <https://github.com/zarr-developers/zarr-extensions/tree/main/codecs/vlen-utf8>,
//! numcodecs: <https://numcodecs.readthedocs.io/en/stable/other/vlen.html>.
//! Example: `{"name": "vlen-utf8", "configuration": {}}`. A chunk is a
//! little-endian `u32` element count, then each element in C order as a
//! `u32` byte length and the bytes; decoded, it is the same bytes without
//! the count ([`crate::engine::format::vlen`]).

use bytes::Bytes;

use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::codec::ChunkRepr;
use crate::engine::format::data_type::DataType;
use crate::engine::format::vlen::ranges;

/// `vlen-utf8` (elements must be UTF-8) or `vlen-bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VlenCodec {
    utf8: bool,
}

impl VlenCodec {
    /// The codec named `name` for chunks of `repr`.
    pub(crate) fn new(name: &str, repr: &ChunkRepr) -> Result<Self> {
        if !repr.data_type.is_variable() {
            return Err(corrupt(format!(
                "the {name} codec is for variable-length data types, not {}",
                repr.data_type.name()
            )));
        }
        let utf8 = match name {
            "vlen-utf8" => repr.data_type == DataType::String,
            "vlen-bytes" => false,
            other => return Err(Error::Unsupported(format!("codec \"{other}\""))),
        };
        Ok(Self { utf8 })
    }

    /// The elements of `encoded`, checked: the count matches the chunk,
    /// every length lies inside the chunk, and text is UTF-8.
    pub(crate) fn decode(&self, encoded: Bytes, repr: &ChunkRepr) -> Result<Bytes> {
        let count = encoded
            .get(..4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as u64)
            .ok_or_else(|| corrupt(format!("a {}-byte vlen chunk has no element count", encoded.len())))?;
        if count != repr.num_elements() {
            return Err(corrupt(format!(
                "a vlen chunk of {count} elements where the chunk shape {:?} holds {}",
                repr.shape,
                repr.num_elements()
            )));
        }
        let body = encoded.slice(4..);
        let items = ranges(&body, Some(count as usize))?;
        if self.utf8 {
            for (i, r) in items.into_iter().enumerate() {
                if std::str::from_utf8(&body[r]).is_err() {
                    return Err(corrupt(format!("element {i} of a vlen-utf8 chunk is not UTF-8")));
                }
            }
        }
        Ok(body)
    }

    /// Encode the chunk's elements (each a `u32` length and its bytes, in
    /// C order): the element count, then the elements (text checked UTF-8).
    pub(crate) fn encode(&self, decoded: &[u8], repr: &ChunkRepr) -> Result<Bytes> {
        let items = ranges(decoded, Some(repr.num_elements() as usize))
            .map_err(|e| Error::Internal(format!("a vlen chunk to encode: {e}")))?;
        if self.utf8 {
            if let Some(i) = items
                .iter()
                .position(|r| std::str::from_utf8(&decoded[r.clone()]).is_err())
            {
                return Err(Error::InvalidRequest(format!(
                    "element {i} of a string chunk is not UTF-8"
                )));
            }
        }
        let mut out = Vec::with_capacity(4 + decoded.len());
        out.extend((items.len() as u32).to_le_bytes());
        out.extend_from_slice(decoded);
        Ok(Bytes::from(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::format::vlen::encode_item;

    fn chunk(items: &[&[u8]]) -> Bytes {
        let mut out = (items.len() as u32).to_le_bytes().to_vec();
        out.extend(items.iter().flat_map(|i| encode_item(i)));
        Bytes::from(out)
    }

    #[test]
    fn checks_count_lengths_and_utf8() {
        let repr = ChunkRepr::new(vec![2], DataType::String, encode_item(b""));
        let codec = VlenCodec::new("vlen-utf8", &repr).unwrap();
        assert_eq!(
            codec.decode(chunk(&[b"a", "é".as_bytes()]), &repr).unwrap().len(),
            4 + 1 + 4 + 2
        );
        assert!(codec.decode(chunk(&[b"a"]), &repr).is_err());
        assert!(codec.decode(chunk(&[b"a", b"\xff"]), &repr).is_err());
        let cut = chunk(&[b"a", b"bc"]);
        assert!(codec.decode(cut.slice(..cut.len() - 1), &repr).is_err());
        assert!(codec.decode(Bytes::from_static(b"\x02\x00"), &repr).is_err());
        let bytes = ChunkRepr::new(
            vec![2],
            DataType::Bytes(crate::engine::format::data_type::BytesName::Bytes),
            encode_item(b""),
        );
        let codec = VlenCodec::new("vlen-bytes", &bytes).unwrap();
        assert!(codec.decode(chunk(&[b"a", b"\xff"]), &bytes).is_ok());
        let items: Vec<u8> = [&b"a"[..], "é".as_bytes()]
            .iter()
            .flat_map(|i| encode_item(i))
            .collect();
        let utf8 = VlenCodec::new("vlen-utf8", &repr).unwrap();
        assert_eq!(utf8.encode(&items, &repr).unwrap(), chunk(&[b"a", "é".as_bytes()]));
        assert!(utf8.encode(&encode_item(b"\xff").repeat(2), &repr).is_err());
        let numbers = ChunkRepr::new(vec![2], DataType::UInt8, vec![0]);
        assert!(VlenCodec::new("vlen-utf8", &numbers).is_err());
    }
}
