//! numcodecs' element filters as Zarr v3 array -> array codecs
//! (`numcodecs.delta`, `numcodecs.fixedscaleoffset`, `numcodecs.quantize`,
//! `numcodecs.astype`, `numcodecs.bitround`, `numcodecs.packbits`), as
//! zarr-python 3 writes them.
//!
//! Example: `{"name": "numcodecs.fixedscaleoffset", "configuration":
//! {"scale": 100, "offset": 0, "dtype": "<f8", "astype": "<i2"}}`. The
//! filter sees the chunk's elements flat, in C order and little-endian
//! (the `bytes` codec after it sets the byte order); its encoded elements
//! are of `astype` (`encode_dtype` for `astype`, `uint8` for `packbits`,
//! whose encoded chunk is one-dimensional: a padding count and the bits).

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::engine::error::{corrupt, Result};
use crate::engine::format::codec::numcodecs::filters::Filter;
use crate::engine::format::codec::ChunkRepr;

/// A numcodecs element filter in a v3 chain.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NumcodecsFilter {
    filter: Filter,
}

impl NumcodecsFilter {
    /// The filter `id` configured by `config` (numcodecs' configuration
    /// without `id`) for chunks of `repr`; a missing `dtype` is the chunk's.
    pub(crate) fn new(id: &str, config: Option<&Map<String, Value>>, repr: &ChunkRepr) -> Result<Self> {
        let mut config = config.cloned().unwrap_or_default();
        if let Some(typestr) = repr.data_type.numpy_dtype() {
            config.entry("dtype").or_insert(Value::String(typestr));
        }
        Ok(Self {
            filter: Filter::from_config(id, &config)?,
        })
    }

    /// The representation this filter encodes `repr` into.
    pub(crate) fn encoded_repr(&self, repr: &ChunkRepr) -> ChunkRepr {
        let data_type = self.filter.encoded_type(repr.data_type);
        let shape = match self.filter {
            Filter::PackBits => vec![1 + repr.num_elements().div_ceil(8)],
            _ => repr.shape.clone(),
        };
        ChunkRepr::new(shape, data_type, vec![0; data_type.size()])
    }

    /// 501 unless [`NumcodecsFilter::encode`] can encode chunks of
    /// `decoded` (`bitround` needs `keepbits` and floats).
    pub(crate) fn check_writable(&self, decoded: &ChunkRepr) -> Result<()> {
        self.filter.check_writable(decoded.data_type)
    }

    /// The encoded elements of `decoded` (little-endian, C order).
    pub(crate) fn encode(&self, array: &[u8], decoded: &ChunkRepr) -> Result<Bytes> {
        self.filter.encode(array, decoded.data_type).map(Bytes::from)
    }

    /// The elements of `decoded` from the encoded ones.
    pub(crate) fn decode(&self, encoded: &[u8], decoded: &ChunkRepr) -> Result<Bytes> {
        let out = self.filter.decode(encoded)?;
        if out.len() != decoded.size_bytes() {
            return Err(corrupt(format!(
                "a numcodecs filter decoded {} bytes, expected {} for shape {:?} of {}",
                out.len(),
                decoded.size_bytes(),
                decoded.shape,
                decoded.data_type.name()
            )));
        }
        Ok(Bytes::from(out))
    }
}
