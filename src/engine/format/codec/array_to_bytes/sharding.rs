//! The `sharding_indexed` codec.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/codecs/sharding-indexed/index.html> (ZEP 2).
//! Example:
//! ```json
//! {"name": "sharding_indexed", "configuration": {
//!   "chunk_shape": [32, 32],
//!   "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
//!   "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
//!   "index_location": "end"}}
//! ```
//! The index is a `uint64` array of shape `chunks_per_shard + [2]` holding
//! (offset, nbytes) per inner chunk in C order; both `2^64-1` marks an empty
//! inner chunk. `index_location` absent means `end` (tensorstore omits it).
//! The index size comes from the index codecs, never a constant.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::engine::error::{corrupt, Result};
use crate::engine::format::codec::{ChunkRepr, CodecChain};
use crate::engine::format::copy::{copy_block, Block};
use crate::engine::format::data_type::DataType;
use crate::engine::format::json::u64_list;

/// Where the index sits in the shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IndexLocation {
    /// The first bytes of the shard.
    Start,
    /// The last bytes of the shard.
    End,
}

/// The sharding codec, resolved for one shard shape.
#[derive(Debug, Clone)]
pub struct ShardingCodec {
    chunks_per_shard: Vec<u64>,
    inner: Arc<CodecChain>,
    index: CodecChain,
    index_location: IndexLocation,
    index_size: usize,
}

const EMPTY: u64 = u64::MAX;

impl ShardingCodec {
    /// Parse the configuration for shards of `repr`.
    pub fn from_json(config: Option<&Map<String, Value>>, repr: &ChunkRepr) -> Result<Self> {
        let config = config.ok_or_else(|| corrupt("sharding_indexed codec without configuration"))?;
        let get = |name: &str| {
            config
                .get(name)
                .ok_or_else(|| corrupt(format!("sharding_indexed configuration has no {name}")))
        };
        let inner_shape = u64_list(get("chunk_shape")?, "sharding_indexed chunk_shape")?;
        let divides = inner_shape.len() == repr.shape.len()
            && inner_shape.iter().zip(&repr.shape).all(|(i, s)| *i > 0 && s % i == 0);
        if !divides {
            return Err(corrupt(format!(
                "sharding_indexed chunk_shape {inner_shape:?} does not evenly divide the shard shape {:?}",
                repr.shape
            )));
        }
        let chunks_per_shard: Vec<u64> = repr.shape.iter().zip(&inner_shape).map(|(s, i)| s / i).collect();
        let inner_repr = ChunkRepr::new(inner_shape, repr.data_type, repr.fill_value.clone());
        let inner = Arc::new(CodecChain::from_json(get("codecs")?, &inner_repr)?);
        let mut index_shape = chunks_per_shard.clone();
        index_shape.push(2);
        let index_repr = ChunkRepr::new(index_shape, DataType::UInt64, EMPTY.to_le_bytes().to_vec());
        let index = CodecChain::from_json(get("index_codecs")?, &index_repr)?;
        let index_size = index.encoded_size().ok_or_else(|| {
            corrupt(format!(
                "sharding_indexed index_codecs {} do not have a fixed encoded size",
                config["index_codecs"]
            ))
        })?;
        let index_location = match config.get("index_location") {
            None => IndexLocation::End,
            Some(Value::String(s)) if s == "end" => IndexLocation::End,
            Some(Value::String(s)) if s == "start" => IndexLocation::Start,
            Some(other) => return Err(corrupt(format!("sharding_indexed index_location {other}"))),
        };
        Ok(Self {
            chunks_per_shard,
            inner,
            index,
            index_location,
            index_size,
        })
    }

    /// Inner chunks along each dimension of a shard.
    pub(crate) fn chunks_per_shard(&self) -> &[u64] {
        &self.chunks_per_shard
    }

    /// The inner chunk shape.
    pub(crate) fn inner_shape(&self) -> &[u64] {
        &self.inner.decoded_repr().shape
    }

    /// The codecs of inner chunks.
    pub(crate) fn inner_codecs(&self) -> &Arc<CodecChain> {
        &self.inner
    }

    /// Where the index is.
    pub(crate) fn index_location(&self) -> IndexLocation {
        self.index_location
    }

    /// Encoded size of the index in bytes.
    pub(crate) fn index_size(&self) -> usize {
        self.index_size
    }

    /// Decode and validate an encoded index of a shard of `shard_size` bytes.
    pub fn decode_index(&self, encoded: Bytes, shard_size: u64) -> Result<ShardIndex> {
        if encoded.len() != self.index_size {
            return Err(corrupt(format!(
                "shard of {shard_size} bytes is too short for its {}-byte index",
                self.index_size
            )));
        }
        let decoded = self.index.decode(encoded)?;
        let entries: Vec<u64> = decoded
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect();
        for (i, pair) in entries.chunks_exact(2).enumerate() {
            let (offset, nbytes) = (pair[0], pair[1]);
            if offset == EMPTY && nbytes == EMPTY {
                continue;
            }
            if offset == EMPTY || nbytes == EMPTY {
                return Err(corrupt(format!(
                    "shard index entry {i} has offset {offset} and nbytes {nbytes}: only one is 2^64-1"
                )));
            }
            let inside = offset.checked_add(nbytes).is_some_and(|end| end <= shard_size);
            if !inside {
                return Err(corrupt(format!(
                    "shard index entry {i} (offset {offset}, nbytes {nbytes}) lies outside the shard of {shard_size} bytes"
                )));
            }
        }
        Ok(ShardIndex { entries })
    }

    /// The byte range of the index in a shard of `shard_size` bytes.
    pub(crate) fn index_range(&self, shard_size: u64) -> Range<u64> {
        let n = self.index_size as u64;
        match self.index_location {
            IndexLocation::Start => 0..n.min(shard_size),
            IndexLocation::End => shard_size.saturating_sub(n)..shard_size,
        }
    }

    /// Decode a whole shard.
    pub fn decode(&self, shard: Bytes, repr: &ChunkRepr) -> Result<Bytes> {
        if repr.data_type.is_variable() {
            // Only reached when other codecs wrap the sharding codec; the
            // read path reads shards of a plain sharded array by inner chunk.
            return Err(crate::engine::error::Error::Unsupported(format!(
                "{} shards inside other codecs",
                repr.data_type.name()
            )));
        }
        let size = shard.len() as u64;
        if size < self.index_size as u64 {
            return Err(corrupt(format!(
                "shard of {size} bytes is too short for its {}-byte index",
                self.index_size
            )));
        }
        let range = self.index_range(size);
        let index = self.decode_index(shard.slice(range.start as usize..range.end as usize), size)?;
        let mut out = repr.fill_chunk();
        let inner_shape = self.inner_shape();
        for (i, coords) in self.inner_coords().enumerate() {
            let Some(range) = index.chunk_range(i) else {
                continue;
            };
            let decoded = self
                .inner
                .decode(shard.slice(range.start as usize..range.end as usize))?;
            let block = Block {
                src_start: vec![0; coords.len()],
                src_step: vec![1; coords.len()],
                dst_start: coords.iter().zip(inner_shape).map(|(c, s)| c * s).collect(),
                count: inner_shape.to_vec(),
            };
            copy_block(
                Some(&decoded),
                inner_shape,
                &mut out,
                &repr.shape,
                &block,
                &repr.fill_value,
            );
        }
        Ok(Bytes::from(out))
    }

    /// A shard from its inner chunks, already encoded, in index order
    /// (`None`: empty), as the parts to write one after another: the
    /// chunks, and the index where the configuration puts it. Nothing is
    /// copied but the index.
    pub(crate) fn assemble(&self, chunks: &[Option<Bytes>]) -> Result<Vec<Bytes>> {
        let base = match self.index_location {
            IndexLocation::Start => self.index_size as u64,
            IndexLocation::End => 0,
        };
        let mut offset = base;
        let mut entries = Vec::with_capacity(chunks.len() * 16);
        for chunk in chunks {
            let (at, nbytes) = match chunk {
                Some(c) => (offset, c.len() as u64),
                None => (EMPTY, EMPTY),
            };
            offset += chunk.as_ref().map_or(0, |c| c.len() as u64);
            entries.extend(at.to_le_bytes());
            entries.extend(nbytes.to_le_bytes());
        }
        let index = self.index.encode(entries)?;
        if index.len() != self.index_size {
            return Err(corrupt(format!(
                "the shard index encodes to {} bytes, not the {} its codecs fix",
                index.len(),
                self.index_size
            )));
        }
        let stored = chunks.iter().flatten().cloned();
        Ok(match self.index_location {
            IndexLocation::Start => std::iter::once(index).chain(stored).collect(),
            IndexLocation::End => stored.chain(std::iter::once(index)).collect(),
        })
    }

    /// Encode a whole shard of `repr`; inner chunks left all fill value
    /// are not stored.
    pub fn encode(&self, shard: &[u8], repr: &ChunkRepr) -> Result<Vec<u8>> {
        if repr.data_type.is_variable() {
            return Err(crate::engine::format::codec::cannot_write(&format!(
                "{} shards",
                repr.data_type.name()
            )));
        }
        let inner_shape = self.inner_shape();
        let inner_repr = self.inner.decoded_repr();
        let mut chunks = Vec::with_capacity(self.inner_coords().count());
        for coords in self.inner_coords() {
            let block = Block {
                src_start: coords.iter().zip(inner_shape).map(|(c, s)| c * s).collect(),
                src_step: vec![1; coords.len()],
                dst_start: vec![0; coords.len()],
                count: inner_shape.to_vec(),
            };
            let mut chunk = vec![0u8; inner_repr.size_bytes()];
            copy_block(
                Some(shard),
                &repr.shape,
                &mut chunk,
                inner_shape,
                &block,
                &repr.fill_value,
            );
            chunks.push(match inner_repr.is_fill(&chunk) {
                true => None,
                false => Some(self.inner.encode(chunk)?),
            });
        }
        Ok(self.assemble(&chunks)?.concat())
    }

    /// Inner chunk coordinates in index order (C order).
    fn inner_coords(&self) -> impl Iterator<Item = Vec<u64>> + '_ {
        let total: u64 = self.chunks_per_shard.iter().product();
        (0..total).map(move |linear| unravel(linear, &self.chunks_per_shard))
    }

    /// The index position of the inner chunk at `coords` (C order).
    pub(crate) fn linear_index(&self, coords: &[u64]) -> usize {
        coords
            .iter()
            .zip(&self.chunks_per_shard)
            .fold(0u64, |acc, (c, n)| acc * n + c) as usize
    }
}

fn unravel(mut linear: u64, shape: &[u64]) -> Vec<u64> {
    let mut coords = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        coords[d] = linear % shape[d];
        linear /= shape[d];
    }
    coords
}

/// A decoded, validated shard index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardIndex {
    entries: Vec<u64>,
}

impl ShardIndex {
    /// The byte range of inner chunk `i`, or `None` when it is empty.
    pub fn chunk_range(&self, i: usize) -> Option<Range<u64>> {
        let (offset, nbytes) = (self.entries[2 * i], self.entries[2 * i + 1]);
        (offset != EMPTY).then(|| offset..offset + nbytes)
    }

    /// Memory held, for cache weighing.
    pub fn size_bytes(&self) -> usize {
        self.entries.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn codec(location: Option<&str>, crc: bool) -> ShardingCodec {
        let mut index_codecs = vec![json!({"name": "bytes", "configuration": {"endian": "little"}})];
        if crc {
            index_codecs.push(json!({"name": "crc32c"}));
        }
        let mut config = json!({
            "chunk_shape": [2, 3],
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "index_codecs": index_codecs,
        });
        if let Some(loc) = location {
            config["index_location"] = json!(loc);
        }
        let repr = ChunkRepr::new(vec![4, 6], DataType::UInt8, vec![9]);
        ShardingCodec::from_json(config.as_object(), &repr).unwrap()
    }

    /// Encode a shard by hand: inner chunks in reverse order, some empty.
    fn encode(codec: &ShardingCodec, chunks: &[Option<Vec<u8>>]) -> Vec<u8> {
        let mut data = Vec::new();
        let mut entries = Vec::new();
        let base = if codec.index_location == IndexLocation::Start {
            codec.index_size as u64
        } else {
            0
        };
        for chunk in chunks.iter().rev() {
            match chunk {
                Some(c) => {
                    entries.push((base + data.len() as u64, c.len() as u64));
                    data.extend(c);
                }
                None => entries.push((EMPTY, EMPTY)),
            }
        }
        entries.reverse();
        let mut index: Vec<u8> = entries
            .iter()
            .flat_map(|(o, n)| [o.to_le_bytes(), n.to_le_bytes()].concat())
            .collect();
        if codec.index_size > index.len() {
            let crc = crc32c::crc32c(&index);
            index.extend(crc.to_le_bytes());
        }
        match codec.index_location {
            IndexLocation::Start => [index, data].concat(),
            IndexLocation::End => [data, index].concat(),
        }
    }

    fn chunks() -> Vec<Option<Vec<u8>>> {
        vec![Some(vec![1; 6]), None, Some(vec![3; 6]), Some(vec![4; 6])]
    }

    #[test]
    fn index_size_comes_from_index_codecs() {
        assert_eq!(codec(None, false).index_size(), 4 * 16);
        assert_eq!(codec(None, true).index_size(), 4 * 16 + 4);
        assert_eq!(codec(None, true).chunks_per_shard(), [2, 2]);
    }

    #[test]
    fn decodes_with_index_at_start_and_end() {
        for loc in [None, Some("end"), Some("start")] {
            let c = codec(loc, true);
            let shard = encode(&c, &chunks());
            let repr = ChunkRepr::new(vec![4, 6], DataType::UInt8, vec![9]);
            let out = c.decode(Bytes::from(shard), &repr).unwrap();
            let expected = [
                [1, 1, 1, 9, 9, 9],
                [1, 1, 1, 9, 9, 9],
                [3, 3, 3, 4, 4, 4],
                [3, 3, 3, 4, 4, 4],
            ]
            .concat();
            assert_eq!(&out[..], &expected[..], "{loc:?}");
        }
    }

    #[test]
    fn corrupt_indices_are_errors() {
        let c = codec(None, true);
        let mut shard = encode(&c, &chunks());
        let n = shard.len();
        shard[n - 10] ^= 1; // flip a byte inside the index: checksum mismatch
        let repr = ChunkRepr::new(vec![4, 6], DataType::UInt8, vec![9]);
        assert!(c.decode(Bytes::from(shard), &repr).is_err());

        let c = codec(None, false);
        let mut shard = encode(&c, &chunks());
        let n = shard.len();
        shard[n - 64..n - 56].copy_from_slice(&1000u64.to_le_bytes()); // offset past the end
        let err = c.decode(Bytes::from(shard), &repr).unwrap_err().to_string();
        assert!(err.contains("outside the shard"), "{err}");

        let mut shard = encode(&c, &chunks());
        let n = shard.len();
        shard[n - 48..n - 40].copy_from_slice(&0u64.to_le_bytes()); // entry 1: offset set, nbytes still MAX
        let err = c.decode(Bytes::from(shard), &repr).unwrap_err().to_string();
        assert!(err.contains("only one"), "{err}");

        let err = c.decode(Bytes::from(vec![0u8; 10]), &repr).unwrap_err().to_string();
        assert!(err.contains("too short"), "{err}");
    }
}
