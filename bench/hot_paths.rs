//! Micro-benchmarks of the hot paths: shard-index decode, inner-chunk decode
//! per codec, copying a decoded chunk into an output region, filling a
//! whole slab with chunks one by one or a row of each in turn, and (given
//! streams from `bench/zfp_peer.sh`) zfp decoding.
//!
//!     cargo bench --bench hot_paths

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::io::Write;

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use serde_json::json;
use zarr_serve::engine::codec::array_to_bytes::sharding::ShardingCodec;
use zarr_serve::engine::codec::{ChunkRepr, CodecChain};
use zarr_serve::engine::copy::{copy_block, copy_blocks, Block};
use zarr_serve::engine::DataType;

/// A (32, 64, 64) uint16 chunk like the `volume` benchmark's inner chunks:
/// a smooth field plus a little noise.
fn chunk() -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut out = Vec::with_capacity(32 * 64 * 64 * 2);
    for z in 0..32u32 {
        for y in 0..64u32 {
            for x in 0..64u32 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let v = (1000 + 10 * z + 5 * y + 3 * x) as u16 + (state & 7) as u16;
                out.extend(v.to_le_bytes());
            }
        }
    }
    out
}

fn repr() -> ChunkRepr {
    ChunkRepr::new(vec![32, 64, 64], DataType::UInt16, vec![0, 0])
}

fn encoded(codec: &str, raw: &[u8]) -> (serde_json::Value, Vec<u8>) {
    let bytes = json!({"name": "bytes", "configuration": {"endian": "little"}});
    match codec {
        "bytes" => (json!([bytes]), raw.to_vec()),
        "crc32c" => {
            let mut out = raw.to_vec();
            out.extend(crc32c::crc32c(raw).to_le_bytes());
            (json!([bytes, {"name": "crc32c"}]), out)
        }
        "gzip" => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(1));
            enc.write_all(raw).unwrap();
            (
                json!([bytes, {"name": "gzip", "configuration": {"level": 1}}]),
                enc.finish().unwrap(),
            )
        }
        "zstd" => (
            json!([bytes, {"name": "zstd", "configuration": {"level": 1}}]),
            zstd::bulk::compress(raw, 1).unwrap(),
        ),
        other => unreachable!("{other}"),
    }
}

fn inner_chunk_decode(c: &mut Criterion) {
    let raw = chunk();
    let mut group = c.benchmark_group("inner_chunk_decode");
    group.throughput(Throughput::Bytes(raw.len() as u64));
    for codec in ["bytes", "crc32c", "gzip", "zstd"] {
        let (codecs, data) = encoded(codec, &raw);
        let chain = CodecChain::from_json(&codecs, &repr()).unwrap();
        let data = Bytes::from(data);
        assert_eq!(&chain.decode(data.clone()).unwrap()[..], &raw[..]);
        group.bench_with_input(BenchmarkId::from_parameter(codec), &data, |b, data| {
            b.iter(|| chain.decode(black_box(data.clone())).unwrap())
        });
    }
    group.finish();
}

fn shard_index_decode(c: &mut Criterion) {
    // The `volume` shard: (128, 512, 512) of (32, 64, 64) inner chunks = 256 entries, crc32c.
    let config = json!({
        "chunk_shape": [32, 64, 64],
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
    });
    let shard = ChunkRepr::new(vec![128, 512, 512], DataType::UInt16, vec![0, 0]);
    let codec = ShardingCodec::from_json(config.as_object(), &shard).unwrap();
    let mut index: Vec<u8> = (0..256u64)
        .flat_map(|i| [(i * 1000).to_le_bytes(), 1000u64.to_le_bytes()].concat())
        .collect();
    index.extend(crc32c::crc32c(&index).to_le_bytes());
    let index = Bytes::from(index);
    c.bench_function("shard_index_decode_256_entries", |b| {
        b.iter(|| codec.decode_index(black_box(index.clone()), 1 << 30).unwrap())
    });
}

fn copy_into_region(c: &mut Criterion) {
    let raw = chunk();
    let src_shape = [32u64, 64, 64];
    let dst_shape = [256u64, 512, 512];
    let mut out = vec![0u8; (256 * 512 * 512 * 2) as usize];
    let mut group = c.benchmark_group("copy_chunk_into_region");
    for (name, block) in [
        (
            "whole_chunk",
            Block {
                src_start: vec![0, 0, 0],
                src_step: vec![1, 1, 1],
                dst_start: vec![32, 64, 128],
                count: vec![32, 64, 64],
            },
        ),
        (
            "partial_rows",
            Block {
                src_start: vec![0, 8, 20],
                src_step: vec![1, 1, 1],
                dst_start: vec![0, 0, 0],
                count: vec![32, 56, 44],
            },
        ),
        (
            "strided",
            Block {
                src_start: vec![0, 0, 0],
                src_step: vec![1, 1, 2],
                dst_start: vec![0, 0, 0],
                count: vec![32, 64, 32],
            },
        ),
    ] {
        let bytes: u64 = block.count.iter().product::<u64>() * 2;
        group.throughput(Throughput::Bytes(bytes));
        group.bench_function(name, |b| {
            b.iter(|| copy_block(Some(black_box(&raw)), &src_shape, &mut out, &dst_shape, &block, &[0, 0]))
        });
    }
    group.finish();
}

/// A 64 MiB slab (32, 1024, 1024) of the volume filled with its 256 inner
/// chunks (32, 64, 64) in decoding batches of four side by side, as the
/// server fills it: each chunk alone, or a row of each of the four in turn
/// (which writes the slab front to back).
fn fill_slab(c: &mut Criterion) {
    let chunks: Vec<Vec<u8>> = (0..4).map(|_| chunk()).collect();
    let src_shape = [32u64, 64, 64];
    let dst_shape = [32u64, 1024, 1024];
    let mut slab = vec![0u8; 32 << 21];
    let batches: Vec<Vec<Block>> = (0..16u64)
        .flat_map(|y| (0..4u64).map(move |x| (y, x)))
        .map(|(y, x)| {
            (0..4u64)
                .map(|i| Block {
                    src_start: vec![0, 0, 0],
                    src_step: vec![1, 1, 1],
                    dst_start: vec![0, y * 64, (x * 4 + i) * 64],
                    count: vec![32, 64, 64],
                })
                .collect()
        })
        .collect();
    let mut group = c.benchmark_group("fill_64_mib_slab");
    group.throughput(Throughput::Bytes(slab.len() as u64));
    group.sample_size(20);
    group.bench_function("chunk_by_chunk", |b| {
        b.iter(|| {
            for batch in &batches {
                for (block, src) in batch.iter().zip(&chunks) {
                    copy_block(Some(black_box(src)), &src_shape, &mut slab, &dst_shape, block, &[0, 0]);
                }
            }
        })
    });
    group.bench_function("rows_in_turn", |b| {
        b.iter(|| {
            for batch in &batches {
                let blocks: Vec<(Option<&[u8]>, &Block)> = batch
                    .iter()
                    .zip(&chunks)
                    .map(|(block, src)| (Some(black_box(&src[..])), block))
                    .collect();
                copy_blocks(&blocks, &src_shape, &mut slab, &dst_shape, &[0, 0]);
            }
        })
    });
    group.finish();
}

/// zfp streams written by `bench/zfp_peer.sh` (the directory in
/// `ZFP_BENCH_DIR`), decoded through the `numcodecs.zfpy` codec after a
/// check against what libzfp decoded; nothing to do when it is unset.
fn zfp_decode(c: &mut Criterion) {
    let Some((dir, cases)) = zfp_cases() else { return };
    let mut group = c.benchmark_group("zfp_decode");
    group.sample_size(10);
    for (name, repr, _) in cases {
        let chain = CodecChain::from_json(&json!([{"name": "numcodecs.zfpy", "configuration": {}}]), &repr).unwrap();
        let stream = Bytes::from(std::fs::read(dir.join(format!("{name}.zfp"))).unwrap());
        let want = std::fs::read(dir.join(format!("{name}.bin"))).unwrap();
        assert!(
            chain.decode(stream.clone()).unwrap()[..] == want[..],
            "{name}: not what libzfp decodes"
        );
        group.throughput(Throughput::Bytes(want.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &stream, |b, stream| {
            b.iter(|| chain.decode(black_box(stream.clone())).unwrap())
        });
    }
}

/// A stream's name, chunk representation and numcodecs configuration.
type ZfpCase = (String, ChunkRepr, serde_json::Value);

/// The streams' directory and cases (`bench/zfp_peer.py`'s manifest).
fn zfp_cases() -> Option<(std::path::PathBuf, Vec<ZfpCase>)> {
    let dir = std::path::PathBuf::from(std::env::var_os("ZFP_BENCH_DIR")?);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let cases = manifest
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            let data_type = match case["dtype"].as_str().unwrap() {
                "float32" => DataType::Float32,
                _ => DataType::Float64,
            };
            let shape: Vec<u64> = serde_json::from_value(case["shape"].clone()).unwrap();
            let repr = ChunkRepr::new(shape, data_type, vec![0; data_type.size()]);
            (
                case["name"].as_str().unwrap().to_string(),
                repr,
                case["numcodecs"].clone(),
            )
        })
        .collect();
    Some((dir, cases))
}

/// The same field encoded again through `numcodecs.zfpy` with the mode it
/// was written in, after a check against what libzfp encodes it into.
fn zfp_encode(c: &mut Criterion) {
    let Some((dir, cases)) = zfp_cases() else { return };
    let mut group = c.benchmark_group("zfp_encode");
    group.sample_size(10);
    for (name, repr, config) in cases {
        let chain =
            CodecChain::from_json(&json!([{"name": "numcodecs.zfpy", "configuration": config}]), &repr).unwrap();
        let values = Bytes::from(std::fs::read(dir.join(format!("{name}.bin"))).unwrap());
        let want = std::fs::read(dir.join(format!("{name}.re.zfp"))).unwrap();
        assert!(
            chain.encode(values.clone()).unwrap()[..] == want[..],
            "{name}: not what libzfp encodes"
        );
        group.throughput(Throughput::Bytes(values.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &values, |b, values| {
            b.iter(|| chain.encode(black_box(values.clone())).unwrap())
        });
    }
}

criterion_group!(
    benches,
    inner_chunk_decode,
    shard_index_decode,
    copy_into_region,
    fill_slab,
    zfp_decode,
    zfp_encode
);
criterion_main!(benches);
