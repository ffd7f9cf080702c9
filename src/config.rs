//! Configuration: built-in defaults, then the config file, then
//! `ZARR_SERVE_<KEY>` environment variables, then the command line.
//!
//! Datasets come from the command line (`PATH`, `--dataset NAME=URL`) if any
//! are given there, else from `ZARR_SERVE_DATASETS` (`name=url,name=url`),
//! else from the config file. With no argument at all, `config/default.toml`
//! is read if it exists, which serves the sample dataset.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use serde::{Deserialize, Serialize};

use crate::buffer_pool::BufferPool;
use crate::engine::{CacheOptions, ReadOptions, ResourceOptions};
use crate::identity::{Grant, Grants, Identity, IdentitySettings, OidcSettings, RateLimits, TrustedProxies};
use crate::storage::{StoreOptions, VirtualContainer};

/// `zarr-serve [PATH] [--config FILE] [--listen ADDR:PORT] [--dataset NAME=URL]...`
#[derive(Debug, Parser)]
#[command(name = "zarr-serve", version, about = "Serve regions of Zarr v3 arrays over HTTP")]
pub struct Cli {
    /// Serve this local directory as one dataset named after its last segment (without `.zarr`).
    pub path: Option<PathBuf>,
    /// Config file (TOML); default: config/default.toml when it exists.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long)]
    pub listen: Option<String>,
    /// A dataset as NAME=URL (local path, file://, s3://, gs://, az://, http(s)://); may repeat.
    #[arg(long = "dataset", value_name = "NAME=URL")]
    pub datasets: Vec<String>,
    /// Probe this configuration's listen address: exit 0 if `/healthz` answers 200 (for container health checks).
    #[arg(long)]
    pub healthcheck: bool,
}

/// One dataset in the config file.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DatasetConfig {
    /// Where the hierarchy root is.
    pub url: String,
    /// Shown in `/v1/datasets`.
    #[serde(default)]
    pub description: Option<String>,
    /// Bearer token required to read this dataset (never shown or logged).
    #[serde(default)]
    pub token: Option<String>,
    /// Who may read it (grants; default `["*"]`, or only `token` when set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<Vec<String>>,
    /// Who may write it (grants; default nobody).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<Vec<String>>,
    /// Whether the service takes writes to it (api.md 4.2; local
    /// directories, `s3://` and `az://`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub writable: bool,
    /// Backend options (endpoint, region, allow_http, ...).
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// URL prefixes that Icechunk virtual chunks and kerchunk references
    /// may be read from (nothing else is fetched).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub virtual_chunk_containers: Vec<VirtualChunkContainer>,
}

/// An item of `virtual_chunk_containers`: a URL prefix, or a table with
/// the prefix and the object_store options of its store.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum VirtualChunkContainer {
    /// `"s3://bucket/archive/"`
    Prefix(String),
    /// `{url_prefix = "...", options = {...}}`
    Table(ContainerTable),
}

/// The table form of a virtual chunk container.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ContainerTable {
    /// The URL prefix.
    pub url_prefix: String,
    /// object_store options of the prefix's store.
    #[serde(default)]
    pub options: BTreeMap<String, String>,
}

impl VirtualChunkContainer {
    fn to_store(&self) -> VirtualContainer {
        match self {
            Self::Prefix(p) => VirtualContainer {
                url_prefix: p.clone(),
                options: None,
            },
            Self::Table(t) => VirtualContainer {
                url_prefix: t.url_prefix.clone(),
                options: Some(t.options.clone()),
            },
        }
    }
}

/// `[auth]`: where callers' credentials are checked.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// `[auth.oidc]`: bearer tokens of one OpenID Connect issuer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oidc: Option<OidcConfig>,
    /// `[auth.api_keys.NAME]`: API keys, kept as their SHA-256.
    pub api_keys: BTreeMap<String, ApiKeyConfig>,
}

/// `[auth.oidc]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OidcConfig {
    /// The issuer's URL, as tokens name it in `iss`.
    pub issuer: String,
    /// The audience tokens must carry in `aud`.
    pub audience: String,
    /// The claim listing the caller's groups (a dotted path reaches into
    /// objects: `realm_access.roles`).
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
}

fn default_groups_claim() -> String {
    "groups".into()
}

/// `[auth.api_keys.NAME]`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// The hex SHA-256 of the key (`printf %s KEY | sha256sum`).
    pub sha256: String,
}

/// The whole configuration; every key may be set as `ZARR_SERVE_<KEY>`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Listen address.
    pub listen: String,
    /// `text` or `json` log lines.
    pub log_format: String,
    /// tracing filter, e.g. `info` or `zarr_serve=debug`.
    pub log_level: String,
    /// Largest decoded response, in bytes (413 above it).
    pub max_response_bytes: u64,
    /// Most bytes one map tile may decode (413 above it, naming a zoom at
    /// which a tile would not).
    pub tile_read_limit_bytes: u64,
    /// Largest WMS `WIDTH` or `HEIGHT`, in pixels (400 above it).
    pub wms_max_size: u32,
    /// Most vertices of an EDR `area` polygon (400 above it).
    pub edr_max_polygon_vertices: u32,
    /// Largest `binary` or `npy` data response compressed on request;
    /// larger ones are sent as they are (identity).
    pub compress_max_bytes: u64,
    /// Time allowed to produce response headers, in seconds.
    pub request_timeout_secs: f64,
    /// Time allowed for one store request, in seconds.
    pub store_timeout_secs: f64,
    /// Retries of failed idempotent store requests (remote stores).
    pub store_retries: usize,
    /// Concurrent store requests per dataset.
    pub store_max_concurrent_requests: usize,
    /// How long parsed metadata is trusted, in seconds.
    pub metadata_ttl_secs: f64,
    /// Bytes of shard indexes cached.
    pub shard_index_cache_bytes: u64,
    /// Bytes of decoded inner chunks cached for small reads (0: off). A read
    /// served from it asks the store for the shard's version first.
    pub decoded_chunk_cache_bytes: u64,
    /// Target bytes of one streamed slab.
    pub slab_bytes: u64,
    /// Object stores: inner-chunk ranges closer than this are fetched
    /// together (absent: 256 KiB). Local directories read exact ranges.
    pub coalesce_gap_bytes: Option<u64>,
    /// Chunks or shards read at once per request.
    pub read_concurrency: usize,
    /// Region reads in flight at once; more wait (bounds decoded bytes held).
    pub max_concurrent_reads: usize,
    /// Seconds a region read waits for a slot before it is answered 503.
    pub read_slot_wait_secs: f64,
    /// Decoded slab bytes held at once by all reads together.
    pub slab_budget_bytes: u64,
    /// Seconds a slab waits for its share of the slab budget before its read fails with 503.
    pub slab_budget_wait_secs: f64,
    /// Slab bytes one streamed response holds at once (one or two slabs).
    pub stream_bytes_in_flight: u64,
    /// Threads that decode chunks; 0: one per core.
    pub decode_threads: usize,
    /// Idle bytes of large buffers kept for reuse.
    pub buffer_pool_bytes: u64,
    /// Origins allowed by CORS (`*` for any); empty: no CORS headers.
    pub cors_origins: Vec<String>,
    /// `Cache-Control: max-age` of data, node, listing and passthrough responses, in seconds.
    pub cache_max_age_secs: u64,
    /// Bearer token `/metrics` requires, if set (never shown or logged).
    pub metrics_token: Option<String>,
    /// The service's address as clients reach it (`https://maps.example.org`,
    /// with a path prefix if a proxy adds one): the base of every absolute
    /// link the service writes (WMS capabilities, EDR and TileJSON links,
    /// the explorer's commands). Unset: the request's `Host` header.
    pub public_url: Option<String>,
    /// Seconds to finish in-flight requests after SIGTERM.
    pub shutdown_grace_secs: f64,
    /// Requests per second each caller may make (per client address when
    /// anonymous); unset: no limit.
    pub rate_limit_per_second: Option<f64>,
    /// Requests a caller may make at once above the rate (default: the
    /// rate rounded up).
    pub rate_limit_burst: Option<u32>,
    /// Proxies (addresses, CIDR blocks) whose `X-Forwarded-For` names the
    /// client a rate limit counts; empty: the connection's peer.
    pub trusted_proxies: Vec<String>,
    /// Largest request body of a write, in bytes (413 above it).
    pub max_request_bytes: u64,
    /// Times a write reads an object again after another writer changed
    /// it, before answering 409.
    pub write_retries: usize,
    /// Seconds an Icechunk transaction lives after the last write in it
    /// (410 after).
    pub transaction_ttl_secs: f64,
    /// Where write bodies larger than `slab_bytes` are spooled (unset: the
    /// system's temporary directory).
    pub write_spool_dir: Option<PathBuf>,
    /// Credentials: OpenID Connect and API keys.
    pub auth: AuthConfig,
    /// The config file read, if any (not a key).
    #[serde(skip)]
    pub file: Option<PathBuf>,
    /// The datasets by name.
    pub datasets: BTreeMap<String, DatasetConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            log_format: "text".into(),
            log_level: "info".into(),
            max_response_bytes: 2 << 30,
            tile_read_limit_bytes: 256 << 20,
            wms_max_size: 4096,
            edr_max_polygon_vertices: 10_000,
            compress_max_bytes: 16 << 20,
            request_timeout_secs: 60.0,
            store_timeout_secs: 30.0,
            store_retries: 3,
            store_max_concurrent_requests: 64,
            metadata_ttl_secs: 5.0,
            shard_index_cache_bytes: 64 << 20,
            decoded_chunk_cache_bytes: 128 << 20,
            slab_bytes: 16 << 20,
            coalesce_gap_bytes: None,
            read_concurrency: 8,
            max_concurrent_reads: 16,
            read_slot_wait_secs: 5.0,
            slab_budget_bytes: 256 << 20,
            slab_budget_wait_secs: 10.0,
            stream_bytes_in_flight: 96 << 20,
            decode_threads: 0,
            buffer_pool_bytes: 64 << 20,
            cors_origins: vec![],
            cache_max_age_secs: 60,
            metrics_token: None,
            public_url: None,
            shutdown_grace_secs: 30.0,
            rate_limit_per_second: None,
            rate_limit_burst: None,
            trusted_proxies: Vec::new(),
            max_request_bytes: 1 << 30,
            write_retries: 8,
            transaction_ttl_secs: 3600.0,
            write_spool_dir: None,
            auth: AuthConfig::default(),
            file: None,
            datasets: BTreeMap::new(),
        }
    }
}

const DEFAULT_CONFIG: &str = "config/default.toml";

/// `path` with its `.` and `..` components resolved by name (stores take
/// no `..`), e.g. `/srv/config/../sample` -> `/srv/sample`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Where the config file is looked for when neither `--config` nor
/// `ZARR_SERVE_CONFIG` names one, first found wins: the repository's
/// `config/default.toml` under the working directory (so `cargo run`
/// serves the sample), the user's `$XDG_CONFIG_HOME/zarr-serve/config.toml`
/// (`~/.config/...`), then `/etc/zarr-serve/config.toml`.
fn search_paths(env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let user = env
        .get("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| env.get("HOME").map(|h| Path::new(h).join(".config")));
    let mut paths = vec![PathBuf::from(DEFAULT_CONFIG)];
    paths.extend(user.map(|d| d.join("zarr-serve").join("config.toml")));
    paths.push(PathBuf::from("/etc/zarr-serve/config.toml"));
    paths
}

impl Config {
    /// Load from the command line and environment; `Err` is a one-line message.
    pub fn load(cli: &Cli, env: &BTreeMap<String, String>) -> Result<Self, String> {
        let file = cli
            .config
            .clone()
            .or_else(|| env.get("ZARR_SERVE_CONFIG").map(PathBuf::from));
        let file = file.or_else(|| search_paths(env).into_iter().find(|p| p.is_file()));
        let mut config = match &file {
            Some(path) => Self::from_file(path)?,
            None => Self::default(),
        };
        config.apply_env(env)?;
        config.file = file;
        if let Some(listen) = &cli.listen {
            config.listen = listen.clone();
        }
        let mut cli_datasets = BTreeMap::new();
        if let Some(path) = &cli.path {
            cli_datasets.insert(dataset_name_for(path)?, DatasetConfig::local(path));
        }
        for spec in &cli.datasets {
            let (name, url) = parse_dataset_spec(spec, "--dataset")?;
            cli_datasets.insert(name, DatasetConfig::url(url));
        }
        if !cli_datasets.is_empty() {
            config.datasets = cli_datasets;
        }
        config.validate()?;
        Ok(config)
    }

    /// The file's settings; relative local dataset paths in it are taken
    /// from the file's directory, so they mean the same from anywhere.
    fn from_file(path: &Path) -> Result<Self, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
        let mut config: Self = toml::from_str(&text).map_err(|e| {
            format!(
                "invalid config file {}: {}",
                path.display(),
                e.to_string().replace('\n', " ").trim()
            )
        })?;
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        for dataset in config.datasets.values_mut() {
            let url = &dataset.url;
            if !url.contains("://") && !url.starts_with("file:") && Path::new(url).is_relative() {
                dataset.url = normalize(&dir.join(url)).to_string_lossy().into_owned();
            }
        }
        Ok(config)
    }

    fn apply_env(&mut self, env: &BTreeMap<String, String>) -> Result<(), String> {
        // Each ZARR_SERVE_<KEY> is parsed as the TOML value of <key>, so the
        // same types and checks apply as in the file; a bare string is quoted.
        let mut table = toml::Table::new();
        for (name, value) in env {
            let Some(key) = name.strip_prefix("ZARR_SERVE_") else {
                continue;
            };
            let key = key.to_ascii_lowercase();
            match key.as_str() {
                "config" => continue,
                "datasets" => {
                    let mut datasets = BTreeMap::new();
                    for spec in value.split(',').filter(|s| !s.trim().is_empty()) {
                        let (n, url) = parse_dataset_spec(spec.trim(), name)?;
                        datasets.insert(n, DatasetConfig::url(url));
                    }
                    self.datasets = datasets;
                    continue;
                }
                _ => {}
            }
            let parsed = format!("v = {value}")
                .parse::<toml::Table>()
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(value.clone()));
            table.insert(key, parsed);
        }
        if table.is_empty() {
            return Ok(());
        }
        let mut merged = toml::Table::try_from(&*self).map_err(|e| e.to_string())?;
        for (k, v) in table {
            merged.insert(k, v);
        }
        *self = merged.try_into().map_err(|e: toml::de::Error| {
            format!("invalid environment: {}", e.to_string().replace('\n', " ").trim())
        })?;
        Ok(())
    }

    fn validate(&self) -> Result<(), String> {
        self.listen_addr()?;
        if !["text", "json"].contains(&self.log_format.as_str()) {
            return Err(format!(
                "invalid log_format '{}': expected text or json",
                self.log_format
            ));
        }
        for (name, secs) in [
            ("request_timeout_secs", self.request_timeout_secs),
            ("store_timeout_secs", self.store_timeout_secs),
            ("metadata_ttl_secs", self.metadata_ttl_secs),
            ("shutdown_grace_secs", self.shutdown_grace_secs),
            ("read_slot_wait_secs", self.read_slot_wait_secs),
            ("slab_budget_wait_secs", self.slab_budget_wait_secs),
            ("transaction_ttl_secs", self.transaction_ttl_secs),
        ] {
            if !(0.0..1e7).contains(&secs) {
                return Err(format!("invalid {name} {secs}: expected seconds >= 0"));
            }
        }
        if let Some(url) = &self.public_url {
            let parsed = url::Url::parse(url).map_err(|e| format!("invalid public_url '{url}': {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") || parsed.query().is_some() || parsed.host().is_none() {
                return Err(format!(
                    "invalid public_url '{url}': expected http(s)://host[:port][/prefix] without a query"
                ));
            }
        }
        if self.wms_max_size == 0 {
            return Err("invalid wms_max_size 0: expected at least 1".into());
        }
        if self.edr_max_polygon_vertices < 3 {
            return Err(format!(
                "invalid edr_max_polygon_vertices {}: expected at least 3",
                self.edr_max_polygon_vertices
            ));
        }
        for (name, n) in [
            ("store_max_concurrent_requests", self.store_max_concurrent_requests),
            ("read_concurrency", self.read_concurrency),
            ("max_concurrent_reads", self.max_concurrent_reads),
        ] {
            if n == 0 {
                return Err(format!("invalid {name} 0: expected at least 1"));
            }
        }
        for (name, n) in [
            ("slab_bytes", self.slab_bytes),
            ("tile_read_limit_bytes", self.tile_read_limit_bytes),
            ("slab_budget_bytes", self.slab_budget_bytes),
            ("stream_bytes_in_flight", self.stream_bytes_in_flight),
        ] {
            if n == 0 {
                return Err(format!("invalid {name} 0: expected at least 1"));
            }
        }
        self.rate_limits()?;
        TrustedProxies::parse(&self.trusted_proxies)?;
        Identity::new(self.identity_settings())?;
        for (name, dataset) in &self.datasets {
            dataset.grants(name)?;
            dataset.check_writable(name)?;
        }
        for name in self.datasets.keys() {
            if name.is_empty()
                || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                || name.starts_with('.')
            {
                return Err(format!(
                    "invalid dataset name '{name}': use letters, digits, '-', '_' and '.'"
                ));
            }
        }
        Ok(())
    }

    /// The parsed listen address.
    pub fn listen_addr(&self) -> Result<SocketAddr, String> {
        self.listen
            .parse()
            .map_err(|_| format!("invalid listen address '{}': expected ADDR:PORT", self.listen))
    }

    /// Store limits and options for `dataset`; local files are read into `buffers`.
    pub fn store_options(&self, dataset: &DatasetConfig, buffers: Arc<BufferPool>) -> StoreOptions {
        StoreOptions {
            timeout: Duration::from_secs_f64(self.store_timeout_secs),
            retries: self.store_retries,
            max_concurrent_requests: self.store_max_concurrent_requests,
            coalesce_gap: self.coalesce_gap_bytes,
            backend: dataset.options.clone(),
            buffers,
            containers: dataset
                .virtual_chunk_containers
                .iter()
                .map(VirtualChunkContainer::to_store)
                .collect(),
            ref_ttl: Duration::from_secs_f64(self.metadata_ttl_secs),
        }
    }

    /// Who the credentials of requests are checked against.
    pub fn identity_settings(&self) -> IdentitySettings {
        IdentitySettings {
            oidc: self.auth.oidc.as_ref().map(|o| OidcSettings {
                issuer: o.issuer.clone(),
                audience: o.audience.clone(),
                groups_claim: o.groups_claim.clone(),
            }),
            api_keys: self
                .auth
                .api_keys
                .iter()
                .map(|(name, key)| (name.clone(), key.sha256.clone()))
                .collect(),
            dataset_tokens: self
                .datasets
                .iter()
                .filter_map(|(name, d)| Some((name.clone(), d.token.clone()?)))
                .collect(),
        }
    }

    /// The rate limits of `rate_limit_per_second` and `rate_limit_burst`, if set.
    pub fn rate_limits(&self) -> Result<Option<RateLimits>, String> {
        match (self.rate_limit_per_second, self.rate_limit_burst) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err("rate_limit_burst is set without rate_limit_per_second".into()),
            (Some(rate), burst) => RateLimits::new(rate, burst).map(Some),
        }
    }

    /// The sizes of every limit, pool and cache of the process.
    pub(crate) fn resource_options(&self) -> ResourceOptions {
        ResourceOptions {
            read: ReadOptions {
                slab_bytes: self.slab_bytes,
                concurrency: self.read_concurrency,
                ..ReadOptions::default()
            },
            caches: CacheOptions {
                metadata_ttl: Duration::from_secs_f64(self.metadata_ttl_secs),
                shard_index_bytes: self.shard_index_cache_bytes,
                decoded_chunk_bytes: self.decoded_chunk_cache_bytes,
            },
            max_concurrent_reads: self.max_concurrent_reads,
            read_slot_wait: Duration::from_secs_f64(self.read_slot_wait_secs),
            slab_budget_bytes: usize::try_from(self.slab_budget_bytes).unwrap_or(usize::MAX),
            slab_budget_wait: Duration::from_secs_f64(self.slab_budget_wait_secs),
            stream_bytes_in_flight: self.stream_bytes_in_flight,
            decode_threads: self.decode_threads,
            buffer_pool_bytes: usize::try_from(self.buffer_pool_bytes).unwrap_or(usize::MAX),
            check_buffer_reuse: false,
        }
    }
}

impl DatasetConfig {
    fn url(url: String) -> Self {
        Self {
            url,
            description: None,
            token: None,
            read: None,
            write: None,
            writable: false,
            options: BTreeMap::new(),
            virtual_chunk_containers: Vec::new(),
        }
    }

    /// Who may read and write the dataset `name`.
    pub fn grants(&self, name: &str) -> Result<Grants, String> {
        let parse = |list: &Option<Vec<String>>, which: &str| -> Result<Option<Vec<Grant>>, String> {
            list.as_ref()
                .map(|l| l.iter().map(|g| g.parse()).collect::<Result<Vec<Grant>, String>>())
                .transpose()
                .map_err(|e| format!("dataset '{name}' {which}: {e}"))
        };
        Ok(Grants::new(
            name,
            parse(&self.read, "read")?,
            parse(&self.write, "write")?,
            self.token.is_some(),
        ))
    }

    /// `writable = true` only where writes are taken (api.md 4.2): local
    /// directories, `s3://` and `az://`.
    fn check_writable(&self, name: &str) -> Result<(), String> {
        if !self.writable {
            return Ok(());
        }
        let url = self.url.as_str();
        let scheme = url::Url::parse(url)
            .ok()
            .map(|u| u.scheme().to_string())
            .filter(|s| s.len() > 1)
            .unwrap_or_else(|| "file".into());
        let refuse = |why: &str| Err(format!("dataset '{name}' is writable, but {why}"));
        match scheme.as_str() {
            "file" | "s3" | "s3a" | "az" | "azure" | "abfs" | "abfss" => Ok(()),
            "http" | "https" => refuse("http(s):// stores are never written"),
            s if s.starts_with("refs+") => refuse("kerchunk reference sets are never written"),
            // Written by the icechunk crate, through its own storage.
            "icechunk+file" | "icechunk+s3" | "icechunk+s3a" | "icechunk+gs" | "icechunk+gcs" | "icechunk+az"
            | "icechunk+azure" | "icechunk+abfs" | "icechunk+abfss" => Ok(()),
            s if s.starts_with("icechunk+") => refuse("Icechunk repositories over http(s) are never written"),
            "gs" => {
                refuse("writes to gs:// are not supported yet (a conditional put there needs the object's generation)")
            }
            other => refuse(&format!("'{other}' stores are not written")),
        }
    }

    fn local(path: &Path) -> Self {
        Self::url(path.to_string_lossy().into_owned())
    }
}

fn parse_dataset_spec(spec: &str, source: &str) -> Result<(String, String), String> {
    match spec.split_once('=') {
        Some((name, url)) if !name.is_empty() && !url.is_empty() => Ok((name.to_string(), url.to_string())),
        _ => Err(format!("invalid {source} '{spec}': expected NAME=URL")),
    }
}

/// `/data/ocean.zarr` -> `ocean`.
fn dataset_name_for(path: &Path) -> Result<String, String> {
    let last = path
        .components()
        .next_back()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .filter(|s| s != "/" && s != "." && s != "..")
        .ok_or_else(|| format!("invalid PATH '{}': cannot name a dataset after it", path.display()))?;
    Ok(last
        .strip_suffix(".zarr")
        .filter(|s| !s.is_empty())
        .unwrap_or(&last)
        .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(args: &[&str], env: &[(&str, &str)]) -> Result<Config, String> {
        let cli = Cli::try_parse_from(std::iter::once("zarr-serve").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Config::load(&cli, &env)
    }

    #[test]
    fn path_names_the_dataset_and_flags_override() {
        let c = load(
            &["/data/ocean.zarr", "--listen", "0.0.0.0:9000"],
            &[("ZARR_SERVE_MAX_RESPONSE_BYTES", "1000")],
        )
        .unwrap();
        assert_eq!(c.datasets.keys().collect::<Vec<_>>(), ["ocean"]);
        assert_eq!(c.listen, "0.0.0.0:9000");
        assert_eq!(c.max_response_bytes, 1000);
        let c = load(
            &["--dataset", "a=s3://b/p", "--dataset", "b=/x"],
            &[("ZARR_SERVE_DATASETS", "z=/z")],
        )
        .unwrap();
        assert_eq!(c.datasets.keys().collect::<Vec<_>>(), ["a", "b"]);
        let c = load(
            &[],
            &[
                ("ZARR_SERVE_DATASETS", "z=/z,y=/y"),
                ("ZARR_SERVE_CORS_ORIGINS", "[\"*\"]"),
            ],
        )
        .unwrap();
        assert_eq!(c.datasets.keys().collect::<Vec<_>>(), ["y", "z"]);
        assert_eq!(c.cors_origins, ["*"]);
    }

    #[test]
    fn invalid_values_are_named() {
        type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
        let cases: &[Case] = &[
            (&["--listen", "nowhere"], &[], "nowhere"),
            (&["--dataset", "novalue"], &[], "novalue"),
            (&[], &[("ZARR_SERVE_MAX_RESPONSE_BYTES", "lots")], "max_response_bytes"),
            (&[], &[("ZARR_SERVE_LOG_FORMAT", "xml")], "xml"),
            (&[], &[("ZARR_SERVE_NO_SUCH_KEY", "1")], "no_such_key"),
            (&[], &[("ZARR_SERVE_READ_CONCURRENCY", "0")], "read_concurrency"),
            (&["--config", "/no/such/file.toml"], &[], "/no/such/file.toml"),
            (&["--bogus"], &[], "--bogus"),
        ];
        for (args, env, needle) in cases {
            let err = load(args, env).unwrap_err();
            assert!(err.contains(needle), "{args:?} {env:?}: {err}");
        }
    }

    #[test]
    fn virtual_chunk_containers_take_prefixes_and_tables() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(
            &path,
            r#"
[datasets.era5]
url = "icechunk+s3://bucket/era5"
virtual_chunk_containers = [
  "s3://archive/netcdf/",
  {url_prefix = "https://data.example/files/", options = {timeout = "5s"}},
]
"#,
        )
        .unwrap();
        let c = Config::from_file(&path).unwrap();
        let options = c.store_options(&c.datasets["era5"], Arc::default());
        assert_eq!(
            options.containers,
            [
                VirtualContainer {
                    url_prefix: "s3://archive/netcdf/".into(),
                    options: None
                },
                VirtualContainer {
                    url_prefix: "https://data.example/files/".into(),
                    options: Some(BTreeMap::from([("timeout".into(), "5s".into())]))
                },
            ]
        );
        for bad in [
            r#"{prefix = "s3://a/"}"#,
            r#"{url_prefix = "s3://a/", option = {}}"#,
            "3",
        ] {
            let text = format!("[datasets.x]\nurl = \"/x\"\nvirtual_chunk_containers = [{bad}]\n");
            std::fs::write(&path, text).unwrap();
            assert!(Config::from_file(&path).is_err(), "{bad}");
        }
    }

    #[test]
    fn shipped_default_config_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DEFAULT_CONFIG);
        let c = Config::from_file(&path).unwrap();
        assert!(c.datasets.contains_key("sample"));
        c.validate().unwrap();
        // The memory budgets it states are the built-in ones (the load
        // test reads them from this file).
        let built_in = Config::default();
        let budgets = |c: &Config| {
            (
                c.shard_index_cache_bytes,
                c.decoded_chunk_cache_bytes,
                c.buffer_pool_bytes,
            )
        };
        assert_eq!(budgets(&c), budgets(&built_in));
        // Its paths name the shipped sample from any working directory.
        for dataset in c.datasets.values() {
            assert!(!dataset.url.contains(".."), "{}", dataset.url);
            let zarr_json = Path::new(&dataset.url).join("zarr.json");
            let zgroup = Path::new(&dataset.url).join(".zgroup");
            assert!(zarr_json.is_file() || zgroup.is_file(), "{}", dataset.url);
        }
    }

    #[test]
    fn relative_paths_in_a_config_file_are_from_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zs.toml");
        let text = "[datasets.a]\nurl = \"./x/../data/a.zarr\"\n[datasets.b]\nurl = \"/abs/b.zarr\"\n\
                    [datasets.c]\nurl = \"s3://bucket/c.zarr\"\n";
        std::fs::write(&path, text).unwrap();
        let c = load(&["--config", path.to_str().unwrap()], &[]).unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(Path::new(&c.datasets["a"].url), base.join("data/a.zarr"));
        assert_eq!(c.datasets["b"].url, "/abs/b.zarr");
        assert_eq!(c.datasets["c"].url, "s3://bucket/c.zarr");
        assert_eq!(c.file.as_deref(), Some(path.as_path()));
    }

    #[test]
    fn config_search_order() {
        let env = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let paths = search_paths(&env(&[("HOME", "/home/u"), ("XDG_CONFIG_HOME", "/xdg")]));
        let expected = [
            "config/default.toml",
            "/xdg/zarr-serve/config.toml",
            "/etc/zarr-serve/config.toml",
        ];
        assert_eq!(paths, expected.map(PathBuf::from));
        let paths = search_paths(&env(&[("HOME", "/home/u")]));
        assert_eq!(paths[1], PathBuf::from("/home/u/.config/zarr-serve/config.toml"));
        // ZARR_SERVE_CONFIG wins over every searched file.
        let c = load(&[], &[("ZARR_SERVE_CONFIG", "/no/such/zs.toml")]).unwrap_err();
        assert!(c.contains("/no/such/zs.toml"), "{c}");
    }

    #[test]
    fn writable_datasets_are_the_stores_the_service_can_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zs.toml");
        let cases = [
            ("/data/a.zarr", true),
            ("s3://bucket/a.zarr", true),
            ("icechunk+file:///data/repo", true),
            ("icechunk+s3://bucket/repo", true),
            ("icechunk+https://example.org/repo", false),
            ("refs+file:///data/refs.json", false),
            ("https://example.org/a.zarr", false),
            ("gs://bucket/a.zarr", false),
        ];
        for (url, starts) in cases {
            std::fs::write(&path, format!("[datasets.a]\nurl = \"{url}\"\nwritable = true\n")).unwrap();
            let loaded = load(&["--config", path.to_str().unwrap()], &[]);
            assert_eq!(loaded.is_ok(), starts, "{url}: {loaded:?}");
        }
    }
}
