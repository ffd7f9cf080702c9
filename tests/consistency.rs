//! Caches never serve data from a shard that changed: a shard rewritten in
//! place (same key, same size, different layout and values) after its index
//! was cached is read correctly; changed metadata is seen after the TTL.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use zarr_serve::engine::{CacheOptions, Dataset, ResourceOptions, Resources, Selection};
use zarr_serve::storage::{Store, StoreOptions};

const EMPTY: u64 = u64::MAX;

/// A uint8 array (4, 6) in one shard (4, 6) of inner chunks (2, 3), index at
/// the end with crc32c.
fn write_metadata(dir: &Path, fill: u8) {
    let meta = json!({
        "zarr_format": 3, "node_type": "array", "shape": [4, 6], "data_type": "uint8",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 6]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": fill,
        "codecs": [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 3],
            "codecs": [{"name": "bytes"}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}],
    });
    std::fs::create_dir_all(dir.join("a/c/0")).unwrap();
    std::fs::write(dir.join("a/zarr.json"), meta.to_string()).unwrap();
}

/// Write the shard with inner chunk `i` holding `values[i]` (None = empty),
/// laid out in `order`.
fn write_shard(dir: &Path, values: [Option<u8>; 4], order: [usize; 4]) {
    let mut data = Vec::new();
    let mut index = [(EMPTY, EMPTY); 4];
    for i in order {
        if let Some(v) = values[i] {
            index[i] = (data.len() as u64, 6);
            data.extend([v; 6]);
        }
    }
    let mut encoded: Vec<u8> = index
        .iter()
        .flat_map(|(o, n)| [o.to_le_bytes(), n.to_le_bytes()].concat())
        .collect();
    encoded.extend(crc32c::crc32c(&encoded).to_le_bytes());
    data.extend(encoded);
    // In place: same inode, and here the same size.
    std::fs::write(dir.join("a/c/0/0"), data).unwrap();
}

fn expected(values: [Option<u8>; 4], fill: u8) -> Vec<u8> {
    let mut out = vec![0u8; 24];
    for r in 0..4 {
        for c in 0..6 {
            out[r * 6 + c] = values[(r / 2) * 2 + c / 3].unwrap_or(fill);
        }
    }
    out
}

/// A dataset over the local directory `dir` with these caches.
fn dataset_at(dir: &Path, caches: CacheOptions) -> Dataset {
    let store = Store::open(dir.to_str().unwrap(), &StoreOptions::default()).unwrap();
    let resources = Resources::new(&ResourceOptions {
        caches,
        ..ResourceOptions::default()
    });
    Dataset::new("t", None, store, std::sync::Arc::new(resources))
}

async fn read(ds: &Dataset, select: &str) -> Vec<u8> {
    let plan = ds.plan_read("a", &Selection::parse(select).unwrap()).await.unwrap();
    ds.read_all(&plan).await.unwrap().0.to_vec()
}

#[tokio::test]
async fn a_rewritten_shard_is_never_read_with_its_stale_index() {
    let dir = tempfile::tempdir().unwrap();
    write_metadata(dir.path(), 0);
    // Without decoded chunks, so that every read after a rewrite is a
    // conditional read by the stale index.
    let caches = CacheOptions {
        decoded_chunk_bytes: 0,
        ..CacheOptions::default()
    };
    let ds = dataset_at(dir.path(), caches);

    let v1 = [Some(1), Some(2), Some(3), Some(4)];
    write_shard(dir.path(), v1, [0, 1, 2, 3]);
    assert_eq!(read(&ds, "").await, expected(v1, 0));
    // A partial read uses the cached index (one inner chunk).
    assert_eq!(read(&ds, "0:2,0:3").await, vec![1; 6]);

    // Same size, reversed layout, new values: the cached index would now
    // point at the wrong bytes.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let v2 = [Some(9), Some(8), Some(7), Some(6)];
    write_shard(dir.path(), v2, [3, 2, 1, 0]);
    assert_eq!(read(&ds, "0:2,0:3").await, vec![9; 6], "partial read after rewrite");
    assert_eq!(read(&ds, "2:4,3:6").await, vec![6; 6]);
    assert_eq!(read(&ds, "").await, expected(v2, 0));

    // Fewer chunks (a smaller shard), then the read sees the empty ones as fill.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let v3 = [None, Some(5), None, None];
    write_shard(dir.path(), v3, [0, 1, 2, 3]);
    assert_eq!(read(&ds, "0:2,3:6").await, vec![5; 6]);
    assert_eq!(read(&ds, "0:2,0:3").await, vec![0; 6]);
}

/// The decoded-chunk cache never serves a rewritten shard's chunks: a read
/// answered from it entirely first confirms the shard's version, and one
/// that fetches anything is conditional on it.
#[tokio::test]
async fn the_decoded_chunk_cache_never_serves_a_rewritten_shard() {
    let dir = tempfile::tempdir().unwrap();
    write_metadata(dir.path(), 0);
    let ds = dataset_at(
        dir.path(),
        CacheOptions {
            metadata_ttl: Duration::from_secs(3600),
            decoded_chunk_bytes: 1 << 20,
            ..CacheOptions::default()
        },
    );
    let requests = || ds.store().stats().requests.load(std::sync::atomic::Ordering::Relaxed);
    write_shard(dir.path(), [Some(1), Some(2), Some(3), Some(4)], [0, 1, 2, 3]);
    assert_eq!(read(&ds, "0:2,0:3").await, vec![1; 6]);
    assert_eq!(
        read(&ds, "0:4,0:6").await,
        expected([Some(1), Some(2), Some(3), Some(4)], 0)
    );
    let before = requests();
    assert_eq!(read(&ds, "0:2,0:3").await, vec![1; 6], "a hit");
    assert_eq!(requests() - before, 1, "a hit costs one version check");

    // In place, same size: every chunk cached above is now stale.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let v2 = [Some(9), Some(8), Some(7), Some(6)];
    write_shard(dir.path(), v2, [3, 2, 1, 0]);
    assert_eq!(read(&ds, "0:2,0:3").await, vec![9; 6]);
    assert_eq!(read(&ds, "2:4,3:6").await, vec![6; 6]);
    // Chunks 0 and 3 cached with the new version, 1 and 2 not: a conditional read.
    assert_eq!(read(&ds, "0:4,0:6").await, expected(v2, 0));

    // Replaced by another file (a new inode), as writers that rename do.
    let v3 = [Some(5), None, Some(4), Some(3)];
    let aside = tempfile::tempdir().unwrap();
    write_metadata(aside.path(), 0);
    write_shard(aside.path(), v3, [0, 1, 2, 3]);
    std::fs::rename(aside.path().join("a/c/0/0"), dir.path().join("a/c/0/0")).unwrap();
    assert_eq!(read(&ds, "0:4,0:6").await, expected(v3, 0));

    // Chunk 0 cached, chunk 2 not, then a rewrite: the conditional read of
    // chunk 2 fails, and both are read again by a fresh index.
    tokio::time::sleep(Duration::from_millis(20)).await;
    write_shard(dir.path(), [Some(21), Some(22), Some(23), Some(24)], [0, 1, 2, 3]);
    assert_eq!(read(&ds, "0:2,0:3").await, vec![21; 6]);
    tokio::time::sleep(Duration::from_millis(20)).await;
    write_shard(dir.path(), [Some(31), Some(32), Some(33), Some(34)], [3, 2, 1, 0]);
    assert_eq!(read(&ds, "0:4,0:3").await, [[31; 6], [33; 6]].concat());

    // Deleted: the fill value.
    std::fs::remove_file(dir.path().join("a/c/0/0")).unwrap();
    assert_eq!(read(&ds, "0:2,0:3").await, vec![0; 6]);
}

/// A chunk that the cached index says is empty is not trusted to stay so:
/// a read that fetches nothing confirms the shard's version.
#[tokio::test]
async fn an_empty_chunk_is_read_again_once_its_shard_is_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    write_metadata(dir.path(), 0);
    let ds = dataset_at(dir.path(), CacheOptions::default());
    write_shard(dir.path(), [None, Some(2), Some(3), Some(4)], [0, 1, 2, 3]);
    // The index is cached by a read of chunk 1; chunk 0 is empty.
    assert_eq!(read(&ds, "0:2,3:6").await, vec![2; 6]);
    assert_eq!(read(&ds, "0:2,0:3").await, vec![0; 6]);
    tokio::time::sleep(Duration::from_millis(20)).await;
    write_shard(dir.path(), [Some(7), Some(2), Some(3), Some(4)], [0, 1, 2, 3]);
    assert_eq!(read(&ds, "0:2,0:3").await, vec![7; 6]);
}

#[tokio::test]
async fn changed_metadata_is_seen_after_the_ttl() {
    let dir = tempfile::tempdir().unwrap();
    write_metadata(dir.path(), 0);
    let ds = dataset_at(
        dir.path(),
        CacheOptions {
            metadata_ttl: Duration::from_millis(200),
            ..CacheOptions::default()
        },
    );
    let values = [None, None, None, None];
    write_shard(dir.path(), values, [0, 1, 2, 3]);
    assert_eq!(read(&ds, "").await, expected(values, 0));
    write_metadata(dir.path(), 42);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(read(&ds, "").await, expected(values, 42));
}
