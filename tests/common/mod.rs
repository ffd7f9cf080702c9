//! Shared helpers: start the real server on an ephemeral port.

#![allow(dead_code, unreachable_pub)]

pub mod geo;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use zarr_serve::config::{Config, DatasetConfig};
use zarr_serve::http::{serve, AppState};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixtures() -> PathBuf {
    std::env::var_os("ZARR_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("tests/fixtures/interop"))
}

pub fn manifest() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(fixtures().join("manifest.json")).unwrap()).unwrap()
}

pub fn dataset(url: impl Into<String>) -> DatasetConfig {
    DatasetConfig {
        url: url.into(),
        description: None,
        token: None,
        read: None,
        write: None,
        writable: false,
        options: Default::default(),
        virtual_chunk_containers: Vec::new(),
    }
}

/// A config serving the fixtures as `fixtures` and the sample as `sample`.
pub fn config() -> Config {
    let mut config = Config {
        cors_origins: vec!["https://viewer.example".into()],
        ..Config::default()
    };
    // The fixtures on local disk, or where ZARR_FIXTURES_STORE says (e.g. S3).
    let fixtures_url = std::env::var("ZARR_FIXTURES_STORE")
        .unwrap_or_else(|_| fixtures().join("data.zarr").to_string_lossy().into_owned());
    config.datasets.insert("fixtures".into(), dataset(fixtures_url));
    config.datasets.insert(
        "sample".into(),
        dataset(repo().join("sample/sample.zarr").to_string_lossy()),
    );
    config
}

/// A running server; dropping it shuts the server down.
pub struct Server {
    pub base: String,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    pub handle: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    pub async fn start(config: Config) -> Server {
        let state: Arc<AppState> = AppState::from_config(&config).expect("valid config");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(serve(
            listener,
            state,
            async move {
                let _ = rx.await;
            },
            Duration::from_secs(10),
        ));
        Server {
            base,
            shutdown: Some(tx),
            handle: Some(handle),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Ask for shutdown and wait until the server has stopped.
    pub async fn stop(mut self) {
        let _ = self.shutdown.take().unwrap().send(());
        self.handle.take().unwrap().await.unwrap().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// A manifest array's expected elements (zarr-python's read), as f64.
pub fn expected(entry: &serde_json::Value) -> Vec<f64> {
    let raw = std::fs::read(fixtures().join(entry["expected"].as_str().unwrap())).unwrap();
    macro_rules! le {
        ($t:ty) => {
            raw.chunks_exact(std::mem::size_of::<$t>())
                .map(|b| <$t>::from_le_bytes(b.try_into().unwrap()) as f64)
                .collect()
        };
    }
    match entry["data_type"].as_str().unwrap() {
        "bool" => raw.iter().map(|&b| f64::from(b != 0)).collect(),
        "uint8" => le!(u8),
        "int8" => le!(i8),
        "int16" => le!(i16),
        "uint16" => le!(u16),
        "int32" => le!(i32),
        "uint32" => le!(u32),
        "int64" => le!(i64),
        "uint64" => le!(u64),
        "float16" => raw
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f64())
            .collect(),
        "float32" => le!(f32),
        "float64" => le!(f64),
        other => panic!("{other}"),
    }
}

pub fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y || (x.is_nan() && y.is_nan()))
}

/// Elements of a C-order array of `shape` at positions `1, 3, 5, ...` of
/// every dimension.
pub fn odd_positions(values: &[f64], shape: &[usize]) -> Vec<f64> {
    let mut out = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let mut rest = i;
        let mut keep = true;
        for n in shape.iter().rev() {
            keep &= rest % n % 2 == 1;
            rest /= n;
        }
        if keep {
            out.push(*v);
        }
    }
    out
}
