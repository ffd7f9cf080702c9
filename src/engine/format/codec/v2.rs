//! The array -> bytes step of a Zarr v2 array: its `filters` and its
//! dtype's byte order.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v2/v2.0.html#filters>.
//! A v2 chunk is encoded as `compressor.encode(filters[n-1].encode(...
//! filters[0].encode(array bytes in the dtype's byte order and the array's
//! order)))`. The chain built for a v2 array (`CodecChain::from_v2`) is
//! `transpose` (order `F`), then this step, then the compressor as a
//! bytes -> bytes codec: decoding runs the filters in reverse, then turns
//! the dtype's byte order into little-endian. Any numcodecs codec may be a
//! filter (kerchunk's HDF5 translation puts `zlib` there) and any may be the
//! compressor; a compressor that is not a bytes -> bytes codec (`delta`,
//! `pcodec`) becomes the last filter.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use super::array_to_bytes::bytes::{BytesCodec, Endian};
use super::array_to_bytes::vlen::VlenCodec;
use super::numcodecs::filters::Filter;
use super::numcodecs::Numcodec;
use super::ChunkRepr;
use crate::buffer_pool::BufferPool;
use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::data_type::DataType;
use crate::engine::format::json::numcodecs_id;

/// A v2 array's filters and byte order.
#[derive(Debug, Clone)]
pub(crate) struct FilterStack {
    /// In the order written (applied in reverse when decoding), each with
    /// the element type it encodes (a filter's output is another type;
    /// after a bytes codec, `uint8`).
    filters: Vec<(Numcodec, DataType)>,
    /// The dtype's byte order.
    bytes: BytesCodec,
    /// For object arrays, the first filter: `vlen-utf8` or `vlen-bytes`,
    /// which turns elements into bytes.
    vlen: Option<VlenCodec>,
}

impl FilterStack {
    /// The `filters` list (null or a list of numcodecs configurations) for
    /// elements of `repr` stored in `endian` byte order, and a compressor
    /// that is not a bytes -> bytes codec, which runs after them.
    pub(crate) fn from_json(
        filters: Option<&Value>,
        endian: Endian,
        repr: &ChunkRepr,
        last: Option<Numcodec>,
    ) -> Result<Self> {
        let mut list = match filters {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(list)) => &list[..],
            Some(other) => return Err(corrupt(format!("filters {other} is neither null nor a list"))),
        };
        let mut vlen = None;
        if repr.data_type.is_variable() {
            let first = list
                .first()
                .ok_or_else(|| Error::Unsupported("dtype \"|O\" without an object codec filter".into()))?;
            vlen = Some(VlenCodec::new(numcodecs_id(first, "filter")?.0, repr)?);
            list = &list[1..];
        }
        let mut codecs: Vec<Numcodec> = list
            .iter()
            .map(|f| Numcodec::from_json(f, "filter"))
            .collect::<Result<_>>()?;
        codecs.extend(last);
        let mut data_type = repr.data_type;
        let mut filters = Vec::with_capacity(codecs.len());
        for codec in codecs {
            let input = data_type;
            data_type = match &codec {
                Numcodec::Filter(f) => f.encoded_type(data_type),
                Numcodec::Bytes(_) | Numcodec::Elements(_) => DataType::UInt8,
            };
            filters.push((codec, input));
        }
        Ok(Self {
            filters,
            bytes: BytesCodec::new(endian, repr),
            vlen,
        })
    }

    /// The size of the encoded data, when the filters fix it.
    pub(crate) fn encoded_size(&self, repr: &ChunkRepr) -> Option<usize> {
        if self.vlen.is_some() {
            return None;
        }
        let mut size = repr.size_bytes();
        for (filter, _) in &self.filters {
            size = match filter {
                Numcodec::Filter(f) => f.encoded_size(size)?,
                Numcodec::Bytes(b) => b.encoded_size(size)?,
                Numcodec::Elements(_) => return None,
            };
        }
        Some(size)
    }

    /// The zfp mode of a `zfpy` compressor or filter (its elements are
    /// checked as the chunk's: the filters before it keep NaN a NaN).
    pub(crate) fn zfp_config(&self) -> Option<&super::array_to_bytes::zfp::Config> {
        self.filters.iter().find_map(|(f, _)| match f {
            Numcodec::Elements(e) => e.zfp_config(),
            _ => None,
        })
    }

    /// 501 unless [`FilterStack::encode`] can encode chunks of `repr`.
    pub(crate) fn check_writable(&self, repr: &ChunkRepr) -> Result<()> {
        for (filter, data_type) in &self.filters {
            match filter {
                Numcodec::Filter(Filter::BitRound { .. }) if !self.bytes.is_identity(repr) => {
                    return Err(super::cannot_write("bitround of big-endian elements"))
                }
                Numcodec::Filter(f) => f.check_writable(*data_type)?,
                Numcodec::Elements(e) => e.check_writable()?,
                Numcodec::Bytes(_) => {}
            }
        }
        Ok(())
    }

    /// How many elements the filter at `at` encodes: the chunk's, unless an
    /// earlier filter changed the count (`packbits`, a bytes codec) or the
    /// elements are variable-length.
    fn count_before(&self, at: usize, repr: &ChunkRepr) -> Option<usize> {
        let kept = self.filters[..at].iter().all(|(f, _)| match f {
            Numcodec::Filter(f) => !matches!(f, Filter::PackBits),
            Numcodec::Bytes(_) | Numcodec::Elements(_) => false,
        });
        (kept && self.vlen.is_none()).then(|| repr.num_elements() as usize)
    }

    /// Encode C-order little-endian elements of `repr`: the dtype's byte
    /// order, then the filters in order, compressors writing into buffers
    /// of `buffers` when given (as `BytesToBytesCodec::encode_in`).
    pub(crate) fn encode(&self, array: Bytes, repr: &ChunkRepr, buffers: Option<&Arc<BufferPool>>) -> Result<Bytes> {
        let mut data = match &self.vlen {
            Some(vlen) => vlen.encode(&array, repr)?,
            None => self.bytes.encode(array, repr),
        };
        for (at, (filter, data_type)) in self.filters.iter().enumerate() {
            data = match filter {
                Numcodec::Filter(f) => Bytes::from(f.encode(&data, *data_type)?),
                Numcodec::Bytes(b) => b.encode_in(&data, data_type.size(), buffers)?,
                Numcodec::Elements(e) => {
                    // The elements' shape: the chunk's, unless a filter changed their count.
                    let count = data.len() / data_type.size().max(1);
                    let shape = match self.count_before(at, repr) {
                        Some(_) => repr.shape.clone(),
                        None => vec![count as u64],
                    };
                    Bytes::from(e.encode(&data, *data_type, &shape)?)
                }
            };
        }
        Ok(data)
    }

    /// Decode into C-order (of the encoded layout) little-endian elements of `repr`.
    pub(crate) fn decode(&self, encoded: Bytes, repr: &ChunkRepr) -> Result<Bytes> {
        let mut data = encoded;
        for (at, (filter, data_type)) in self.filters.iter().enumerate().rev() {
            data = match filter {
                Numcodec::Filter(f) => Bytes::from(f.decode(&data)?),
                Numcodec::Bytes(b) => b.decode(data, None)?,
                Numcodec::Elements(e) => Bytes::from(e.decode(&data, *data_type, self.count_before(at, repr))?),
            };
        }
        match &self.vlen {
            Some(vlen) => vlen.decode(data, repr),
            None => self.bytes.decode(data, repr),
        }
    }
}
