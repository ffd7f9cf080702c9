//! Every codec's decode of arbitrary bytes: an error or exactly the chunk's
//! decoded size, never a panic or an oversized allocation.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use serde_json::json;
use zarr_serve::engine::codec::{ChunkRepr, CodecChain};
use zarr_serve::engine::DataType;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let le = json!({"name": "bytes", "configuration": {"endian": "little"}});
    let be = json!({"name": "bytes", "configuration": {"endian": "big"}});
    let codecs = match selector % 9 {
        0 => json!([le]),
        1 => json!([be]),
        2 => json!([{"name": "transpose", "configuration": {"order": [1, 0]}}, le]),
        3 => json!([le, {"name": "gzip", "configuration": {"level": 5}}]),
        4 => json!([le, {"name": "zstd", "configuration": {"level": 1}}]),
        5 => json!([le, {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4}}]),
        6 => json!([le, {"name": "crc32c"}]),
        7 => json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 3], "codecs": [le, {"name": "zstd", "configuration": {"level": 1}}],
            "index_codecs": [le, {"name": "crc32c"}]}}]),
        _ => json!([le, {"name": "gzip", "configuration": {"level": 1}}, {"name": "crc32c"}]),
    };
    let repr = ChunkRepr::new(vec![4, 6], DataType::Float32, 0f32.to_le_bytes().to_vec());
    let chain = CodecChain::from_json(&codecs, &repr).unwrap();
    if let Ok(out) = chain.decode(Bytes::copy_from_slice(rest)) {
        assert_eq!(out.len(), repr.size_bytes());
    }
});
