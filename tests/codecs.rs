//! Contract 3.1 against data written by zarr-python 3.4 and zarrs
//! (`tests/fixtures/codecs`, see its README): every codec, data type and
//! chunk grid zarr-python 3 and zarrs write, in v3 and v2, inside sharding
//! too, read whole and through selections byte for byte against what those
//! libraries read back; checksum mismatches are corrupt. zfp and zfpy
//! arrays are lossy, and are compared byte for byte too: zarr-serve's zfp
//! decoder gives what libzfp gives.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use zarr_serve::engine::{vlen, Dataset, Error, ReadOptions, ResourceOptions, Resources, Selection};
use zarr_serve::storage::{Store, StoreOptions};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codecs")
}

fn manifest() -> Value {
    serde_json::from_slice(&std::fs::read(root().join("manifest.json")).unwrap()).unwrap()
}

fn dataset() -> Dataset {
    dataset_with(ReadOptions::default())
}

fn dataset_with(read: ReadOptions) -> Dataset {
    let resources = Arc::new(Resources::new(&ResourceOptions {
        read,
        check_buffer_reuse: true,
        ..ResourceOptions::default()
    }));
    let options = StoreOptions {
        buffers: resources.buffers(),
        ..StoreOptions::default()
    };
    let store = Store::open(&root().join("data.zarr").to_string_lossy(), &options).unwrap();
    Dataset::new("codecs", None, store, resources)
}

async fn read(ds: &Dataset, path: &str, select: &str) -> Result<(Vec<u64>, Vec<u8>), Error> {
    let plan = ds.plan_read(path, &Selection::parse(select)?).await?;
    let (data, _) = ds.read_all(&plan).await?;
    Ok((plan.output_shape(), data.to_vec()))
}

/// Whether the array's metadata names zfp.
fn uses_zfp(path: &str) -> bool {
    ["zarr.json", ".zarray"].iter().any(|name| {
        std::fs::read_to_string(root().join("data.zarr").join(path).join(name)).is_ok_and(|t| t.contains("zfp"))
    })
}

#[tokio::test]
async fn every_array_and_selection_matches_zarr_python_and_zarrs() {
    check_all(&dataset()).await;
}

/// Slabs of one chunk row, one request at a time, shards a chunk at a time:
/// slab boundaries fall on every (irregular) chunk edge.
#[tokio::test]
async fn every_array_matches_with_tiny_slabs() {
    let options = ReadOptions {
        slab_bytes: 1,
        concurrency: 1,
        batch_bytes: 1,
    };
    check_all(&dataset_with(options)).await;
}

async fn check_all(ds: &Dataset) {
    let (mut checked, mut zfp) = (0, 0);
    let mut failures = Vec::new();
    for array in manifest()["arrays"].as_array().unwrap() {
        let path = array["path"].as_str().unwrap();
        if uses_zfp(path) {
            zfp += 1;
        }
        let mut cases = vec![(String::new(), array["shape"].clone(), array["expected"].clone())];
        for sel in array["selections"].as_array().unwrap() {
            cases.push((
                sel["select"].as_str().unwrap().into(),
                sel["shape"].clone(),
                sel["expected"].clone(),
            ));
        }
        for (select, shape, expected) in cases {
            let want = std::fs::read(root().join(expected.as_str().unwrap())).unwrap();
            let want_shape: Vec<u64> = serde_json::from_value(shape).unwrap();
            match read(ds, path, &select).await {
                Ok((shape, data)) if shape == want_shape && data == want => checked += 1,
                Ok((shape, data)) => failures.push(format!(
                    "{path}[{select}]: shape {shape:?} vs {want_shape:?}, {} bytes vs {}, first difference at {:?}",
                    data.len(),
                    want.len(),
                    data.iter().zip(&want).position(|(a, b)| a != b)
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
    assert!(
        checked > 600 && zfp >= 23,
        "{checked} cases checked, {zfp} of them zfp arrays"
    );
}

#[tokio::test]
async fn checksum_mismatches_are_corrupt_never_data() {
    let ds = dataset();
    let cases = manifest()["corrupt"].as_array().unwrap().clone();
    assert!(cases.len() >= 20);
    for case in cases {
        let path = case["path"].as_str().unwrap();
        match read(&ds, path, case["select"].as_str().unwrap()).await {
            Err(Error::Corrupt { key, reason }) => assert!(key.starts_with(path), "{path}: {key} ({reason})"),
            other => panic!("{path} ({}): expected a corrupt error, got {other:?}", case["kind"]),
        }
    }
}

/// The `bytes` data type (the extension name of variable-length bytes):
/// values as zarr-python reads them, the name as stored.
#[tokio::test]
async fn bytes_data_type_reads_and_keeps_its_name() {
    use base64::Engine;
    let ds = dataset();
    for entry in manifest()["typed"].as_array().unwrap() {
        let path = entry["path"].as_str().unwrap();
        let node = ds.node(path).await.unwrap();
        assert_eq!(node.array().unwrap().data_type.name(), "bytes", "{path}");
        let mut cases = vec![("", &entry["whole"])];
        for sel in entry["selections"].as_array().unwrap() {
            cases.push((sel["select"].as_str().unwrap(), sel));
        }
        for (select, want) in cases {
            let (shape, data) = read(&ds, path, select).await.unwrap();
            assert_eq!(serde_json::json!(shape), want["shape"], "{path}[{select}]");
            let got: Vec<Value> = vlen::items(&data)
                .unwrap()
                .into_iter()
                .map(|item| Value::String(base64::engine::general_purpose::STANDARD.encode(item)))
                .collect();
            assert_eq!(Value::Array(got), want["json"], "{path}[{select}]");
        }
    }
}
