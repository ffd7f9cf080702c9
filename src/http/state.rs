//! What every handler shares: the datasets, the process's resources and
//! the settings of the HTTP layer.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, HeaderValue};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::{dap2, dap4, ApiError};
use crate::config::Config;
use crate::engine::{Dataset, Resources, WriteOptions};
use crate::identity::{Caller, Grants, Identity, Permission, RateLimits, TrustedProxies};
use crate::metrics::Metrics;
use crate::storage::{Store, TransactionTimes, Version};

/// A dataset as the HTTP layer serves it.
#[derive(Debug)]
pub(crate) struct ServedDataset {
    /// The engine's dataset.
    pub dataset: Dataset,
    /// Who may read and write it.
    pub(super) grants: Grants,
    /// Whether it takes writes (`writable`).
    pub(super) writable: bool,
}

/// Shared state of all handlers.
#[derive(Debug)]
pub struct AppState {
    pub(super) datasets: BTreeMap<String, ServedDataset>,
    /// Resolves each request's credentials (once, in the middleware).
    pub(super) identity: Identity,
    /// Requests per caller, if limited.
    pub(super) rate_limits: Option<RateLimits>,
    /// Whose `X-Forwarded-For` names the client.
    pub(super) trusted_proxies: TrustedProxies,
    /// The process's limits, pools and caches (shared with every dataset).
    pub(super) resources: Arc<Resources>,
    pub(super) metrics: Arc<Metrics>,
    /// The length of each answer sent whole, by its ETag: a HEAD of one
    /// whose length depends on its values (JSON, a picture) states it
    /// without reading again.
    pub(super) answer_lengths: moka::sync::Cache<String, u64>,
    pub(super) max_response_bytes: u64,
    pub(super) tile_read_limit_bytes: u64,
    pub(super) wms_max_size: u32,
    pub(super) edr_max_polygon_vertices: u32,
    /// DAP2 datasets of groups, kept for `metadata_ttl`.
    pub(super) dap_models: dap2::Models,
    /// DAP4 datasets of groups, kept for `metadata_ttl`.
    pub(super) dap4_models: dap4::Models,
    pub(super) compress_max_bytes: u64,
    pub(super) request_timeout: Duration,
    pub(super) cors_origins: Vec<String>,
    /// `Cache-Control` of cacheable responses.
    pub(super) cache_control: HeaderValue,
    /// Bearer token `/metrics` requires, if any.
    pub(super) metrics_token: Option<String>,
    /// `public_url` without a trailing slash, if set.
    pub(super) public_url: Option<String>,
    /// How large write bodies may be, and where large ones are spooled.
    pub(super) uploads: super::upload::Limits,
    /// How writes retry and how many objects they write at once.
    pub(super) write_options: WriteOptions,
    /// How long Icechunk transactions live, and one request may hold one.
    pub(super) transaction_times: TransactionTimes,
}

impl AppState {
    /// Build the state from a validated config: opens every dataset's store
    /// (without contacting it: readiness checks that).
    pub fn from_config(config: &Config) -> Result<Arc<Self>, String> {
        let resources = Arc::new(Resources::new(&config.resource_options()));
        let mut datasets = BTreeMap::new();
        for (name, ds) in &config.datasets {
            let options = config.store_options(ds, resources.buffers());
            let store = Store::open(&ds.url, &options).map_err(|e| format!("dataset '{name}': {e}"))?;
            let dataset = Dataset::new(name, ds.description.clone(), store, resources.clone());
            datasets.insert(
                name.clone(),
                ServedDataset {
                    dataset,
                    grants: ds.grants(name)?,
                    writable: ds.writable,
                },
            );
        }
        Ok(Arc::new(Self {
            datasets,
            identity: Identity::new(config.identity_settings())?,
            rate_limits: config.rate_limits()?,
            trusted_proxies: TrustedProxies::parse(&config.trusted_proxies)?,
            resources,
            metrics: Arc::default(),
            max_response_bytes: config.max_response_bytes,
            tile_read_limit_bytes: config.tile_read_limit_bytes,
            wms_max_size: config.wms_max_size,
            edr_max_polygon_vertices: config.edr_max_polygon_vertices,
            answer_lengths: moka::sync::Cache::new(100_000),
            dap_models: moka::future::Cache::builder()
                .max_capacity(1_000)
                .time_to_live(Duration::from_secs_f64(config.metadata_ttl_secs.max(1.0)))
                .build(),
            dap4_models: moka::future::Cache::builder()
                .max_capacity(1_000)
                .time_to_live(Duration::from_secs_f64(config.metadata_ttl_secs.max(1.0)))
                .build(),
            compress_max_bytes: config.compress_max_bytes,
            request_timeout: Duration::from_secs_f64(config.request_timeout_secs),
            cors_origins: config.cors_origins.clone(),
            cache_control: HeaderValue::from_str(&format!("max-age={}", config.cache_max_age_secs))
                .expect("a number is a valid header value"),
            metrics_token: config.metrics_token.clone(),
            public_url: config
                .public_url
                .as_deref()
                .map(|u| u.trim_end_matches('/').to_string()),
            uploads: super::upload::Limits {
                max: config.max_request_bytes,
                in_memory: config.slab_bytes,
                spool_dir: config.write_spool_dir.clone().unwrap_or_else(std::env::temp_dir),
            },
            write_options: WriteOptions {
                retries: config.write_retries,
                concurrency: config.read_concurrency,
                max_row_bytes: config.max_request_bytes,
                expected: None,
            },
            transaction_times: {
                let request = Duration::from_secs_f64(config.request_timeout_secs);
                TransactionTimes {
                    ttl: Duration::from_secs_f64(config.transaction_ttl_secs),
                    // A request holds a transaction at most for its own
                    // time (a stopped one lets go at once; a process that
                    // died, when this runs out) ...
                    lease: request + request.min(Duration::from_secs(30)),
                    // ... and waits for another's hold at most half of it.
                    wait: request / 2,
                }
            },
        }))
    }

    /// The dataset a URL names (`name`, or `name@ref` for a version of an
    /// Icechunk repository), if `caller` may read it.
    /// A dataset without versions is the configured one, not a copy.
    pub(super) async fn dataset<'a>(
        &'a self,
        addressed: &'a str,
        caller: &Caller,
    ) -> Result<Cow<'a, Dataset>, ApiError> {
        let (configured, version) = self.configured(addressed, caller, Permission::Read)?;
        if version.is_none() && !configured.store().is_versioned() {
            return Ok(Cow::Borrowed(configured));
        }
        Ok(Cow::Owned(configured.at(version).await?))
    }

    /// The configured dataset a URL names, and the version it asks for,
    /// if `caller` holds `permission` on it.
    pub(super) fn configured<'a>(
        &'a self,
        addressed: &'a str,
        caller: &Caller,
        permission: Permission,
    ) -> Result<(&'a Dataset, Option<&'a str>), ApiError> {
        let (name, version) = split_version(addressed);
        let served = self.served(name)?;
        served.grants.check(caller, permission)?;
        Ok((&served.dataset, version))
    }

    /// The dataset configured as `name`: 404 when there is none.
    fn served(&self, name: &str) -> Result<&ServedDataset, ApiError> {
        self.datasets
            .get(name)
            .ok_or_else(|| ApiError::NotFound(format!("no dataset named '{name}'")))
    }

    /// The dataset a write by `caller` goes to: 404 when there is none,
    /// 405 (whatever the credentials) when it takes no writes, then 401 or
    /// 403 without its `write` grant. An Icechunk repository is written on
    /// a branch (`name@branch.NAME`; `name` alone: `main`), through a
    /// session of its own that [`Dataset::commit`] commits, or in
    /// `transaction` (`?transaction=ID`, or `name@transaction.ID`), whose
    /// session [`Dataset::save_transaction`] keeps; its tags and snapshots
    /// never change (405), nor does any `@ref` of another dataset.
    pub(super) async fn writable(
        &self,
        addressed: &str,
        caller: &Caller,
        allow: &'static str,
        transaction: Option<&str>,
    ) -> Result<Dataset, ApiError> {
        self.write_target(addressed, caller, allow, transaction, Hold::Lease)
            .await
    }

    /// Transaction `transaction` of `addressed`, its lease taken now (the
    /// write's body is in); `None` without one, when the write goes to the
    /// dataset [`Hold::View`] gave.
    pub(super) async fn held(
        &self,
        addressed: &str,
        caller: &Caller,
        allow: &'static str,
        transaction: Option<&str>,
    ) -> Result<Option<Dataset>, ApiError> {
        match transaction {
            None => Ok(None),
            Some(id) => self.writable(addressed, caller, allow, Some(id)).await.map(Some),
        }
    }

    /// [`AppState::writable`], a transaction held or only seen as `hold`
    /// says: a write whose body is still to come is checked against
    /// [`Hold::View`] (its region planned, its parameters checked), so that
    /// a slow upload holds no transaction, then takes the lease once the
    /// body is in.
    pub(super) async fn write_target(
        &self,
        addressed: &str,
        caller: &Caller,
        allow: &'static str,
        transaction: Option<&str>,
        hold: Hold,
    ) -> Result<Dataset, ApiError> {
        let (name, version) = split_version(addressed);
        let dataset = self.write_allowed(name, caller, allow)?;
        // A version of a dataset is read, never written.
        let not_allowed = |why: String| ApiError::NotAllowed(why, allow);
        if !dataset.store().is_versioned() {
            return match (version, transaction) {
                (None, None) => Ok(dataset.clone()),
                (Some(_), _) => Err(not_allowed(format!(
                    "'{addressed}' names a version; writes go to the dataset itself"
                ))),
                (None, Some(_)) => Err(ApiError::BadRequest(format!(
                    "dataset '{name}' is not an Icechunk repository: it has no transactions"
                ))),
            };
        }
        let branch = match version.map(Version::parse) {
            None => None,
            Some(Ok(Version::Branch(branch))) => Some(branch),
            Some(Ok(Version::Transaction(id))) if transaction.is_none_or(|t| t == id) => {
                return self.in_transaction(dataset, &id, hold).await
            }
            Some(Ok(Version::Transaction(_))) => {
                return Err(ApiError::BadRequest(format!(
                    "'{addressed}' and ?transaction= name two transactions"
                )))
            }
            Some(Ok(_)) => {
                return Err(not_allowed(format!(
                    "'{addressed}' is a tag or a snapshot, which never changes; writes go to a branch ('{name}@branch.NAME', or '{name}' for main)"
                )))
            }
            Some(Err(why)) => return Err(ApiError::BadRequest(why)),
        };
        let Some(id) = transaction else {
            return Ok(dataset.on_branch(branch.as_deref().unwrap_or("main")).await?);
        };
        let written = self.in_transaction(dataset, id, hold).await?;
        match (&branch, written.branch()) {
            (Some(named), Some(its)) if named != its => Err(ApiError::BadRequest(format!(
                "transaction '{id}' is on branch '{its}', not '{named}'; nothing was written"
            ))),
            _ => Ok(written),
        }
    }

    /// Transaction `id` of `dataset`, held or seen as `hold` says.
    async fn in_transaction(&self, dataset: &Dataset, id: &str, hold: Hold) -> Result<Dataset, ApiError> {
        Ok(match hold {
            Hold::Lease => dataset.in_transaction(id, self.transaction_times).await?,
            Hold::View => dataset.transaction_view(id).await?,
        })
    }

    /// How often a commit is rebased onto a branch that moved before 409.
    pub(super) fn commit_attempts(&self) -> u16 {
        u16::try_from(self.write_options.retries).unwrap_or(u16::MAX)
    }

    /// The configured dataset `name` (without `@ref`), when `caller` may
    /// change it: 404 when there is none, 405 (whatever the credentials)
    /// when it takes no writes, then 401 or 403 without its `write` grant.
    pub(super) fn write_allowed(&self, name: &str, caller: &Caller, allow: &'static str) -> Result<&Dataset, ApiError> {
        let (name, _) = split_version(name);
        let served = self.served(name)?;
        if !served.writable {
            return Err(ApiError::ReadOnly(name.to_string(), allow));
        }
        served.grants.check(caller, Permission::Write)?;
        Ok(&served.dataset)
    }

    /// Whether anyone, anonymous included, may read dataset `name` (an
    /// unknown name: yes, its answer is the same 404 for everyone).
    pub(super) fn is_public(&self, name: &str) -> bool {
        self.datasets
            .get(name)
            .is_none_or(|d| d.grants.check(&Caller::Anonymous, Permission::Read).is_ok())
    }

    /// Whether every dataset is open to anyone (listings are then the same
    /// for every caller).
    pub(super) fn all_public(&self) -> bool {
        self.datasets.keys().all(|name| self.is_public(name))
    }

    /// The datasets `caller` may read (a credential that fails sees what
    /// an anonymous request sees).
    pub(super) fn readable_datasets<'a>(&'a self, caller: &'a Caller) -> impl Iterator<Item = &'a Dataset> + 'a {
        self.datasets
            .values()
            .filter(|d| d.grants.check(caller, Permission::Read).is_ok())
            .map(|d| &d.dataset)
    }
}

/// 401 without a bearer token, 403 with a wrong one, when `token` is set
/// (`/metrics`).
pub(super) fn check_token(token: Option<&str>, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = token else {
        return Ok(());
    };
    let given = super::caller::bearer(headers).ok_or(ApiError::Unauthorized)?;
    use subtle::ConstantTimeEq;
    if bool::from(given.trim().as_bytes().ct_eq(token.as_bytes())) {
        Ok(())
    } else {
        Err(ApiError::Forbidden)
    }
}

/// What a path segment keeps unescaped in a URL (RFC 3986 unreserved).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// A slash-separated path with each segment percent-encoded.
pub(crate) fn url_path(path: &str) -> String {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(url_segment)
        .collect::<Vec<_>>()
        .join("/")
}

/// One path segment percent-encoded (a `/` in it too).
pub(crate) fn url_segment(segment: &str) -> String {
    utf8_percent_encode(segment, SEGMENT).to_string()
}

/// The URL of `path` on this server: under `public_url` when it is set,
/// else as the request reached it (its `Host`, which must look like a host
/// name: anything else gives a relative link, never markup from a header).
pub(crate) fn absolute(state: &AppState, headers: &HeaderMap, path: &str) -> String {
    format!("{}{path}", origin(state, headers))
}

/// The scheme, host and prefix links start with: `public_url`, else the
/// request's `Host` and `X-Forwarded-Proto`, else nothing.
pub(crate) fn origin(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(url) = &state.public_url {
        return url.clone();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]_".contains(&b)));
    let proto = headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .filter(|p| *p == "https")
        .unwrap_or("http");
    match host {
        Some(host) => format!("{proto}://{host}"),
        None => String::new(),
    }
}

/// `name@ref` as the dataset's name and the version named (`None`: none).
fn split_version(addressed: &str) -> (&str, Option<&str>) {
    match addressed.split_once('@') {
        Some((name, version)) => (name, Some(version)),
        None => (addressed, None),
    }
}

/// Whether a write takes its transaction's lease or only sees the
/// transaction, as a read of `@transaction.ID` does.
#[derive(Debug, Clone, Copy)]
pub(super) enum Hold {
    Lease,
    View,
}
