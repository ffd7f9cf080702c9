//! Decoding a shard index from arbitrary bytes: an error or an index whose
//! every entry lies inside the shard, never a panic.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use serde_json::json;
use zarr_serve::engine::codec::array_to_bytes::sharding::ShardingCodec;
use zarr_serve::engine::codec::ChunkRepr;
use zarr_serve::engine::DataType;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let mut index_codecs = vec![json!({"name": "bytes", "configuration": {"endian": "little"}})];
    if selector & 1 == 1 {
        index_codecs.push(json!({"name": "crc32c"}));
    }
    let config = json!({
        "chunk_shape": [2, 3],
        "codecs": [{"name": "bytes"}],
        "index_codecs": index_codecs,
        "index_location": if selector & 2 == 2 { "start" } else { "end" },
    });
    let repr = ChunkRepr::new(vec![4, 6], DataType::UInt8, vec![0]);
    let codec = ShardingCodec::from_json(config.as_object(), &repr).unwrap();
    let shard_size = rest.len() as u64 + u64::from(selector >> 2) * 64;
    if let Ok(index) = codec.decode_index(Bytes::copy_from_slice(rest), shard_size) {
        for i in 0..4 {
            if let Some(range) = index.chunk_range(i) {
                assert!(range.start <= range.end && range.end <= shard_size);
            }
        }
    }
    // A whole shard from the same bytes: an error or exactly the shard's elements.
    if let Ok(out) = codec.decode(Bytes::copy_from_slice(rest), &repr) {
        assert_eq!(out.len(), 24);
    }
});
