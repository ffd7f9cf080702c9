//! The codec pipeline, in the spec's three kinds.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/core/v3.0.html#codecs>.
//! A chain is zero or more array->array codecs, exactly one array->bytes
//! codec, then zero or more bytes->bytes codecs. The chain is built and
//! validated once per array ([`CodecChain::from_json`]) with the chunk
//! representation each codec sees resolved up front, so decoding only runs
//! the codecs.

pub mod array_to_array;
pub mod array_to_bytes;
pub mod bytes_to_bytes;
pub(crate) mod numcodecs;
pub(crate) mod v2;

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use self::array_to_array::ArrayToArrayCodec;
use self::array_to_bytes::bytes::Endian;
use self::array_to_bytes::sharding::ShardingCodec;
use self::array_to_bytes::ArrayToBytesCodec;
use self::bytes_to_bytes::BytesToBytesCodec;
use self::numcodecs::{Numcodec, V3_PREFIX};
use self::v2::FilterStack;
use crate::buffer_pool::BufferPool;
use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::data_type::DataType;
use crate::engine::format::json::name_and_configuration;

/// What a codec sees of a chunk: its shape, element type and fill value.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkRepr {
    /// Chunk shape.
    pub shape: Vec<u64>,
    /// Element type.
    pub data_type: DataType,
    /// One element's little-endian bytes.
    pub fill_value: Vec<u8>,
}

impl ChunkRepr {
    /// A chunk representation.
    pub fn new(shape: Vec<u64>, data_type: DataType, fill_value: Vec<u8>) -> Self {
        Self {
            shape,
            data_type,
            fill_value,
        }
    }

    /// Elements in the chunk.
    pub(crate) fn num_elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Decoded size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.num_elements() as usize * self.data_type.size()
    }

    /// Whether every element of `chunk` (decoded, little-endian) equals
    /// the fill value as NumPy compares them, a NaN equal to a NaN fill.
    pub(crate) fn is_fill(&self, chunk: &[u8]) -> bool {
        let size = self.fill_value.len();
        if size == 0 || !chunk.len().is_multiple_of(size) {
            return false;
        }
        let nan_unit = match self.data_type {
            DataType::Float16 | DataType::Float32 | DataType::Float64 => Some(size),
            DataType::Complex64 | DataType::Complex128 => Some(size / 2),
            _ => None,
        };
        let Some(unit) = nan_unit.filter(|&u| self.fill_value.chunks_exact(u).any(is_nan)) else {
            return chunk.chunks_exact(size).all(|e| e == &self.fill_value[..]);
        };
        chunk.chunks_exact(size).all(|element| {
            element
                .chunks_exact(unit)
                .zip(self.fill_value.chunks_exact(unit))
                .all(|(e, f)| e == f || (is_nan(e) && is_nan(f)))
        })
    }

    /// A decoded chunk holding only the fill value (zeroed memory from the
    /// allocator when the fill value's bytes are zero).
    pub(crate) fn fill_chunk(&self) -> Vec<u8> {
        let count = self.num_elements() as usize;
        match self.fill_value.iter().all(|&b| b == 0) {
            true => vec![0; count * self.fill_value.len()],
            false => self.fill_value.repeat(count),
        }
    }

    /// [`ChunkRepr::fill_chunk`] in a buffer of `buffers`.
    pub(crate) fn fill_chunk_in(&self, buffers: &BufferPool) -> Vec<u8> {
        let (size, count) = (self.fill_value.len(), self.num_elements() as usize);
        if self.fill_value.iter().all(|&b| b == 0) {
            return buffers.take_zeroed(count * size);
        }
        let mut chunk = buffers.take(count * size);
        for element in chunk.chunks_exact_mut(size) {
            element.copy_from_slice(&self.fill_value);
        }
        chunk
    }
}

/// Whether a little-endian float of 2, 4 or 8 bytes is a NaN.
fn is_nan(float: &[u8]) -> bool {
    match float.len() {
        2 => {
            let bits = u16::from_le_bytes([float[0], float[1]]);
            bits & 0x7c00 == 0x7c00 && bits & 0x03ff != 0
        }
        4 => f32::from_le_bytes(float.try_into().expect("4 bytes")).is_nan(),
        8 => f64::from_le_bytes(float.try_into().expect("8 bytes")).is_nan(),
        _ => false,
    }
}

/// The error of a codec this build decodes but cannot encode (501).
pub(crate) fn cannot_write(what: &str) -> Error {
    Error::Unsupported(format!(
        "writing with {what} (the service reads it but cannot encode it)"
    ))
}

/// The step of a chain that turns elements into bytes: a v3 array -> bytes
/// codec, or a Zarr v2 array's filters and byte order.
#[derive(Debug, Clone)]
enum Serializer {
    Codec(ArrayToBytesCodec),
    V2(FilterStack),
}

impl Serializer {
    fn encoded_size(&self, repr: &ChunkRepr) -> Option<usize> {
        match self {
            Self::Codec(c) => c.encoded_size(repr),
            Self::V2(f) => f.encoded_size(repr),
        }
    }

    fn decode(&self, encoded: Bytes, repr: &ChunkRepr) -> Result<Bytes> {
        match self {
            Self::Codec(c) => c.decode(encoded, repr),
            Self::V2(f) => f.decode(encoded, repr),
        }
    }

    fn encode(&self, array: Bytes, repr: &ChunkRepr, buffers: Option<&Arc<BufferPool>>) -> Result<Bytes> {
        match self {
            Self::Codec(c) => c.encode(array, repr),
            Self::V2(f) => f.encode(array, repr, buffers),
        }
    }
}

/// One codec of a `codecs` list, by its kind.
enum Kind {
    ArrayToArray(ArrayToArrayCodec),
    ArrayToBytes(ArrayToBytesCodec),
    BytesToBytes(BytesToBytesCodec),
}

impl Kind {
    /// The codec named `name` for chunks of `repr`.
    fn from_json(name: &str, config: Option<&serde_json::Map<String, Value>>, repr: &ChunkRepr) -> Result<Self> {
        if let Some(id) = name.strip_prefix(V3_PREFIX) {
            return Ok(match Numcodec::from_v3(id, config)? {
                Numcodec::Filter(_) => Kind::ArrayToArray(ArrayToArrayCodec::numcodecs(id, config, repr)?),
                Numcodec::Bytes(b) => Kind::BytesToBytes(b),
                Numcodec::Elements(e) => Kind::ArrayToBytes(ArrayToBytesCodec::Elements(e)),
            });
        }
        if let Some(a2a) = ArrayToArrayCodec::from_json(name, config, repr)? {
            return Ok(Kind::ArrayToArray(a2a));
        }
        if let Some(a2b) = ArrayToBytesCodec::from_json(name, config, repr)? {
            return Ok(Kind::ArrayToBytes(a2b));
        }
        match BytesToBytesCodec::from_json(name, config)? {
            Some(b2b) => Ok(Kind::BytesToBytes(b2b)),
            None => Err(Error::Unsupported(format!("codec \"{name}\""))),
        }
    }
}

/// A validated chain of codecs, resolved for one chunk representation.
#[derive(Debug, Clone)]
pub struct CodecChain {
    array_to_array: Vec<(ArrayToArrayCodec, ChunkRepr)>,
    array_to_bytes: Serializer,
    /// The representation the array->bytes codec encodes.
    array_to_bytes_repr: ChunkRepr,
    bytes_to_bytes: Vec<BytesToBytesCodec>,
    /// Size of the bytes each bytes->bytes codec decodes to, when fixed.
    decoded_sizes: Vec<Option<usize>>,
    decoded_repr: ChunkRepr,
}

impl CodecChain {
    /// Build the chain described by a `codecs` list for chunks of `repr`.
    pub fn from_json(codecs: &Value, repr: &ChunkRepr) -> Result<Self> {
        let list = codecs
            .as_array()
            .ok_or_else(|| corrupt(format!("codecs {codecs} is not a list")))?;
        let mut array_to_array = Vec::new();
        let mut array_to_bytes = None;
        let mut bytes_to_bytes = Vec::new();
        let mut current = repr.clone();
        for codec in list {
            let (name, config) = name_and_configuration(codec, "codec")?;
            match Kind::from_json(name, config, &current)? {
                Kind::ArrayToArray(a2a) => {
                    if array_to_bytes.is_some() {
                        return Err(corrupt(format!(
                            "codecs: array->array codec \"{name}\" after the array->bytes codec"
                        )));
                    }
                    let next = a2a.encoded_repr(&current);
                    array_to_array.push((a2a, current));
                    current = next;
                }
                Kind::ArrayToBytes(a2b) => {
                    if array_to_bytes.is_some() {
                        return Err(corrupt(format!("codecs: a second array->bytes codec \"{name}\"")));
                    }
                    array_to_bytes = Some(a2b);
                }
                Kind::BytesToBytes(b2b) => {
                    if array_to_bytes.is_none() {
                        return Err(corrupt(format!(
                            "codecs: bytes->bytes codec \"{name}\" before the array->bytes codec"
                        )));
                    }
                    bytes_to_bytes.push(b2b);
                }
            }
        }
        let array_to_bytes = array_to_bytes
            .map(Serializer::Codec)
            .ok_or_else(|| corrupt(format!("codecs {codecs} has no array->bytes codec")))?;
        Ok(Self::assemble(
            array_to_array,
            array_to_bytes,
            current,
            bytes_to_bytes,
            repr,
        ))
    }

    /// The chain of a Zarr v2 array whose chunks decode to `repr`: order
    /// `F` as a transpose, then the `filters` and the dtype's byte order
    /// `endian`, then the `compressor` (numcodecs configurations; null for
    /// none).
    pub(crate) fn from_v2(
        filters: Option<&Value>,
        compressor: Option<&Value>,
        endian: Endian,
        fortran_order: bool,
        repr: &ChunkRepr,
    ) -> Result<Self> {
        let mut array_to_array = Vec::new();
        let mut current = repr.clone();
        if fortran_order && repr.shape.len() > 1 {
            let config = serde_json::json!({"order": "F"});
            let codec = ArrayToArrayCodec::from_json("transpose", config.as_object(), &current)?
                .expect("transpose is an array->array codec");
            let next = codec.encoded_repr(&current);
            array_to_array.push((codec, current));
            current = next;
        }
        // A compressor that is a bytes -> bytes codec stays one (so zstd
        // decodes prefixes and into reused buffers); any other runs as the
        // last filter.
        let (bytes_to_bytes, last) = match compressor {
            None | Some(Value::Null) => (Vec::new(), None),
            Some(config) => match Numcodec::from_json(config, "compressor")? {
                Numcodec::Bytes(b2b) => (vec![b2b], None),
                other => (Vec::new(), Some(other)),
            },
        };
        let array_to_bytes = Serializer::V2(FilterStack::from_json(filters, endian, &current, last)?);
        Ok(Self::assemble(
            array_to_array,
            array_to_bytes,
            current,
            bytes_to_bytes,
            repr,
        ))
    }

    /// A chain from its validated parts; `current` is what the array->bytes
    /// codec encodes.
    fn assemble(
        array_to_array: Vec<(ArrayToArrayCodec, ChunkRepr)>,
        array_to_bytes: Serializer,
        current: ChunkRepr,
        bytes_to_bytes: Vec<BytesToBytesCodec>,
        repr: &ChunkRepr,
    ) -> Self {
        let mut decoded_sizes = Vec::with_capacity(bytes_to_bytes.len());
        let mut size = array_to_bytes.encoded_size(&current);
        for b2b in &bytes_to_bytes {
            decoded_sizes.push(size);
            size = size.and_then(|s| b2b.encoded_size(s));
        }
        Self {
            array_to_array,
            array_to_bytes,
            array_to_bytes_repr: current,
            bytes_to_bytes,
            decoded_sizes,
            decoded_repr: repr.clone(),
        }
    }

    /// The representation this chain decodes to.
    pub(crate) fn decoded_repr(&self) -> &ChunkRepr {
        &self.decoded_repr
    }

    /// The encoded size, when every codec's output size is fixed.
    pub(crate) fn encoded_size(&self) -> Option<usize> {
        let mut size = self.array_to_bytes.encoded_size(&self.array_to_bytes_repr)?;
        for b2b in &self.bytes_to_bytes {
            size = b2b.encoded_size(size)?;
        }
        Some(size)
    }

    /// The sharding codec, when it is the whole chain (no other codec around
    /// it), so that inner chunks can be read from byte ranges of the shard.
    pub(crate) fn partial_sharding(&self) -> Option<&ShardingCodec> {
        match &self.array_to_bytes {
            Serializer::Codec(ArrayToBytesCodec::Sharding(s))
                if self.array_to_array.is_empty() && self.bytes_to_bytes.is_empty() =>
            {
                Some(s)
            }
            _ => None,
        }
    }

    /// The shape of the smallest independently decodable unit: the inner
    /// chunk when sharded (recursively), else the chunk.
    pub fn read_chunk_shape(&self) -> Vec<u64> {
        match self.partial_sharding() {
            Some(s) => s.inner_codecs().read_chunk_shape(),
            None => self.decoded_repr.shape.clone(),
        }
    }

    /// Encode a chunk's C-order, little-endian elements (of
    /// [`CodecChain::decoded_repr`]) with every codec of the chain.
    pub fn encode(&self, decoded: impl Into<Bytes>) -> Result<Bytes> {
        self.encode_in(decoded, None)
    }

    /// [`CodecChain::encode`], the outputs of compressors in buffers of
    /// `buffers` (see [`BytesToBytesCodec::encode_in`]).
    pub(crate) fn encode_in(&self, decoded: impl Into<Bytes>, buffers: Option<&Arc<BufferPool>>) -> Result<Bytes> {
        let mut array: Bytes = decoded.into();
        let expected = self.decoded_repr.size_bytes();
        if array.len() != expected && !self.decoded_repr.data_type.is_variable() {
            return Err(Error::InvalidRequest(format!(
                "a chunk to encode has {} bytes, expected {expected}",
                array.len()
            )));
        }
        for (a2a, repr) in &self.array_to_array {
            array = a2a.encode(array, repr)?;
        }
        let mut bytes = self.array_to_bytes.encode(array, &self.array_to_bytes_repr, buffers)?;
        let element_size = self.array_to_bytes_repr.data_type.size();
        for b2b in &self.bytes_to_bytes {
            bytes = b2b.encode_in(&bytes, element_size, buffers)?;
        }
        Ok(bytes)
    }

    /// 501 naming the first codec of the chain that cannot encode (inner
    /// chains of shards included), so that a write refuses before it
    /// changes anything.
    pub fn check_writable(&self) -> Result<()> {
        for (a2a, repr) in &self.array_to_array {
            a2a.check_writable(repr)?;
        }
        let variable = self.array_to_bytes_repr.data_type.is_variable();
        match &self.array_to_bytes {
            // Shards are written by inner chunk only when no other codec wraps them.
            Serializer::Codec(ArrayToBytesCodec::Sharding(_)) if variable && self.partial_sharding().is_none() => {
                Err(cannot_write(&format!(
                    "{} shards inside other codecs",
                    self.array_to_bytes_repr.data_type.name()
                )))
            }
            Serializer::Codec(c) => c.check_writable(),
            Serializer::V2(f) => f.check_writable(&self.array_to_bytes_repr),
        }
    }

    /// Whether a value can fail to encode: `scale_offset` and `cast_value`
    /// check ranges, lossy zfp refuses NaN and infinities (inner chains of
    /// shards included).
    pub fn checks_values(&self) -> bool {
        let own = self.array_to_array.iter().any(|(a2a, _)| a2a.checks_values())
            || self
                .zfp_config()
                .is_some_and(|z| z.checks_values(self.array_to_bytes_repr.data_type));
        own || self.inner_chain().is_some_and(CodecChain::checks_values)
    }

    /// The zfp mode of the chain's zfp or zfpy codec.
    fn zfp_config(&self) -> Option<&array_to_bytes::zfp::Config> {
        match &self.array_to_bytes {
            Serializer::Codec(c) => c.zfp_config(),
            Serializer::V2(f) => f.zfp_config(),
        }
    }

    /// 400 if a value of `elements` (little-endian, of the chain's decoded
    /// type, in any order) cannot be encoded, so that a write checks its
    /// whole body and refuses before it changes anything.
    pub fn check_values(&self, elements: Bytes) -> Result<()> {
        let mut array = elements;
        for (a2a, repr) in &self.array_to_array {
            if a2a.is_transpose() {
                continue;
            }
            let count = (array.len() / repr.data_type.size().max(1)) as u64;
            let flat = ChunkRepr::new(vec![count], repr.data_type, repr.fill_value.clone());
            array = a2a.encode(array, &flat)?;
        }
        if let Some(zfp) = self.zfp_config() {
            zfp.check_values(&array, self.array_to_bytes_repr.data_type)?;
        }
        match self.inner_chain() {
            Some(inner) => inner.check_values(array),
            None => Ok(()),
        }
    }

    fn inner_chain(&self) -> Option<&CodecChain> {
        match &self.array_to_bytes {
            Serializer::Codec(ArrayToBytesCodec::Sharding(s)) => Some(s.inner_codecs().as_ref()),
            _ => None,
        }
    }

    /// Decode an encoded chunk into its C-order, little-endian elements.
    ///
    /// Errors are [`Error::Corrupt`] without a key; callers attach it.
    pub fn decode(&self, encoded: Bytes) -> Result<Bytes> {
        self.decode_up_to(encoded, None)
    }

    /// The first `prefix` bytes of the decoded chunk (a whole number of
    /// elements, C order, little-endian), decoding no further than needed
    /// where the chain allows: `bytes`, then `zstd`, then only `crc32c`
    /// (verified whole as always). Any other chain decodes the whole chunk
    /// and returns all of it.
    pub fn decode_prefix(&self, encoded: Bytes, prefix: usize) -> Result<Bytes> {
        self.decode_up_to(encoded, Some(prefix).filter(|_| self.prefix_decodable()))
    }

    /// Decode like [`CodecChain::decode`]: into `scratch` (its old contents
    /// dropped, its capacity reused) where the chain allows (`bytes` with
    /// nothing to swap, then `zstd` of a known size, then only `crc32c`),
    /// giving `None`; else the decoded bytes. A buffer reused from chunk to
    /// chunk stays in the cache for the copy that follows and costs no
    /// allocation.
    pub(crate) fn decode_to_scratch(&self, encoded: Bytes, scratch: &mut Vec<u8>) -> Result<Option<Bytes>> {
        let expected = self.decoded_sizes.first().copied().flatten();
        let (Some(expected), true) = (expected, self.scratch_decodable()) else {
            return self.decode(encoded).map(Some);
        };
        let mut bytes = encoded;
        for (b2b, size) in self.bytes_to_bytes.iter().zip(&self.decoded_sizes).skip(1).rev() {
            bytes = b2b.decode(bytes, *size)?;
        }
        let BytesToBytesCodec::Zstd(zstd) = &self.bytes_to_bytes[0] else {
            unreachable!("checked by scratch_decodable")
        };
        zstd.decode_into(&bytes, expected, scratch)?;
        Ok(None)
    }

    /// Whether [`CodecChain::decode_to_scratch`] can decode into its scratch buffer.
    fn scratch_decodable(&self) -> bool {
        let identity = match &self.array_to_bytes {
            Serializer::Codec(ArrayToBytesCodec::Bytes(codec)) => codec.is_identity(&self.array_to_bytes_repr),
            _ => false,
        };
        identity && self.prefix_decodable() && self.decoded_sizes[0] == Some(self.array_to_bytes_repr.size_bytes())
    }

    /// Whether the decoded chunk's leading bytes come from the leading
    /// bytes of one zstd stream: no array->array codec, `bytes`, then `zstd`
    /// innermost and only `crc32c` outside it.
    fn prefix_decodable(&self) -> bool {
        self.array_to_array.is_empty()
            && matches!(self.array_to_bytes, Serializer::Codec(ArrayToBytesCodec::Bytes(_)))
            && matches!(self.bytes_to_bytes.first(), Some(BytesToBytesCodec::Zstd(_)))
            && self.bytes_to_bytes[1..]
                .iter()
                .all(|c| matches!(c, BytesToBytesCodec::Crc32c(_)))
    }

    /// Decode, the innermost zstd codec stopping after `prefix` bytes when
    /// given (and when its frame allows, see [`bytes_to_bytes::zstd::ZstdCodec::decode_prefix`]).
    fn decode_up_to(&self, encoded: Bytes, prefix: Option<usize>) -> Result<Bytes> {
        let mut bytes = encoded;
        let mut partial = false;
        for (i, (b2b, size)) in self.bytes_to_bytes.iter().zip(&self.decoded_sizes).enumerate().rev() {
            bytes = match (b2b, prefix, size) {
                (BytesToBytesCodec::Zstd(zstd), Some(prefix), Some(full)) if i == 0 => {
                    match zstd.decode_prefix(&bytes, *full, prefix)? {
                        Some(part) => {
                            partial = true;
                            Bytes::from(part)
                        }
                        None => b2b.decode(bytes, *size)?,
                    }
                }
                _ => b2b.decode(bytes, *size)?,
            };
        }
        let mut array = match &self.array_to_bytes {
            Serializer::Codec(ArrayToBytesCodec::Bytes(codec)) if partial => {
                codec.decode_prefix(bytes, &self.array_to_bytes_repr)?
            }
            a2b => a2b.decode(bytes, &self.array_to_bytes_repr)?,
        };
        for (a2a, repr) in self.array_to_array.iter().rev() {
            array = a2a.decode(array, repr)?;
        }
        Ok(array)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn repr(shape: &[u64], dt: DataType) -> ChunkRepr {
        ChunkRepr::new(shape.to_vec(), dt, vec![0; dt.size()])
    }

    /// Decoding into a reused buffer gives what a plain decode gives, for
    /// the chains it takes (`bytes` little-endian, `zstd`, `crc32c`) and
    /// those it passes to the plain decode (big-endian, other codecs).
    #[test]
    fn decode_with_a_reused_buffer_equals_decode() {
        let r = repr(&[16, 32], DataType::UInt16);
        let elements: Vec<u8> = (0..512u16).flat_map(|i| (i * 7919).to_le_bytes()).collect();
        let swapped: Vec<u8> = elements.chunks(2).flat_map(|e| [e[1], e[0]]).collect();
        let zstd = zstd::bulk::compress(&elements, 1).unwrap();
        let mut checked = zstd::bulk::compress(&elements, 1).unwrap();
        checked.extend(crc32c::crc32c(&checked).to_le_bytes());
        let le = json!({"name": "bytes", "configuration": {"endian": "little"}});
        let be = json!({"name": "bytes", "configuration": {"endian": "big"}});
        let cases = [
            (json!([le, {"name": "zstd"}]), zstd.clone(), true),
            (json!([le, {"name": "zstd"}, {"name": "crc32c"}]), checked, true),
            (
                json!([be, {"name": "zstd"}]),
                zstd::bulk::compress(&swapped, 1).unwrap(),
                false,
            ),
            (json!([le]), elements.clone(), false),
        ];
        for (codecs, encoded, scratch_used) in cases {
            let chain = CodecChain::from_json(&codecs, &r).unwrap();
            assert_eq!(chain.scratch_decodable(), scratch_used, "{codecs}");
            let plain = chain.decode(Bytes::from(encoded.clone())).unwrap();
            assert_eq!(plain, elements, "{codecs}");
            for mut scratch in [Vec::new(), vec![1u8; 3], vec![2u8; 4096]] {
                let got = chain
                    .decode_to_scratch(Bytes::from(encoded.clone()), &mut scratch)
                    .unwrap();
                assert_eq!(got.is_none(), scratch_used, "{codecs}");
                assert_eq!(got.as_deref().unwrap_or(&scratch), elements, "{codecs}");
                let cut = chain.decode_to_scratch(Bytes::from(encoded[..encoded.len() - 1].to_vec()), &mut scratch);
                assert!(cut.is_err(), "{codecs}: a truncated chunk is an error");
            }
        }
    }

    /// Encoding into a pool's buffers gives the bytes a plain encode gives,
    /// however dirty the buffers it reuses; zstd writes into one of them.
    #[test]
    fn encoding_into_pooled_buffers_gives_the_same_bytes() {
        use crate::buffer_pool::BufferPool;
        use crate::engine::format::codec::bytes_to_bytes::zstd::ZstdCodec;
        let r = repr(&[512, 1024], DataType::Float32); // 2 MiB: pooled
        let elements: Vec<u8> = (0..512 * 1024u32)
            .flat_map(|i| ((i % 977) as f32 * 0.25).to_le_bytes())
            .collect();
        let pool = Arc::new(BufferPool::new(64 << 20));
        let bound = ZstdCodec::bound(elements.len());
        for len in [2 << 20, bound, 3 << 20] {
            drop(BufferPool::into_bytes(&pool, vec![0xA5; len]));
        }
        let le = json!({"name": "bytes", "configuration": {"endian": "little"}});
        let zstd = json!({"name": "zstd", "configuration": {"level": 3, "checksum": false}});
        let v3 = |codecs: Value| CodecChain::from_json(&codecs, &r).unwrap();
        let v2 = |filters: Value, compressor: Value| {
            CodecChain::from_v2(Some(&filters), Some(&compressor), Endian::Little, false, &r).unwrap()
        };
        let chains = [
            v3(json!([le, zstd])),
            v3(json!([le, zstd, {"name": "crc32c"}])),
            v3(json!([le, {"name": "gzip", "configuration": {"level": 1}}])),
            v3(json!([le])),
            v2(
                json!([{"id": "shuffle", "elementsize": 4}]),
                json!({"id": "zstd", "level": 3}),
            ),
        ];
        for (n, chain) in chains.iter().enumerate() {
            let plain = chain.encode(elements.clone()).unwrap();
            for _ in 0..2 {
                let pooled = chain.encode_in(elements.clone(), Some(&pool)).unwrap();
                assert_eq!(pooled, plain, "chain {n}");
            }
        }
        // Alone in a pool, a buffer of the bound is the one zstd writes into.
        let (alone, seeded) = (Arc::new(BufferPool::new(64 << 20)), vec![0xA5; bound]);
        let at = seeded.as_ptr();
        drop(BufferPool::into_bytes(&alone, seeded));
        let pooled = chains[0].encode_in(elements.clone(), Some(&alone)).unwrap();
        assert_eq!(pooled.as_ptr(), at, "zstd wrote into the pooled buffer");
        for fill in [0f32, 7.5] {
            let r = ChunkRepr::new(vec![512, 1024], DataType::Float32, fill.to_le_bytes().to_vec());
            drop(BufferPool::into_bytes(&pool, vec![0xA5; 2 << 20]));
            assert_eq!(r.fill_chunk_in(&pool), r.fill_chunk(), "fill {fill}");
        }
    }

    /// Shards of strings are written by inner chunk, so a plain sharded
    /// string array is writable; one whose shards another codec wraps is
    /// 501 up front (the whole shard would have to be encoded).
    #[test]
    fn string_shards_are_writable_unless_another_codec_wraps_them() {
        let fill = crate::engine::format::vlen::encode_item(b"");
        let r = ChunkRepr::new(vec![4, 6], DataType::String, fill);
        let shard = |after: Vec<Value>| {
            let mut codecs = vec![json!({"name": "sharding_indexed", "configuration": {
                "chunk_shape": [2, 3], "codecs": [{"name": "vlen-utf8"}, {"name": "zstd"}],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}})];
            codecs.extend(after);
            CodecChain::from_json(&Value::Array(codecs), &r).unwrap()
        };
        assert!(shard(vec![]).check_writable().is_ok());
        let wrapped = shard(vec![json!({"name": "crc32c"})]).check_writable().unwrap_err();
        assert!(
            matches!(&wrapped, Error::Unsupported(m) if m.contains("string shards inside other codecs")),
            "{wrapped}"
        );
    }

    /// Every chain that encodes gives back, decoded, what it encoded;
    /// chains it cannot write are 501 naming the codec.
    #[test]
    fn encoded_chunks_decode_to_what_was_encoded() {
        let r = repr(&[6, 10], DataType::Float32);
        let elements: Vec<u8> = (0..60u32).flat_map(|i| (i as f32 * 1.5 - 7.0).to_le_bytes()).collect();
        let le = json!({"name": "bytes", "configuration": {"endian": "little"}});
        let be = json!({"name": "bytes", "configuration": {"endian": "big"}});
        let shard = |location: &str| {
            json!([{"name": "sharding_indexed", "configuration": {
                "chunk_shape": [3, 5], "codecs": [le, {"name": "zstd", "configuration": {"level": 3}}],
                "index_codecs": [le, {"name": "crc32c"}], "index_location": location}}])
        };
        let chains = [
            json!([le]),
            json!([be, {"name": "gzip", "configuration": {"level": 5}}]),
            json!([{"name": "transpose", "configuration": {"order": [1, 0]}}, le, {"name": "zstd", "configuration": {"level": 1, "checksum": true}}]),
            json!([le, {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 5, "shuffle": "bitshuffle", "typesize": 4, "blocksize": 0}}]),
            json!([le, {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 1, "shuffle": "shuffle"}}]),
            json!([le, {"name": "numcodecs.zlib", "configuration": {"level": 4}}]),
            json!([le, {"name": "numcodecs.bz2", "configuration": {"level": 2}}]),
            json!([le, {"name": "numcodecs.lz4", "configuration": {}}]),
            json!([le, {"name": "numcodecs.lzma", "configuration": {}}]),
            json!([le, {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}}, {"name": "numcodecs.adler32"}]),
            json!([le, {"name": "numcodecs.fletcher32"}, {"name": "crc32c"}]),
            shard("start"),
            shard("end"),
        ];
        for codecs in chains {
            let chain = CodecChain::from_json(&codecs, &r).unwrap();
            let encoded = chain
                .encode(elements.clone())
                .unwrap_or_else(|e| panic!("{codecs}: {e}"));
            assert_eq!(chain.decode(encoded).unwrap(), elements, "{codecs}");
        }
        // A bitround without keepbits reads but cannot write.
        let lossy = json!([{"name": "bitround", "configuration": {}}, le]);
        let chain = CodecChain::from_json(&lossy, &r).unwrap();
        let err = chain.encode(elements.clone()).unwrap_err();
        assert!(matches!(&err, Error::Unsupported(m) if m.contains("bitround")), "{err}");
        // Checked up front too, inside shards (whose fill chunks encode nothing).
        assert!(chain.check_writable().is_err());
        let inner_lossy = json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [3, 5], "codecs": [{"name": "bitround", "configuration": {}}, le],
            "index_codecs": [le]}}]);
        let sharded = CodecChain::from_json(&inner_lossy, &r).unwrap();
        assert!(
            sharded.encode(r.fill_chunk()).is_ok(),
            "an all-fill shard encodes no inner chunk"
        );
        assert!(sharded.check_writable().is_err());
        assert!(CodecChain::from_json(&shard("end"), &r)
            .unwrap()
            .check_writable()
            .is_ok());
    }

    #[test]
    fn fill_chunks_compare_as_numpy_does() {
        let nan = |dt: DataType, fill: Vec<u8>| ChunkRepr::new(vec![2], dt, fill);
        let f32s = |v: [f32; 2]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let quiet = f32::NAN.to_le_bytes().to_vec();
        let other_nan = f32::from_bits(0x7fc0_0001).to_le_bytes().to_vec();
        let r = nan(DataType::Float32, quiet.clone());
        assert!(
            r.is_fill(&[other_nan.clone(), quiet.clone()].concat()),
            "any NaN equals a NaN fill"
        );
        assert!(!r.is_fill(&f32s([f32::NAN, 0.0])));
        let zero = nan(DataType::Float32, 0f32.to_le_bytes().to_vec());
        assert!(zero.is_fill(&f32s([0.0, 0.0])));
        assert!(
            !zero.is_fill(&f32s([0.0, -0.0])),
            "-0.0 is stored as zarr-python stores it"
        );
        assert!(!zero.is_fill(&f32s([f32::NAN, f32::NAN])));
        let half = nan(DataType::Float16, vec![0x00, 0x7e]);
        assert!(half.is_fill(&[0x01, 0x7e, 0x00, 0xfe]));
        assert!(!half.is_fill(&[0x00, 0x7c, 0x00, 0x7e]), "infinity is not NaN");
        let ints = nan(DataType::Int16, 7i16.to_le_bytes().to_vec());
        assert!(ints.is_fill(&[7, 0, 7, 0]) && !ints.is_fill(&[7, 0, 7, 1]));
    }

    #[test]
    fn chain_order_is_enforced() {
        let r = repr(&[4], DataType::UInt16);
        let bad = [
            json!([]),
            json!([{"name": "gzip", "configuration": {"level": 1}}, {"name": "bytes", "configuration": {"endian": "little"}}]),
            json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "bytes", "configuration": {"endian": "little"}}]),
            json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "transpose", "configuration": {"order": [0]}}]),
        ];
        for codecs in bad {
            assert!(
                matches!(CodecChain::from_json(&codecs, &r), Err(Error::Corrupt { .. })),
                "{codecs}"
            );
        }
        let unknown = json!([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "foo_codec"}]);
        let err = CodecChain::from_json(&unknown, &r).unwrap_err();
        assert!(
            matches!(&err, Error::Unsupported(m) if m.contains("foo_codec")),
            "{err}"
        );
    }

    #[test]
    fn bare_name_codecs_are_accepted() {
        let r = repr(&[4], DataType::UInt8);
        let chain = CodecChain::from_json(&json!(["bytes", "crc32c"]), &r).unwrap();
        assert_eq!(chain.encoded_size(), Some(8));
    }
}
