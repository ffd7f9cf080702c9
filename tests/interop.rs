//! The engine against data written by zarr-python and tensorstore: every
//! array of the fixture manifest, whole and through many selections, byte
//! for byte against NumPy; corrupt data must fail as corrupt; unsupported
//! arrays as unsupported. `ZARR_FIXTURES` points at another generated
//! fixture directory (CI regenerates them from a fresh venv).

use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

use zarr_serve::engine::{CacheOptions, Dataset, Error, ReadOptions, ResourceOptions, Resources, Selection};
use zarr_serve::storage::{Store, StoreOptions};

fn fixtures() -> PathBuf {
    std::env::var_os("ZARR_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/interop"))
}

fn manifest() -> Value {
    let text = std::fs::read(fixtures().join("manifest.json")).expect("fixture manifest");
    serde_json::from_slice(&text).unwrap()
}

/// The fixtures' hierarchy: on local disk, or where `ZARR_FIXTURES_STORE`
/// says (for example `s3://bucket/interop/data.zarr`, with the endpoint and
/// credentials in the usual `AWS_*` variables).
fn fixture_store(options: &StoreOptions) -> Store {
    let location = std::env::var("ZARR_FIXTURES_STORE")
        .unwrap_or_else(|_| fixtures().join("data.zarr").to_string_lossy().into_owned());
    Store::open(&location, options).unwrap()
}

/// The fixtures read with these options, caches and range coalescing gap
/// (remote stores).
fn dataset_with(read: ReadOptions, caches: CacheOptions, coalesce_gap: Option<u64>) -> Dataset {
    let resources = Arc::new(Resources::new(&ResourceOptions {
        read,
        caches,
        // Reused output buffers start poisoned: a byte a read fails to write
        // would show as a mismatch, not as a stale or zero byte.
        check_buffer_reuse: true,
        ..ResourceOptions::default()
    }));
    let store_options = StoreOptions {
        coalesce_gap,
        buffers: resources.buffers(),
        ..StoreOptions::default()
    };
    Dataset::new("fixtures", None, fixture_store(&store_options), resources)
}

fn dataset(options: ReadOptions) -> Dataset {
    dataset_with(options, CacheOptions::default(), None)
}

async fn read(ds: &Dataset, path: &str, select: &str) -> Result<(Vec<u64>, Vec<u8>), Error> {
    let plan = ds.plan_read(path, &Selection::parse(select)?).await?;
    let (data, _) = ds.read_all(&plan).await?;
    Ok((plan.output_shape(), data.to_vec()))
}

/// Read every array whole and through every selection; compare with NumPy.
async fn check_all_arrays(ds: &Dataset) -> usize {
    let manifest = manifest();
    let mut checked = 0;
    let mut failures = Vec::new();
    for array in manifest["arrays"].as_array().unwrap() {
        let path = array["path"].as_str().unwrap();
        let mut cases = vec![(
            String::new(),
            array["shape"].clone(),
            array["expected"].as_str().unwrap().to_string(),
        )];
        for sel in array["selections"].as_array().unwrap() {
            cases.push((
                sel["select"].as_str().unwrap().into(),
                sel["shape"].clone(),
                sel["expected"].as_str().unwrap().into(),
            ));
        }
        for (select, shape, expected) in cases {
            let expected_bytes = std::fs::read(fixtures().join(&expected)).unwrap();
            let expected_shape: Vec<u64> = serde_json::from_value(shape).unwrap();
            match read(ds, path, &select).await {
                Ok((shape, data)) if shape == expected_shape && data == expected_bytes => checked += 1,
                Ok((shape, data)) => failures.push(format!(
                    "{path}[{select}]: shape {shape:?} vs {expected_shape:?}, {} bytes vs {}, first difference at {:?}",
                    data.len(),
                    expected_bytes.len(),
                    data.iter().zip(&expected_bytes).position(|(a, b)| a != b)
                )),
                Err(e) => failures.push(format!("{path}[{select}]: {e}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    checked
}

#[tokio::test]
async fn every_array_and_selection_matches_numpy() {
    let checked = check_all_arrays(&dataset(ReadOptions::default())).await;
    assert!(checked > 1000, "only {checked} cases checked");
}

/// Tiny slabs, shards fetched an inner chunk at a time, exact or widely
/// merged ranges, and one request at a time exercise the slab, piece, span
/// and range logic differently from the defaults.
#[tokio::test]
async fn every_array_matches_with_tiny_slabs_and_other_coalescing() {
    for gap in [0, 1 << 20] {
        let options = ReadOptions {
            slab_bytes: 1,
            concurrency: 1,
            batch_bytes: 1,
        };
        check_all_arrays(&dataset_with(options, CacheOptions::default(), Some(gap))).await;
    }
}

/// Reading twice (warm shard-index and metadata caches) gives the same bytes.
#[tokio::test]
async fn warm_reads_match_cold_reads() {
    let ds = dataset(ReadOptions::default());
    for array in manifest()["arrays"].as_array().unwrap() {
        let path = array["path"].as_str().unwrap();
        let cold = read(&ds, path, "").await.unwrap();
        let warm = read(&ds, path, "").await.unwrap();
        assert_eq!(cold, warm, "{path}");
    }
}

#[tokio::test]
async fn corrupt_data_is_a_corrupt_error_never_data() {
    let ds = dataset(ReadOptions::default());
    let manifest = manifest();
    let cases = manifest["corrupt"].as_array().unwrap();
    assert!(cases.len() >= 7);
    for case in cases {
        let path = case["path"].as_str().unwrap();
        match read(&ds, path, case["select"].as_str().unwrap()).await {
            Err(Error::Corrupt { key, reason }) => {
                assert!(key.starts_with(path), "{path}: key {key} ({reason})");
            }
            other => panic!("{path} ({}): expected a corrupt error, got {other:?}", case["kind"]),
        }
    }
}

#[tokio::test]
async fn unsupported_arrays_are_unsupported_and_name_the_feature() {
    let ds = dataset(ReadOptions::default());
    for case in manifest()["unsupported"].as_array().unwrap() {
        let path = case["path"].as_str().unwrap();
        match read(&ds, path, "").await {
            Err(Error::Unsupported(reason)) => assert!(reason.contains(path), "{path}: {reason}"),
            other => panic!("{path}: expected unsupported, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn hierarchy_lists_nodes_only_and_finds_implicit_groups() {
    let ds = dataset(ReadOptions::default());
    let root = ds.children("").await.unwrap();
    let names: Vec<&str> = root.iter().map(|c| c.name.as_str()).collect();
    assert!(
        names.contains(&"zarr_python") && names.contains(&"tensorstore"),
        "{names:?}"
    );
    assert!(names.contains(&"implicit_parent"), "{names:?}");
    assert!(!names.iter().any(|n| n.ends_with(".txt")), "{names:?}");
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let implicit = ds.node("implicit_parent").await.unwrap();
    assert!(implicit.metadata.is_none());
    let child = ds.children("implicit_parent").await.unwrap();
    assert_eq!(child.len(), 1);
    assert_eq!(
        (child[0].path.as_str(), child[0].node_type),
        ("implicit_parent/child", "group")
    );
    assert!(matches!(ds.node("no_such_node").await, Err(Error::NotFound(_))));
    assert!(matches!(
        ds.node("zarr_python/notes.txt").await,
        Err(Error::NotFound(_))
    ));
    assert!(matches!(ds.node("../etc").await, Err(Error::InvalidRequest(_))));
}

/// One inner chunk of a cold sharded array: one index request and one data
/// request (and a HEAD on Azure); again: no index request, and with the
/// decoded-chunk cache no read at all, only a HEAD confirming the version.
#[tokio::test]
async fn one_inner_chunk_costs_one_index_and_one_data_request() {
    for decoded_cache in [0, 1 << 20] {
        let caches = CacheOptions {
            decoded_chunk_bytes: decoded_cache,
            ..CacheOptions::default()
        };
        let ds = dataset_with(ReadOptions::default(), caches, None);
        let path = "tensorstore/shard_end_crc";
        let node = ds.node(path).await.unwrap();
        let meta = node.array().unwrap();
        let inner = meta.codecs.read_chunk_shape();
        assert!(
            inner
                .iter()
                .zip(&meta.chunk_grid.first_chunk_shape())
                .any(|(i, s)| i < s),
            "shards hold several inner chunks"
        );
        let select = inner.iter().map(|n| format!("0:{n}")).collect::<Vec<_>>().join(",");
        let stats = ds.store().stats();
        let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
        let (requests, ranged) = (count(&stats.requests), count(&stats.range_requests));
        let (_, cold) = read(&ds, path, &select).await.unwrap();
        // The index is at the shard's end: a store without suffix ranges
        // (Azure) first asks for the shard's size.
        let head = u64::from(!ds.store().reads_suffix_ranges());
        assert_eq!(
            (count(&stats.requests) - requests, count(&stats.range_requests) - ranged),
            (2 + head, 2),
            "cold: index + data"
        );
        let (requests, ranged) = (count(&stats.requests), count(&stats.range_requests));
        let (_, warm) = read(&ds, path, &select).await.unwrap();
        let expected = if decoded_cache == 0 { (1, 1) } else { (1, 0) };
        assert_eq!(
            (count(&stats.requests) - requests, count(&stats.range_requests) - ranged),
            expected,
            "warm, decoded cache {decoded_cache}"
        );
        assert_eq!(cold, warm);
    }
}

/// A cold read of several (not all) inner chunks of a shard, fetched in
/// pieces of one inner chunk at once: the shard's index is read once, not
/// once per piece, and each inner chunk once. The decoded-chunk cache is
/// off: with it on, so small a read takes the shard in one piece.
#[tokio::test]
async fn shard_pieces_share_one_index_request() {
    let options = ReadOptions {
        batch_bytes: 1,
        ..ReadOptions::default()
    };
    let caches = CacheOptions {
        decoded_chunk_bytes: 0,
        ..CacheOptions::default()
    };
    let ds = dataset_with(options, caches, None);
    let path = "tensorstore/shard_end_crc";
    let meta = ds.node(path).await.unwrap().array().unwrap().clone();
    let inner = meta.codecs.read_chunk_shape();
    let shard = &meta.chunk_grid.first_chunk_shape();
    // The first inner row of the first shard, and one inner chunk short of it.
    let along = shard[1] / inner[1] - 1;
    assert!(along >= 2, "several pieces");
    let select = format!("0:{},0:{}", inner[0], along * inner[1]);
    let stats = ds.store().stats();
    let count = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed);
    let ranged = count(&stats.range_requests);
    let (_, data) = read(&ds, path, &select).await.unwrap();
    assert_eq!(
        count(&stats.range_requests) - ranged,
        1 + along,
        "one index, then each piece"
    );
    let whole = read(&ds, path, "").await.unwrap();
    let size = meta.data_type.size();
    let row = meta.shape[1] as usize * size;
    let width = (along * inner[1]) as usize * size;
    let expected: Vec<u8> = (0..inner[0] as usize)
        .flat_map(|r| whole.1[r * row..r * row + width].to_vec())
        .collect();
    assert_eq!(data, expected);
}

/// Every whole read unit (inner chunk or chunk) of every 2-D array, read on
/// its own (the zero-copy path for tiles), equals that block of the NumPy array.
#[tokio::test]
async fn whole_read_units_match_numpy_blocks() {
    let ds = dataset(ReadOptions::default());
    let mut checked = 0;
    for array in manifest()["arrays"].as_array().unwrap() {
        let shape: Vec<u64> = serde_json::from_value(array["shape"].clone()).unwrap();
        if shape.len() != 2 || shape.contains(&0) {
            continue;
        }
        let path = array["path"].as_str().unwrap();
        let node = ds.node(path).await.unwrap();
        let meta = node.array().unwrap();
        let unit = meta.codecs.read_chunk_shape();
        let size = meta.data_type.size();
        let full = std::fs::read(fixtures().join(array["expected"].as_str().unwrap())).unwrap();
        for r in 0..shape[0] / unit[0] {
            for c in 0..shape[1] / unit[1] {
                let (r0, c0) = (r * unit[0], c * unit[1]);
                let select = format!("{}:{},{}:{}", r0, r0 + unit[0], c0, c0 + unit[1]);
                let (_, got) = read(&ds, path, &select).await.unwrap();
                let mut want = Vec::new();
                for row in r0..r0 + unit[0] {
                    let start = ((row * shape[1] + c0) as usize) * size;
                    want.extend_from_slice(&full[start..start + unit[1] as usize * size]);
                }
                assert_eq!(got, want, "{path}[{select}]");
                checked += 1;
            }
        }
    }
    assert!(checked > 200, "only {checked} units checked");
}

/// Zarr v2 nodes written by zarr-python 3 (`zarr_format=2`): what each node
/// is comes from its own metadata, attributes from `.zattrs`, dimension
/// names from `_ARRAY_DIMENSIONS`; the v2 group lists its arrays and groups.
#[tokio::test]
async fn zarr_v2_nodes_are_read_from_their_own_metadata() {
    let ds = dataset(ReadOptions::default());
    let group = ds.node("v2").await.unwrap();
    let meta = group.metadata.as_ref().unwrap();
    assert_eq!((group.node_type(), meta.zarr_format()), ("group", 2));
    assert_eq!(meta.attributes()["title"], "Zarr v2 fixtures");
    let children = ds.children("v2").await.unwrap();
    let names: Vec<&str> = children.iter().map(|c| c.name.as_str()).collect();
    assert!(names.contains(&"zlib") && names.contains(&"order_f"), "{names:?}");
    let nested = children.iter().find(|c| c.name == "nested").unwrap();
    assert_eq!(nested.node_type, "group");
    let array = ds.node("v2/xarray_dims").await.unwrap();
    let meta = array.metadata.as_ref().unwrap();
    assert_eq!((array.node_type(), meta.zarr_format()), ("array", 2));
    assert_eq!(meta.attributes()["units"], "K");
    assert_eq!(meta.raw()["dtype"], "<f4", "metadata is .zarray verbatim");
    let names = array.array().unwrap().dimension_names.clone();
    assert_eq!(names, Some(vec![Some("y".to_string()), Some("x".to_string())]));
    // Each v2 chunk is one read unit: whole-chunk reads equal the expected data.
    let (shape, data) = read(&ds, "v2/xarray_dims", "0:3,4:8").await.unwrap();
    assert_eq!(shape, vec![3, 4]);
    assert_eq!(data.len(), 3 * 4 * 4);
}
