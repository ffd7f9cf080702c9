//! The properties the fuzz targets check (`fuzz/`), as plain functions so the
//! committed corpora also run as ordinary tests (`tests/fuzz_corpus.rs`).
//! Each takes arbitrary bytes and panics only when a property fails; an
//! error from the engine is an acceptable answer.

use bytes::Bytes;
use serde_json::json;

use crate::engine::codec::array_to_bytes::sharding::ShardingCodec;
use crate::engine::codec::{ChunkRepr, CodecChain};
use crate::engine::{DataType, NodeMetadata, Selection};

/// The `select` parser and resolver: every resolved index lies inside the array.
pub fn select(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(selection) = Selection::parse(text) else { return };
    for shape in [&[][..], &[0][..], &[7][..], &[5, 1, 13][..], &[3, 0, 4, 9][..]] {
        if let Ok(dims) = selection.resolve(shape) {
            assert_eq!(dims.len(), shape.len());
            for (d, n) in dims.iter().zip(shape) {
                if d.is_list() {
                    // A list may repeat indices, so it can be longer than the dimension.
                    assert!((0..d.len).all(|k| d.index(k) < *n), "{text:?} {shape:?} {d:?}");
                } else {
                    assert!(d.len <= *n);
                    if d.len > 0 {
                        assert!(d.index(0) < *n && d.index(d.len - 1) < *n, "{text:?} {shape:?} {d:?}");
                    }
                }
            }
        }
    }
}

/// `zarr.json` parsing: a node or an error; a valid array can plan its reads.
pub fn zarr_json(data: &[u8]) {
    if let Ok(NodeMetadata::Array { parsed: Ok(meta), .. }) = NodeMetadata::parse(data, "fuzz/zarr.json") {
        let _ = meta.codecs.read_chunk_shape();
        let _ = meta.chunk_grid.grid_shape(&meta.shape);
        let _ = meta.chunk_key_encoding.encode(&vec![0; meta.shape.len()]);
    }
}

/// Shard indexes and whole shards from arbitrary bytes: entries inside the
/// shard, or an error; a decoded shard has exactly its elements.
pub fn shard_index(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
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
    let codec = ShardingCodec::from_json(config.as_object(), &repr).expect("valid configuration");
    let shard_size = rest.len() as u64 + u64::from(selector >> 2) * 64;
    if let Ok(index) = codec.decode_index(Bytes::copy_from_slice(rest), shard_size) {
        for i in 0..4 {
            if let Some(range) = index.chunk_range(i) {
                assert!(range.start <= range.end && range.end <= shard_size);
            }
        }
    }
    if let Ok(out) = codec.decode(Bytes::copy_from_slice(rest), &repr) {
        assert_eq!(out.len(), 24);
    }
}

/// Every codec's decode of arbitrary bytes: an error or exactly the chunk's size;
/// a decode into a reused buffer and a prefix decode agree with the whole decode.
pub fn codecs(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let le = json!({"name": "bytes", "configuration": {"endian": "little"}});
    let be = json!({"name": "bytes", "configuration": {"endian": "big"}});
    let zstd = json!({"name": "zstd", "configuration": {"level": 1}});
    let codecs = match selector % 14 {
        0 => json!([le]),
        1 => json!([be]),
        2 => json!([{"name": "transpose", "configuration": {"order": [1, 0]}}, le]),
        3 => json!([le, {"name": "gzip", "configuration": {"level": 5}}]),
        4 => json!([le, zstd]),
        5 => {
            json!([le, {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4}}])
        }
        6 => json!([le, {"name": "crc32c"}]),
        7 => json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 3], "codecs": [le, zstd], "index_codecs": [le, {"name": "crc32c"}]}}]),
        8 => json!([le, zstd, {"name": "crc32c"}]),
        9 => json!([le, {"name": "gzip", "configuration": {"level": 1}}, {"name": "crc32c"}]),
        10 => json!([{"name": "zfp", "configuration": {"mode": "fixed_rate", "rate": 8}}]),
        11 => json!([{"name": "zfp", "configuration": {"mode": "fixed_precision", "precision": 16}}]),
        12 => json!([{"name": "zfp", "configuration": {"mode": "reversible"}}]),
        _ => json!([{"name": "numcodecs.zfpy", "configuration": {"mode": 4, "tolerance": 0.01}}]),
    };
    let repr = ChunkRepr::new(vec![4, 6], DataType::Float32, 0f32.to_le_bytes().to_vec());
    let chain = CodecChain::from_json(&codecs, &repr).expect("valid codecs");
    let whole = chain.decode(Bytes::copy_from_slice(rest));
    if let Ok(out) = &whole {
        assert_eq!(out.len(), repr.size_bytes());
    }
    // A decode into a reused buffer (dirty, too small or too large) is the
    // whole decode, error for error.
    let mut scratch = vec![0xA5; usize::from(selector) * 3];
    let reused = chain.decode_to_scratch(Bytes::copy_from_slice(rest), &mut scratch);
    match (&whole, &reused) {
        (Ok(out), Ok(again)) => assert_eq!(&out[..], again.as_deref().unwrap_or(&scratch)),
        (Err(_), Err(_)) => {}
        _ => panic!("decode {:?} but decode_to_scratch {:?}", whole.is_ok(), reused.is_ok()),
    }
    // A prefix decode, where it succeeds, holds at least the prefix, and
    // agrees with the whole decode where that succeeds too.
    let prefix = (usize::from(selector) % 24 + 1) * 4;
    if let Ok(part) = chain.decode_prefix(Bytes::copy_from_slice(rest), prefix) {
        assert!(part.len() >= prefix && part.len() <= repr.size_bytes());
        if let Ok(out) = &whole {
            assert_eq!(&part[..prefix], &out[..prefix]);
        }
    }
}

/// WMS map parameters (`CRS`, `BBOX`, `WIDTH`, `HEIGHT`): a frame within
/// the size limit with one finite position a pixel, or an exception.
pub fn wms_params(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        crate::http::check_frame(text);
    }
}

/// EDR `coords` (WKT): a geometry of finite coordinates, or an error
/// naming an offset inside the text.
pub fn edr_coords(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        crate::http::check_wkt(text);
    }
}

/// DAP2 constraint expressions: positions inside each dimension, or an error.
pub fn dap2_constraint(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        crate::http::check_projection(text);
    }
}

/// DAP4 constraint expressions (`dap4.ce`): known variables once each, in
/// order, positions inside each dimension, a DMR; or an error.
pub fn dap4_constraint(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        crate::http::check_dap4_constraint(text);
    }
}

/// kerchunk reference sets: at most the key limit (here 10,000, so that
/// each input is quick), spans that are ranges, or an error; never a
/// panic, an allocation that fails or a stack that overflows.
pub fn kerchunk(data: &[u8]) {
    crate::storage::check_reference_set(data, 10_000);
}
