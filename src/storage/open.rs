//! Building a [`Store`] from a dataset URL and its options.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::http::HttpBuilder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ClientConfigKey, ObjectStore, RetryConfig};
use url::Url;

use super::conditional_delete::SignedDeletes;
use super::containers::{Containers, VirtualContainer};
use super::local::LocalFiles;
use super::objects::ObjectKeys;
use super::references::ReferenceSet;
use super::{Backend, Store};
use crate::buffer_pool::BufferPool;

/// Limits and backend options of one dataset's store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Per-request timeout.
    pub timeout: Duration,
    /// Retries of failed idempotent requests (remote stores), with backoff and jitter.
    pub retries: usize,
    /// Concurrent requests in flight to this store.
    pub max_concurrent_requests: usize,
    /// Ranges of one object closer than this are fetched in one request
    /// (remote stores; `None`: 256 KiB).
    pub coalesce_gap: Option<u64>,
    /// Backend options (`endpoint`, `region`, `allow_http`, ...), passed to
    /// the object_store builder of the URL's scheme. Credentials normally
    /// come from the environment (`AWS_ACCESS_KEY_ID`, ...).
    pub backend: BTreeMap<String, String>,
    /// Where local file reads get their buffers.
    pub buffers: Arc<BufferPool>,
    /// The only URL prefixes that virtual chunks and references may be read from.
    pub containers: Vec<VirtualContainer>,
    /// How long a branch's or tag's snapshot, or a reference set, is trusted.
    pub ref_ttl: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            retries: 3,
            max_concurrent_requests: 64,
            coalesce_gap: None,
            backend: BTreeMap::new(),
            buffers: Arc::default(),
            containers: Vec::new(),
            ref_ttl: Duration::from_secs(5),
        }
    }
}

impl Store {
    /// Open the store named by `location`: a local path, `file://`, `s3://`,
    /// `gs://`, `az://` or `http(s)://` URL; with `icechunk+` before the
    /// scheme, an Icechunk repository there; with `refs+`, a kerchunk
    /// reference set (a JSON object).
    pub fn open(location: &str, options: &StoreOptions) -> Result<Self, String> {
        if let Some(repository) = location.strip_prefix("icechunk+") {
            return Self::open_icechunk(location, repository, options);
        }
        if let Some(set) = location.strip_prefix("refs+") {
            return Self::open_references(location, set, options);
        }
        if !options.containers.is_empty() {
            return Err(
                "virtual_chunk_containers is only for Icechunk repositories and kerchunk reference sets".into(),
            );
        }
        let dir = match Url::parse(location) {
            Ok(url) if url.scheme() == "file" => url
                .to_file_path()
                .map_err(|_| format!("invalid file URL {}", redact(&url)))?,
            Ok(url) if url.scheme().len() > 1 => {
                let keys = open_url(&url, options)?;
                let backend = Backend {
                    no_suffix_ranges: matches!(url.scheme(), "az" | "azure" | "abfs" | "abfss"),
                    may_refuse_listing: matches!(url.scheme(), "http" | "https"),
                };
                return Ok(Store::of_objects(keys, backend, options));
            }
            // A plain path (a one-letter "scheme" is a Windows drive).
            _ => std::path::PathBuf::from(location),
        };
        let dir = std::path::absolute(&dir).map_err(|e| format!("invalid path {}: {e}", dir.display()))?;
        let root = Path::from_absolute_path(&dir).map_err(|e| format!("invalid path {}: {e}", dir.display()))?;
        let fs = Arc::new(LocalFileSystem::new());
        let local = LocalFiles::new(fs.clone(), options.buffers.clone(), &dir);
        Ok(Store::of_objects(
            ObjectKeys::new(fs, root, Some(local)),
            Backend::default(),
            options,
        ))
    }
}

impl Store {
    fn open_icechunk(location: &str, repository: &str, options: &StoreOptions) -> Result<Self, String> {
        let url = Url::parse(repository).map_err(|e| format!("invalid Icechunk repository URL '{repository}': {e}"))?;
        super::icechunk::check_options(url.scheme(), &options.backend)?;
        let containers = Arc::new(Containers::new(&options.containers, location, options)?);
        let plain = StoreOptions {
            containers: Vec::new(),
            ..options.clone()
        };
        // The repository's own objects (its chunks), through our stores.
        // The dataset's store is the same location with a limiter of its
        // own: its requests hold a permit while they read chunks here.
        let objects = Store::open(url.as_str(), &plain)?;
        let repository = super::icechunk::IcechunkRepository::new(url.clone(), options, containers, objects);
        Ok(Store::open(url.as_str(), &plain)?.of_repository(Arc::new(repository)))
    }

    fn open_references(location: &str, set: &str, options: &StoreOptions) -> Result<Self, String> {
        let split = set
            .rfind('/')
            .ok_or_else(|| format!("invalid reference set URL '{set}'"))?;
        let (dir, key) = (&set[..split + 1], &set[split + 1..]);
        let dir = if dir == "file:///" || dir == "/" {
            dir.to_string()
        } else {
            dir.trim_end_matches('/').to_string()
        };
        let plain = StoreOptions {
            containers: Vec::new(),
            ..options.clone()
        };
        // The set's own reads have their own limiter: they run inside a
        // request that holds a permit of the dataset's.
        let holder = Store::open(&dir, &plain)?;
        let containers = Arc::new(Containers::new(&options.containers, location, options)?);
        let references = ReferenceSet::new(holder, key.to_string(), options.ref_ttl, containers);
        Ok(Store::open(&dir, &plain)?.of_references(references))
    }
}

fn retry_config(options: &StoreOptions) -> RetryConfig {
    RetryConfig {
        max_retries: options.retries,
        retry_timeout: options.timeout,
        ..RetryConfig::default()
    }
}

/// Backend options with our defaults under the user's: the HTTP client's
/// own timeouts are set past the store timeout, so the store layer's timeout
/// fires first and is reported as a timeout (504).
fn backend_options(options: &StoreOptions) -> BTreeMap<String, String> {
    let outer = format!("{}ms", (options.timeout * 2 + Duration::from_secs(1)).as_millis());
    let mut merged = BTreeMap::from([
        ("timeout".to_string(), outer.clone()),
        ("connect_timeout".to_string(), outer),
    ]);
    merged.extend(options.backend.clone());
    merged
}

/// The objects under `url` of its backend, with conditional deletes where
/// the backend can presign them (S3, Azure).
fn open_url(url: &Url, options: &StoreOptions) -> Result<ObjectKeys, String> {
    let bad_option = |k: &str, e: object_store::Error| format!("invalid store option '{k}' for {}: {e}", url.scheme());
    let cannot_open = |e: object_store::Error| format!("cannot open {}: {e}", redact(url));
    let root = Path::from_url_path(url.path()).map_err(|e| format!("invalid path in {}: {e}", redact(url)))?;
    let settings = backend_options(options);
    let retry = retry_config(options);
    // Each builder takes the options as config keys (applied after the
    // environment, so a config file wins over AWS_* variables).
    macro_rules! configured {
        ($builder:expr) => {{
            let mut b = $builder.with_url(url.as_str()).with_retry(retry);
            for (k, v) in &settings {
                b = b.with_config(k.parse().map_err(|e| bad_option(k, e))?, v);
            }
            b
        }};
    }
    // Conditional deletes go through a client with the backend's own
    // client options, read from its configured builder.
    let client =
        |get: &dyn Fn(ClientConfigKey) -> Option<String>| super::redirects::client_for(get).map_err(cannot_open);
    let (store, deletes): (Arc<dyn ObjectStore>, _) = match url.scheme() {
        "s3" | "s3a" => {
            let b = configured!(AmazonS3Builder::from_env());
            let client = client(&|k| b.get_config_value(&AmazonS3ConfigKey::Client(k)))?;
            let s3 = Arc::new(b.build().map_err(cannot_open)?);
            // Not every S3-compatible server honours `If-Match` on DELETE.
            let probe = root.clone().join(SignedDeletes::PROBE);
            (s3.clone(), Some(SignedDeletes::new(s3, client, Some(probe))))
        }
        "gs" => (
            Arc::new(
                configured!(GoogleCloudStorageBuilder::from_env())
                    .build()
                    .map_err(cannot_open)?,
            ),
            None,
        ),
        "az" | "azure" | "abfs" | "abfss" => {
            let b = configured!(MicrosoftAzureBuilder::from_env());
            let client = client(&|k| b.get_config_value(&AzureConfigKey::Client(k)))?;
            let azure = Arc::new(b.build().map_err(cannot_open)?);
            (azure.clone(), Some(SignedDeletes::new(azure, client, None)))
        }
        "http" | "https" => {
            let mut base = url.clone();
            base.set_path("");
            let mut b = HttpBuilder::new()
                .with_url(base.as_str())
                .with_retry(retry)
                .with_http_connector(super::redirects::StayUnder::new(url));
            for (k, v) in settings
                .iter()
                .chain([(&"allow_http".to_string(), &"true".to_string())])
            {
                b = b.with_config(k.parse().map_err(|e| bad_option(k, e))?, v);
            }
            (Arc::new(b.build().map_err(cannot_open)?), None)
        }
        other => return Err(format!("unsupported store scheme '{other}' in {}", redact(url))),
    };
    // For bucket URLs (`s3://bucket/prefix`) the bucket is the host, so the
    // URL path is the prefix inside it; for HTTP it is the path on the server.
    Ok(ObjectKeys::new(store, root, None).with_deletes(deletes))
}

/// A URL without user information, for messages.
pub(crate) fn redact(url: &Url) -> String {
    let mut clean = url.clone();
    let _ = clean.set_username("");
    let _ = clean.set_password(None);
    clean.set_query(None);
    clean.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_local_and_s3_and_rejects_unknown() {
        let opts = StoreOptions::default();
        assert!(Store::open("/tmp", &opts).is_ok());
        assert!(Store::open("file:///tmp", &opts).is_ok());
        let mut s3 = opts.clone();
        s3.backend.insert("endpoint".into(), "http://127.0.0.1:9".into());
        s3.backend.insert("region".into(), "us-east-1".into());
        s3.backend.insert("allow_http".into(), "true".into());
        assert!(Store::open("s3://bucket/prefix", &s3).is_ok());
        let err = Store::open("ftp://host/x", &opts).unwrap_err();
        assert!(err.contains("ftp"), "{err}");
        let mut bad = opts.clone();
        bad.backend.insert("no_such_option".into(), "1".into());
        assert!(Store::open("s3://bucket/prefix", &bad)
            .unwrap_err()
            .contains("no_such_option"));
        let err = Store::open(
            "https://user:secret@example.com/x?sig=abc",
            &StoreOptions {
                timeout: Duration::ZERO,
                ..opts
            },
        )
        .map(|_| String::new())
        .unwrap_or_else(|e| e);
        assert!(!err.contains("secret") && !err.contains("sig=abc"), "{err}");
    }
}
