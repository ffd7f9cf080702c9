//! Writes to Zarr stores (api.md 4.2) over HTTP: region `PUT`s into every
//! array of the interop fixtures (written by zarr-python 2 and 3 and
//! tensorstore), each read back equal to a model of the array; what the
//! service cannot encode is 501 and leaves the store's bytes as they were;
//! bodies of every form; the errors of 4.2 change nothing; permissions.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{client, config, dataset, fixtures, Server};
use reqwest::{header, StatusCode};
use serde_json::Value;
use sha2::{Digest, Sha256};
use zarr_serve::config::Config;

/// The fixtures copied to a fresh directory, served writable as `w`
/// (anyone may write) and `ro` (not writable).
struct Writable {
    _dir: tempfile::TempDir,
    root: PathBuf,
    server: Server,
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A corpus of fixtures (`data.zarr` under `corpus`) copied and served as
/// [`writable`] serves the interop fixtures.
async fn writable_copy(corpus: &Path, adjust: impl FnOnce(&mut Config)) -> Writable {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data.zarr");
    copy_dir(&corpus.join("data.zarr"), &root);
    let mut config = config();
    let mut w = dataset(root.to_string_lossy());
    w.writable = true;
    w.write = Some(vec!["*".into()]);
    config.datasets.insert("w".into(), w);
    config.datasets.insert("ro".into(), dataset(root.to_string_lossy()));
    adjust(&mut config);
    let server = Server::start(config).await;
    Writable {
        _dir: dir,
        root,
        server,
    }
}

/// The hash of every file under `dir`, by path.
fn hashes(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.insert(path.clone(), hex::encode(Sha256::digest(std::fs::read(&path).unwrap())));
            }
        }
    }
    out
}

/// Bytes of one element of `data_type`, and value number `k` of it.
fn element(data_type: &str, k: u64) -> Option<Vec<u8>> {
    let f = k as f64 * 0.25 - 3.0;
    Some(match data_type {
        "bool" => vec![(k % 2) as u8],
        "int8" | "uint8" => vec![(k * 37 + 11) as u8],
        "int16" | "uint16" => ((k * 37 + 11) as u16).to_le_bytes().to_vec(),
        "int32" | "uint32" => ((k * 7919 + 11) as u32).to_le_bytes().to_vec(),
        "int64" | "uint64" | "numpy.datetime64" | "numpy.timedelta64" => (k * 104_729 + 11).to_le_bytes().to_vec(),
        "float16" => half::f16::from_f64(f).to_le_bytes().to_vec(),
        "float32" => (f as f32).to_le_bytes().to_vec(),
        "float64" => f.to_le_bytes().to_vec(),
        "complex64" => [(f as f32).to_le_bytes(), (-f as f32).to_le_bytes()].concat(),
        "complex128" => [f.to_le_bytes(), (-f).to_le_bytes()].concat(),
        raw if raw.starts_with('r') => {
            let n: usize = raw[1..].parse::<usize>().ok()? / 8;
            (0..n).map(|i| (k as usize * 31 + i) as u8).collect()
        }
        _ => return None,
    })
}

/// A region of every dimension: from a quarter in to a fifth from the
/// end, every second position on odd dimensions.
fn region(shape: &[u64]) -> Vec<(u64, u64, u64)> {
    shape
        .iter()
        .enumerate()
        .map(|(d, &n)| {
            let (start, stop) = (n / 4, n - n / 5);
            let step = if d % 2 == 1 { 2 } else { 1 };
            (start, stop.max(start + 1).min(n), step)
        })
        .collect()
}

fn select(region: &[(u64, u64, u64)]) -> String {
    region
        .iter()
        .map(|(a, b, s)| format!("{a}:{b}:{s}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The positions a region selects along each dimension.
fn positions(region: &[(u64, u64, u64)]) -> Vec<Vec<u64>> {
    region
        .iter()
        .map(|&(a, b, s)| (a..b).step_by(s as usize).collect())
        .collect()
}

/// The element offsets (in elements, C order) of `region` in an array
/// of `shape`, in the region's C order.
fn offsets(shape: &[u64], region: &[(u64, u64, u64)]) -> Vec<usize> {
    let positions = positions(region);
    let count: usize = positions.iter().map(Vec::len).product();
    let mut out = Vec::with_capacity(count);
    let mut at = vec![0usize; shape.len()];
    for _ in 0..count {
        let mut offset = 0u64;
        for d in 0..shape.len() {
            offset = offset * shape[d] + positions[d][at[d]];
        }
        out.push(offset as usize);
        for d in (0..shape.len()).rev() {
            at[d] += 1;
            if at[d] < positions[d].len() {
                break;
            }
            at[d] = 0;
        }
    }
    out
}

/// `model` (C order, elements of `size` bytes, of `shape`) with `body`
/// written over `region`.
fn apply(model: &mut [u8], shape: &[u64], size: usize, region: &[(u64, u64, u64)], body: &[u8]) {
    for (k, o) in offsets(shape, region).into_iter().enumerate() {
        model[o * size..(o + 1) * size].copy_from_slice(&body[k * size..(k + 1) * size]);
    }
}

async fn read_all(server: &Server, path: &str) -> Vec<u8> {
    try_read_all(server, path)
        .await
        .unwrap_or_else(|| panic!("{path} did not read"))
}

/// The whole array, or `None` when the service cannot read it.
async fn try_read_all(server: &Server, path: &str) -> Option<Vec<u8>> {
    let url = server.url(&format!("/v1/datasets/w/data/{path}?format=binary"));
    let response = client().get(url).send().await.unwrap();
    if response.status() != 200 {
        return None;
    }
    Some(response.bytes().await.unwrap().to_vec())
}

/// The elements of `region` in `array` (C order, elements of `size` bytes).
fn extract(array: &[u8], shape: &[u64], size: usize, region: &[(u64, u64, u64)]) -> Vec<u8> {
    offsets(shape, region)
        .into_iter()
        .flat_map(|o| array[o * size..(o + 1) * size].iter().copied())
        .collect()
}

async fn put(server: &Server, path: &str, select: &str, content_type: &str, body: Vec<u8>) -> reqwest::Response {
    let url = server.url(&format!("/v1/datasets/w/data/{path}?select={select}"));
    client()
        .put(url)
        .header(header::CONTENT_TYPE, content_type)
        .body(body)
        .send()
        .await
        .unwrap()
}

/// Every fixed-size array of the fixtures, whatever wrote it: a strided
/// region written, then the whole array read back equals the model. An
/// array whose codecs the service cannot encode is 501 naming the codec,
/// and its files are unchanged.
#[tokio::test]
async fn every_fixture_array_takes_a_region_write() {
    let tally = write_every_array(&fixtures()).await;
    assert!(tally.written >= 150, "only {} arrays written", tally.written);
}

/// The codec corpus (every codec the service reads, lossy ones included):
/// lossless arrays read back equal to the model; lossy ones read back
/// equal to the model outside the region, and writing what was read back
/// again changes nothing (an encoder's output is its own fixed point). A
/// value a codec cannot encode (out of a `cast_value` range) is 400 with
/// the files unchanged. `tests/writes/test_encoders.py` compares the
/// lossy encoders with numcodecs' bit for bit.
#[tokio::test]
async fn every_codec_fixture_array_takes_a_region_write() {
    let corpus = common::repo().join("tests/fixtures/codecs");
    let tally = write_every_array(&corpus).await;
    assert!(tally.written >= 100, "only {} arrays written", tally.written);
    assert!(tally.lossy >= 20, "only {} lossy arrays written", tally.lossy);
}

/// Whether the array's codecs store elements in a narrower type than they
/// were given (a `delta` or `fixedscaleoffset` with an `astype`, a
/// `packbits` keeping some bits): the fixtures' values survive that, the
/// values written here need not.
fn narrows(array: &Path) -> bool {
    fn walk(v: &Value) -> bool {
        match v {
            Value::Object(o) => {
                let narrowed = o.get("astype").is_some_and(|a| Some(a) != o.get("dtype"))
                    || o.contains_key("last_bit")
                    || o.contains_key("first_bit");
                narrowed || o.values().any(walk)
            }
            Value::Array(a) => a.iter().any(walk),
            _ => false,
        }
    }
    ["zarr.json", ".zarray"].iter().any(|name| {
        std::fs::read(array.join(name))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .is_some_and(|meta| walk(&meta))
    })
}

/// Whether a `cast_value` of the array rounds in one direction, or the
/// array is zfp (not a projection: its decoded values encoded again can
/// move their last bits), so a value decoded and encoded again can land
/// one step away.
fn directed_rounding(array: &Path) -> bool {
    let zfp = ["zarr.json", ".zarray"]
        .iter()
        .any(|name| std::fs::read_to_string(array.join(name)).is_ok_and(|meta| meta.contains("zfp")));
    zfp || std::fs::read_to_string(array.join("zarr.json"))
        .is_ok_and(|meta| meta.contains("\"towards-") || meta.contains("\"nearest-away\""))
}

#[derive(Default)]
struct Tally {
    written: usize,
    lossy: usize,
}

async fn write_every_array(corpus: &Path) -> Tally {
    let w = writable_copy(corpus, |_| {}).await;
    let manifest: Value = serde_json::from_slice(&std::fs::read(corpus.join("manifest.json")).unwrap()).unwrap();
    let mut tally = Tally::default();
    let (mut refused, mut out_of_range) = (Vec::new(), Vec::new());
    for entry in manifest["arrays"].as_array().unwrap() {
        let path = entry["path"].as_str().unwrap();
        let data_type = entry["data_type"].as_str().unwrap();
        let lossy = entry["features"]
            .as_array()
            .is_some_and(|f| f.iter().any(|v| v == "lossy"))
            || narrows(&w.root.join(path));
        let shape: Vec<u64> = entry["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        if shape.contains(&0) {
            continue;
        }
        let Some(one) = element(data_type, 0) else {
            continue;
        };
        let Some(mut model) = try_read_all(&w.server, path).await else {
            continue; // not readable here: the read suites cover its error
        };
        let size = one.len();
        let region = region(&shape);
        let count: usize = positions(&region).iter().map(Vec::len).product();
        let body: Vec<u8> = (0..count as u64).flat_map(|k| element(data_type, k).unwrap()).collect();
        let before = hashes(&w.root.join(path));
        let response = put(
            &w.server,
            path,
            &select(&region),
            "application/octet-stream",
            body.clone(),
        )
        .await;
        let status = response.status();
        let answer: Value = response.json().await.unwrap();
        let detail = answer["detail"].as_str().unwrap_or_default().to_string();
        if status == StatusCode::NOT_IMPLEMENTED {
            assert!(detail.contains("writing with"), "{path}: {answer}");
            assert_eq!(
                hashes(&w.root.join(path)),
                before,
                "{path}: a refused write changed files"
            );
            // Zeros (the fill value of most of these) are refused before anything too.
            let zeros = put(
                &w.server,
                path,
                &select(&region),
                "application/octet-stream",
                vec![0; body.len()],
            )
            .await;
            assert_eq!(zeros.status(), StatusCode::NOT_IMPLEMENTED, "{path}");
            assert_eq!(
                hashes(&w.root.join(path)),
                before,
                "{path}: a refused fill write changed files"
            );
            refused.push(format!("{path}: {detail}"));
            continue;
        }
        if lossy && status == StatusCode::BAD_REQUEST && detail.contains("range") {
            assert_eq!(
                hashes(&w.root.join(path)),
                before,
                "{path}: a value out of range changed files"
            );
            out_of_range.push(format!("{path}: {detail}"));
            continue;
        }
        assert_eq!(status, 200, "{path} ({data_type}, {}): {answer}", select(&region));
        assert_eq!(answer["etag"].as_str().map(str::len), Some(34), "{path}: {answer}");
        let back = read_all(&w.server, path).await;
        if lossy {
            // Where re-encoding what was decoded gives what was stored
            // (not so for narrowing filters and directed rounding):
            // outside the region nothing moved, and what the codec kept
            // is a fixed point of writing it again.
            let stable = !narrows(&w.root.join(path)) && !directed_rounding(&w.root.join(path));
            let kept = extract(&back, &shape, size, &region);
            let mut outside = back.clone();
            apply(
                &mut outside,
                &shape,
                size,
                &region,
                &extract(&model, &shape, size, &region),
            );
            let moved =
                (0..model.len() / size).find(|i| outside[i * size..(i + 1) * size] != model[i * size..(i + 1) * size]);
            assert!(
                moved.is_none() || !stable,
                "{path} ({data_type}): element {moved:?} outside the region changed"
            );
            let again = put(&w.server, path, &select(&region), "application/octet-stream", kept).await;
            assert_eq!(again.status(), 200, "{path}");
            let twice = read_all(&w.server, path).await;
            assert!(
                twice == back || !stable,
                "{path} ({data_type}): writing what was read back changed it"
            );
            tally.lossy += 1;
        } else {
            apply(&mut model, &shape, size, &region, &body);
            assert!(
                back == model,
                "{path} ({data_type}): the array read back is not the model"
            );
        }
        tally.written += 1;
    }
    eprintln!(
        "{} arrays written ({} lossy); refused (501):\n  {}\nout of range (400):\n  {}",
        tally.written,
        tally.lossy,
        refused.join("\n  "),
        out_of_range.join("\n  ")
    );
    tally
}

/// A value the array's codecs cannot encode (out of a `cast_value` range
/// without `out_of_range`) is 400 naming it, even when it comes last and
/// the chunks before it could be written: nothing is written.
#[tokio::test]
async fn a_value_out_of_a_codec_range_writes_nothing() {
    let w = writable_copy(&common::repo().join("tests/fixtures/codecs"), |_| {}).await;
    let path = "v3_ext/scale_offset_cast_u8_nan";
    let before = hashes(&w.root.join(path));
    // (x + 10) * 0.1 must fit uint8: 1e6 does not; NaN maps to 0.
    let mut values = vec![vec![Value::from(1.5); 30]; 20];
    values[0][0] = Value::from("NaN");
    values[19][29] = Value::from(1e6);
    let body = serde_json::to_vec(&values).unwrap();
    let response = put(&w.server, path, ":,:", "application/json", body).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let answer: Value = response.json().await.unwrap();
    assert!(answer["detail"].as_str().unwrap().contains("range"), "{answer}");
    assert_eq!(hashes(&w.root.join(path)), before, "a refused write changed files");
    // The same body without the bad value is written.
    values[19][29] = Value::from(2.0);
    let body = serde_json::to_vec(&values).unwrap();
    let response = put(&w.server, path, ":,:", "application/json", body).await;
    assert_eq!(response.status(), 200);
    assert_ne!(hashes(&w.root.join(path)), before);
}

/// Lossy zfp has no form for NaN or infinity: a body holding one, last of
/// all, is 400 and writes nothing, in zarrs' `zfp` and numcodecs' `zfpy`
/// (v3, v2, inside shards); reversible zfp keeps NaN exactly.
#[tokio::test]
async fn nan_in_a_lossy_zfp_array_writes_nothing() {
    let w = writable_copy(&common::repo().join("tests/fixtures/codecs"), |_| {}).await;
    for path in [
        "zarrs/zfp_float64_fixed_accuracy",
        "v3_numcodecs/zfpy_rate_f32",
        "v2/zfpy_rate_f64",
        "sharded/zfpy_inner",
    ] {
        let before = hashes(&w.root.join(path));
        let shape: Vec<u64> = serde_json::from_slice::<Value>(
            &std::fs::read(w.root.join(path).join("zarr.json"))
                .or_else(|_| std::fs::read(w.root.join(path).join(".zarray")))
                .unwrap(),
        )
        .unwrap()["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        let mut values = vec![vec![Value::from(1.5); shape[1] as usize]; shape[0] as usize];
        *values.last_mut().unwrap().last_mut().unwrap() = Value::from("NaN");
        let body = serde_json::to_vec(&values).unwrap();
        let response = put(&w.server, path, ":,:", "application/json", body).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{path}");
        let answer: Value = response.json().await.unwrap();
        assert!(answer["detail"].as_str().unwrap().contains("NaN"), "{path}: {answer}");
        assert_eq!(
            hashes(&w.root.join(path)),
            before,
            "{path}: a refused write changed files"
        );
    }
    let path = "zarrs/zfp_float32_reversible";
    let mut values = vec![vec![Value::from(2.25); 17]; 13];
    values[12][16] = Value::from("NaN");
    let body = serde_json::to_vec(&values).unwrap();
    let response = put(&w.server, path, ":,:", "application/json", body).await;
    assert_eq!(response.status(), 200, "{path}");
    let back = read_all(&w.server, path).await;
    assert_eq!(back.len(), 13 * 17 * 4);
    assert!(f32::from_le_bytes(back[back.len() - 4..].try_into().unwrap()).is_nan());
    assert_eq!(f32::from_le_bytes(back[..4].try_into().unwrap()), 2.25);
}

/// `If-Match` holds per object (api.md 4.2): a write whose objects were
/// checked at some versions puts each only at that version; an object
/// found changed since is 412, never re-read and re-applied, and the
/// detail names the objects already replaced. (Over HTTP the race between
/// the check and a put cannot be timed; the engine takes the versions the
/// check saw, and one of them is made stale here.)
#[tokio::test]
async fn an_object_changed_after_if_match_is_412_naming_what_was_replaced() {
    use std::sync::Arc;
    use zarr_serve::engine::{
        Dataset, Error, InMemory, RegionWrite, ResourceOptions, Resources, Selection, WriteOptions,
    };
    use zarr_serve::storage::{Store, StoreOptions};

    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data.zarr");
    copy_dir(&fixtures().join("data.zarr"), &root);
    let open = || {
        let resources = Arc::new(Resources::new(&ResourceOptions::default()));
        let options = StoreOptions {
            buffers: resources.buffers(),
            ..StoreOptions::default()
        };
        let store = Store::open(&root.to_string_lossy(), &options).unwrap();
        Dataset::new("w", None, store, resources)
    };
    let ds = open();
    let path = "zarr_python/float64";
    let plan = ds.plan_read(path, &Selection::parse(":,:").unwrap()).await.unwrap();
    let (before, versions) = ds.read_all(&plan).await.unwrap();
    assert!(versions.len() >= 4, "{versions:?}");
    // The last object (in key order) is stale: written to in between.
    let mut checked = versions.clone();
    let stale = checked.keys().last().unwrap().clone();
    checked.insert(stale.clone(), Some("\"another-version\"".into()));
    let write = RegionWrite::of(&plan).unwrap();
    let row_bytes = write.row_bytes();
    let body = InMemory::new(bytes::Bytes::from(vec![0x11u8; before.len()]), row_bytes);
    let options = WriteOptions {
        expected: Some(Arc::new(checked)),
        concurrency: 1,
        ..WriteOptions::default()
    };
    let err = ds.write_region(&write, Arc::new(body), &options).await.unwrap_err();
    let Error::PreconditionFailed(detail) = &err else {
        panic!("expected 412, got {err:?}");
    };
    assert!(detail.contains(&stale), "{detail}");
    assert!(detail.contains("already replaced"), "{detail}");
    // The stale object was not written; with the versions as checked, all are.
    let after = open();
    let plan = after.plan_read(path, &Selection::parse(":,:").unwrap()).await.unwrap();
    let (_, now) = after.read_all(&plan).await.unwrap();
    assert_eq!(now.get(&stale), versions.get(&stale), "the stale object was written");
    // An object checked as absent but there now is 412 too, though the
    // write covers it whole.
    let mut absent = now.clone();
    absent.insert(stale.clone(), None);
    let options = WriteOptions {
        expected: Some(Arc::new(absent)),
        concurrency: 1,
        ..WriteOptions::default()
    };
    let body = InMemory::new(bytes::Bytes::from(vec![0x22u8; before.len()]), row_bytes);
    let err = after.write_region(&write, Arc::new(body), &options).await.unwrap_err();
    assert!(
        matches!(&err, Error::PreconditionFailed(d) if d.contains(&stale)),
        "{err:?}"
    );
    let options = WriteOptions {
        expected: Some(Arc::new(after.read_all(&plan).await.unwrap().1)),
        ..WriteOptions::default()
    };
    let body = InMemory::new(bytes::Bytes::from(vec![0x11u8; before.len()]), row_bytes);
    after.write_region(&write, Arc::new(body), &options).await.unwrap();
}
