//! The HTTP layer: routes, content negotiation, headers, errors. It knows
//! the engine's API (datasets, nodes, read plans) but nothing of codecs.

mod conditional;
mod dap2;
mod data;
mod edr;
mod encoders;
mod explorer;
mod format;
mod nodes;
mod ops;
mod passthrough;
mod problem;
mod query;
mod respond;
mod stall;
mod tiles;
mod view;
mod wms;

/// The fuzz properties of the protocols' parsers ([`crate::fuzz_checks`]).
pub(crate) use dap2::check_projection;
pub(crate) use edr::check_wkt;
pub(crate) use wms::check_frame;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::compression::predicate::{NotForContentType, Predicate, SizeAbove};
use tower_http::compression::{CompressionLayer, CompressionLevel};
use tower_http::cors::{AllowOrigin, CorsLayer};

pub use problem::ApiError;

use crate::config::Config;
use crate::engine::{Dataset, Resources};
use crate::metrics::Metrics;
use crate::storage::Store;

/// A dataset as the HTTP layer serves it.
#[derive(Debug)]
pub(crate) struct ServedDataset {
    /// The engine's dataset.
    pub dataset: Dataset,
    /// Bearer token required, if any (compared in constant time).
    token: Option<String>,
}

/// Shared state of all handlers.
#[derive(Debug)]
pub struct AppState {
    datasets: BTreeMap<String, ServedDataset>,
    /// The process's limits, pools and caches (shared with every dataset).
    resources: Arc<Resources>,
    metrics: Arc<Metrics>,
    /// The length of each answer sent whole, by its ETag: a HEAD of one
    /// whose length depends on its values (JSON, a picture) states it
    /// without reading again.
    answer_lengths: moka::sync::Cache<String, u64>,
    max_response_bytes: u64,
    tile_read_limit_bytes: u64,
    wms_max_size: u32,
    edr_max_polygon_vertices: u32,
    /// DAP2 datasets of groups, kept for `metadata_ttl`.
    dap_models: dap2::Models,
    compress_max_bytes: u64,
    request_timeout: Duration,
    cors_origins: Vec<String>,
    /// `Cache-Control` of cacheable responses.
    cache_control: HeaderValue,
    /// Bearer token `/metrics` requires, if any.
    metrics_token: Option<String>,
    /// `public_url` without a trailing slash, if set.
    public_url: Option<String>,
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
                    token: ds.token.clone(),
                },
            );
        }
        Ok(Arc::new(Self {
            datasets,
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
        }))
    }

    /// The dataset a URL names (`name`, or `name@ref` for a version of an
    /// Icechunk repository), if the request may read it.
    /// A dataset without versions is the configured one, not a copy.
    async fn dataset<'a>(&'a self, addressed: &'a str, headers: &HeaderMap) -> Result<Cow<'a, Dataset>, ApiError> {
        let (configured, version) = self.configured(addressed, headers)?;
        if version.is_none() && !configured.store().is_versioned() {
            return Ok(Cow::Borrowed(configured));
        }
        Ok(Cow::Owned(configured.at(version).await?))
    }

    /// The configured dataset a URL names, and the version it asks for.
    fn configured<'a>(
        &'a self,
        addressed: &'a str,
        headers: &HeaderMap,
    ) -> Result<(&'a Dataset, Option<&'a str>), ApiError> {
        let (name, version) = match addressed.split_once('@') {
            Some((name, version)) => (name, Some(version)),
            None => (addressed, None),
        };
        let served = self
            .datasets
            .get(name)
            .ok_or_else(|| ApiError::NotFound(format!("no dataset named '{name}'")))?;
        check_token(served.token.as_deref(), headers)?;
        Ok((&served.dataset, version))
    }

    /// The datasets this request may read (an unknown token sees what an
    /// anonymous request sees).
    fn readable_datasets<'a>(&'a self, headers: &'a HeaderMap) -> impl Iterator<Item = &'a Dataset> + 'a {
        self.datasets
            .values()
            .filter(|d| check_token(d.token.as_deref(), headers).is_ok())
            .map(|d| &d.dataset)
    }
}

/// 401 without a bearer token, 403 with a wrong one, when `token` is set.
fn check_token(token: Option<&str>, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = token else {
        return Ok(());
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .ok_or(ApiError::Unauthorized)?;
    use subtle::ConstantTimeEq;
    if bool::from(given.trim().as_bytes().ct_eq(token.as_bytes())) {
        Ok(())
    } else {
        Err(ApiError::Forbidden)
    }
}

/// The application: every route of the v1 contract with its middleware.
pub fn app(state: Arc<AppState>) -> Router {
    with_middleware(routes(), state)
}

/// The routes of the v1 contract. Data, node and listing responses compress
/// on request; passthrough values are served as stored (ranges and lengths
/// stay exact).
pub fn routes() -> Router<Arc<AppState>> {
    let documents = Router::new()
        .route("/v1/datasets", get(nodes::list_datasets))
        .route("/v1/datasets/{ds}/nodes", get(nodes::root_node))
        .route("/v1/datasets/{ds}/nodes/", get(nodes::root_node))
        .route("/v1/datasets/{ds}/nodes/{*path}", get(nodes::node))
        .route("/v1/datasets/{ds}/refs", get(nodes::refs))
        .route_layer(middleware::from_fn(no_query_parameters));
    let data = Router::new()
        .route(
            "/v1/datasets/{ds}/data",
            get(data::read_root).head(data::read_root).post(data::read_root),
        )
        .route(
            "/v1/datasets/{ds}/data/",
            get(data::read_root).head(data::read_root).post(data::read_root),
        )
        .route(
            "/v1/datasets/{ds}/data/{*path}",
            get(data::read).head(data::read).post(data::read),
        )
        .route_layer(middleware::from_fn(read_slot));
    let compressed = documents.merge(data).layer(compression());
    let keys = Router::new()
        .route(
            "/v1/datasets/{ds}/zarr/{*key}",
            get(passthrough::get).head(passthrough::get),
        )
        .route("/v1/datasets/{ds}/v2/{*key}", get(view::v2_get).head(view::v2_get))
        .route_layer(middleware::from_fn(read_slot));
    let stores = Router::new()
        .route("/v1/datasets/{ds}/zarr/", get(view::zarr_root).head(view::zarr_root))
        .route("/v1/datasets/{ds}/v2", get(view::v2_root).head(view::v2_root))
        .route("/v1/datasets/{ds}/v2/", get(view::v2_root).head(view::v2_root))
        .merge(keys)
        .route_layer(middleware::from_fn(no_query_parameters));
    let plain = stores
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/openapi.yaml", get(ops::openapi));
    compressed
        .merge(plain)
        .merge(explorer::routes())
        .merge(tiles::routes())
        .merge(wms::routes())
        .merge(dap2::routes())
        .merge(edr::routes())
}

/// A response body of what a streaming task sends on `rx`; an error
/// ends the connection short.
pub(crate) fn channel_body(
    mut rx: tokio::sync::mpsc::Receiver<Result<bytes::Bytes, std::io::Error>>,
) -> axum::body::Body {
    axum::body::Body::from_stream(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)))
}

/// The route layer of every route that reads array data (api.md 4.1, 2):
/// one of `max_concurrent_reads` read slots, taken before the handler runs
/// (503 with `Retry-After` after `read_slot_wait_secs`) and held until the
/// response body has been sent or dropped, so a streamed answer holds it
/// for as long as it streams. Handlers take no slot of their own.
pub(crate) async fn read_slot(request: Request, next: Next) -> Response {
    admit(request, next, |e| ApiError::Engine(e).into_response()).await
}

/// [`read_slot`] with the protocol's own error body for a 503 (`refused`):
/// WMS exception reports, DAP2 `Error` bodies.
pub(crate) async fn admit(
    request: Request,
    next: Next,
    refused: impl FnOnce(crate::engine::Error) -> Response,
) -> Response {
    use axum::extract::FromRequestParts as _;
    use http_body_util::BodyExt as _;
    let state = request
        .extensions()
        .get::<Arc<AppState>>()
        .cloned()
        .expect("every request carries the state");
    let (mut parts, body) = request.into_parts();
    // A request for an unknown dataset, or one it may not read, is
    // answered by its handler without a slot.
    let allowed = match axum::extract::RawPathParams::from_request_parts(&mut parts, &()).await {
        Ok(params) => params
            .iter()
            .find(|(name, _)| *name == "ds")
            .is_none_or(|(_, ds)| state.configured(ds, &parts.headers).is_ok()),
        Err(_) => true,
    };
    // A body (a POST's points) is received whole first: a slow sender
    // holds no slot.
    let body = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => axum::body::Body::from(bytes),
        Err(_) => {
            let detail = format!("the request body is larger than {MAX_BODY_BYTES} bytes, or was cut short");
            return ApiError::Rejected(axum::http::StatusCode::PAYLOAD_TOO_LARGE, detail).into_response();
        }
    };
    let route = parts
        .extensions
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_string();
    let request = Request::from_parts(parts, body);
    if !allowed {
        return next.run(request).await;
    }
    let slot = match state.resources.admit_read().await {
        Ok(slot) => slot,
        Err(e) => {
            state
                .metrics
                .overloaded
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return refused(e);
        }
    };
    let in_flight = state.metrics.read_started(&route);
    let response = next.run(request).await;
    response.map(|body| {
        axum::body::Body::new(body.map_frame(move |frame| {
            let _held = (&slot, &in_flight);
            frame
        }))
    })
}

/// What a blocking task writes (text, a file), sent as a body in pieces
/// of about [`ChannelWriter::PIECE`] bytes as it goes: the answer is never
/// whole in memory. A write fails (broken pipe) once the client is gone,
/// which stops the task.
pub(crate) struct ChannelWriter {
    tx: tokio::sync::mpsc::Sender<Result<bytes::Bytes, std::io::Error>>,
    piece: Vec<u8>,
}

impl ChannelWriter {
    /// Bytes sent at a time.
    pub(crate) const PIECE: usize = 1 << 20;

    /// A writer, and the body that sends what it writes (two pieces queued
    /// at most).
    pub(crate) fn new() -> (Self, axum::body::Body) {
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let writer = Self {
            tx,
            piece: Vec::with_capacity(Self::PIECE),
        };
        (writer, channel_body(rx))
    }

    /// Send what is left, or end the body short with `failed`.
    pub(crate) fn finish(mut self, failed: std::io::Result<()>) {
        let last = failed.and_then(|()| std::io::Write::flush(&mut self));
        if let Err(e) = last {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                tracing::warn!(error = %e, "a streamed answer failed part way");
                let _ = self.tx.blocking_send(Err(e));
            }
        }
    }
}

impl std::io::Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.piece.extend_from_slice(data);
        if self.piece.len() >= Self::PIECE {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.piece.is_empty() {
            return Ok(());
        }
        let piece = std::mem::replace(&mut self.piece, Vec::with_capacity(Self::PIECE));
        self.tx
            .blocking_send(Ok(bytes::Bytes::from(piece)))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

/// The largest POST body of a region read.
const MAX_BODY_BYTES: usize = 1 << 20;

/// 400 naming the first query parameter of a `/v1/` route that takes none
/// (a typo must never silently change an answer).
async fn no_query_parameters(request: Request, next: Next) -> Response {
    let first = request
        .uri()
        .query()
        .and_then(|q| url::form_urlencoded::parse(q.as_bytes()).next())
        .map(|(name, _)| name.into_owned());
    match first {
        Some(name) => query::unknown_parameter(&name, &[]).into_response(),
        None => next.run(request).await,
    }
}

/// The middleware every route runs under: problem+json fallbacks, request
/// timeout, metrics and access log, CORS, and panics answered 500.
///
/// A router's own layers wrap each route and are cloned with it on every
/// request, so the router has one layer (which needs the matched route) and
/// the others wrap the router from outside.
pub fn with_middleware(routes: Router<Arc<AppState>>, state: Arc<AppState>) -> Router {
    let routed = routes
        .fallback(|| async { ApiError::NotFound("no such route; see /openapi.yaml".into()) })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(middleware::from_fn_with_state(state.clone(), every_request))
        .with_state(state.clone());
    let outside = tower::ServiceBuilder::new()
        .layer(CatchPanicLayer::custom(|_| ApiError::Internal.into_response()))
        // No origins configured: no CORS headers at all.
        .option_layer((!state.cors_origins.is_empty()).then(|| cors(&state.cors_origins)))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .service(routed);
    Router::new().fallback_service(outside)
}

/// Content codings that compression may add; each gets its own ETag.
const CODINGS: [&str; 3] = ["gzip", "zstd", "br"];

/// A compressed response is another representation: suffix its strong
/// ETag with the coding (`"abc-gzip"`), as RFC 9110 requires.
fn etag_per_coding(mut response: Response) -> Response {
    let coding = response
        .headers()
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let etag = response
        .headers()
        .get(header::ETAG)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if let (Some(coding), Some(etag)) = (coding, etag) {
        let tagged = format!("{}-{coding}\"", etag.trim_end_matches('"'));
        if let Ok(value) = HeaderValue::from_str(&tagged) {
            response.headers_mut().insert(header::ETAG, value);
        }
    }
    response
}

/// The ETag a client sent, without a coding suffix added by [`etag_per_coding`].
pub(crate) fn strip_coding(etag: &str) -> &str {
    let inner = etag.trim().trim_start_matches("W/").trim_matches('"');
    CODINGS
        .iter()
        .find_map(|c| inner.strip_suffix(&format!("-{c}")))
        .unwrap_or(inner)
}

/// Marks a response that compression must leave as it is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Uncompressed;

/// Compress on `Accept-Encoding` at the fastest level, but never partial
/// content, responses marked [`Uncompressed`], gRPC, event streams or
/// images other than PNG (our RGBA PNGs are stored uncompressed inside: see
/// `format::png_picture`).
fn compression() -> CompressionLayer<impl Predicate> {
    let eligible = |status: axum::http::StatusCode,
                    _: axum::http::Version,
                    headers: &HeaderMap,
                    extensions: &axum::http::Extensions| {
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let image = content_type.starts_with("image/") && content_type != "image/png";
        status != axum::http::StatusCode::PARTIAL_CONTENT
            && !image
            && !headers.contains_key(header::CONTENT_RANGE)
            && extensions.get::<Uncompressed>().is_none()
    };
    let predicate = SizeAbove::new(32)
        .and(NotForContentType::GRPC)
        .and(NotForContentType::SSE)
        .and(eligible);
    CompressionLayer::new()
        .gzip(true)
        .zstd(true)
        .br(true)
        .quality(CompressionLevel::Fastest)
        .compress_when(predicate)
}

fn cors(origins: &[String]) -> CorsLayer {
    let expose = [
        header::ETAG,
        header::CONTENT_LENGTH,
        header::CONTENT_RANGE,
        header::ACCEPT_RANGES,
        header::LAST_MODIFIED,
        header::HeaderName::from_static("zarr-shape"),
        header::HeaderName::from_static("zarr-data-type"),
    ];
    let base = CorsLayer::new()
        .allow_methods([Method::GET, Method::HEAD, Method::OPTIONS])
        .allow_headers([
            header::RANGE,
            header::IF_NONE_MATCH,
            header::ACCEPT,
            header::AUTHORIZATION,
            header::ACCEPT_ENCODING,
        ])
        .expose_headers(expose);
    if origins.iter().any(|o| o == "*") {
        base.allow_origin(AllowOrigin::any())
    } else {
        let list: Vec<HeaderValue> = origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()).collect();
        base.allow_origin(AllowOrigin::list(list))
    }
}

/// Routes whose successful answers may be cached for `cache_max_age_secs`.
const CACHEABLE_PREFIX: &str = "/v1/datasets";

/// How long a successful answer may be cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caching {
    /// Not said.
    Unsaid,
    /// `cache_max_age_secs`
    MaxAge,
    /// For good: the answer reads a tag or a snapshot, which never change.
    Immutable,
}

/// The caching of a request path: a dataset route is cached for
/// `max-age`, or for good when it names a tag or a snapshot (`ds@tag.v1`),
/// but the ref listing, which changes with every commit, never is; an
/// explorer page only when it names a tag or a snapshot.
fn caching(path: &str) -> Caching {
    let (rest, otherwise) = match (path.strip_prefix(CACHEABLE_PREFIX), path.strip_prefix("/explore/")) {
        (Some(rest), _) => (rest, Caching::MaxAge),
        (None, Some(rest)) => (rest, Caching::Unsaid),
        (None, None) => return Caching::Unsaid,
    };
    let mut segments = rest.trim_start_matches('/').split('/');
    let dataset = percent_encoding::percent_decode_str(segments.next().unwrap_or_default()).decode_utf8_lossy();
    let immutable = dataset
        .split_once('@')
        .and_then(|(_, v)| crate::storage::Version::parse(v).ok())
        .is_some_and(|v| v.is_immutable());
    if immutable && segments.next() != Some("refs") {
        Caching::Immutable
    } else {
        otherwise
    }
}

/// `Cache-Control` on successful and 304 answers of the dataset routes
/// (data, nodes, listings, passthrough, the v2 view, the protocols).
fn cache_control(state: &AppState, caching: Caching, mut response: Response) -> Response {
    let status = response.status();
    if caching != Caching::Unsaid && (status.is_success() || status == axum::http::StatusCode::NOT_MODIFIED) {
        let value = match caching {
            Caching::Immutable => HeaderValue::from_static("public, max-age=31536000, immutable"),
            _ => state.cache_control.clone(),
        };
        response.headers_mut().entry(header::CACHE_CONTROL).or_insert(value);
    }
    response
}

/// Marks an error answered in a protocol's own form (a WMS exception
/// report), which is not made problem+json.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProtocolError;

/// Rejections raised before a handler runs (a path that is not valid UTF-8
/// once percent-decoded, a malformed extractor input) become problem+json
/// like every other error, keeping their status and message.
async fn problem_for_rejections(response: Response) -> Response {
    let status = response.status();
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"))
        || response.extensions().get::<ProtocolError>().is_some();
    if !(status.is_client_error() || status.is_server_error()) || is_problem {
        return response;
    }
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, 64 << 10).await.unwrap_or_default();
    let detail = String::from_utf8_lossy(&bytes).trim().to_string();
    let mut problem = ApiError::Rejected(status, detail).into_response();
    for name in [header::WWW_AUTHENTICATE, header::RETRY_AFTER, header::ALLOW] {
        if let Some(v) = parts.headers.get(&name) {
            problem.headers_mut().insert(name, v.clone());
        }
    }
    problem
}

/// Longest request target (path and query) accepted.
const MAX_TARGET_BYTES: usize = 8 << 10;
/// Largest header section accepted.
const MAX_HEADER_BYTES: usize = 32 << 10;

/// Refuse oversized request targets (414), header sections (431) and paths
/// that are not UTF-8 once percent-decoded (400) before any handler runs.
fn size_limits(request: &Request) -> Result<(), ApiError> {
    let target = request.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if target > MAX_TARGET_BYTES {
        return Err(ApiError::UriTooLong(target, MAX_TARGET_BYTES));
    }
    let path = request.uri().path();
    if percent_encoding::percent_decode_str(path).decode_utf8().is_err() {
        let detail = format!("the request path '{path}' is not valid UTF-8 once percent-decoded");
        return Err(ApiError::BadRequest(detail));
    }
    let headers: usize = request
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if headers > MAX_HEADER_BYTES {
        return Err(ApiError::HeadersTooLarge(headers, MAX_HEADER_BYTES));
    }
    Ok(())
}

/// The middleware of every route, in one layer (each layer of a router is
/// cloned on every request): the request timeout, metrics and the access
/// log around the size limits, the handler, `Cache-Control`, the ETag of a
/// compressed representation and problem+json for rejections.
async fn every_request(State(state): State<Arc<AppState>>, mut request: Request, next: Next) -> Response {
    // For the route layers that need it ([`read_slot`]).
    request.extensions_mut().insert(state.clone());
    let caching = caching(request.uri().path());
    let line = request_line(&request);
    let answer = async {
        let response = match size_limits(&request) {
            Ok(()) => next.run(request).await,
            Err(rejection) => rejection.into_response(),
        };
        problem_for_rejections(etag_per_coding(cache_control(&state, caching, response))).await
    };
    timeout_and_record(&state, line, answer).await
}

/// What the access log and the metrics say of a request (clones that
/// share the request's own buffers).
struct RequestLine {
    route: Option<MatchedPath>,
    method: Method,
    uri: axum::http::Uri,
}

fn request_line(request: &Request) -> RequestLine {
    RequestLine {
        route: request.extensions().get::<MatchedPath>().cloned(),
        method: request.method().clone(),
        uri: request.uri().clone(),
    }
}

/// The request timeout, metrics and one log line per request.
async fn timeout_and_record(
    state: &AppState,
    line: RequestLine,
    answer: impl std::future::Future<Output = Response>,
) -> Response {
    let started = Instant::now();
    let response = match tokio::time::timeout(state.request_timeout, answer).await {
        Ok(response) => response,
        Err(_) => ApiError::Timeout(state.request_timeout.as_secs_f64()).into_response(),
    };
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    let route = line.route.as_ref().map_or("unmatched", MatchedPath::as_str);
    state.metrics.record(route, status, elapsed);
    let bytes = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-");
    tracing::info!(
        target: "zarr_serve::access",
        method = %line.method, path = %line.uri.path(), status, latency_ms = elapsed.as_secs_f64() * 1000.0, bytes = %bytes, "request"
    );
    response
}

/// Most bytes of a request's head a connection buffers: past this hyper
/// answers 431 itself (with no body). Above [`MAX_TARGET_BYTES`] and
/// [`MAX_HEADER_BYTES`] and below this, a request reaches the middleware,
/// which answers 414 or 431 as problem+json.
const MAX_HEAD_BUFFER: usize = 1 << 20;

/// Serve `app` on `listener` until `shutdown` resolves, then finish
/// in-flight requests (at most `grace`). Connections are served as axum's
/// `serve` does (HTTP/1.1 and HTTP/2, graceful shutdown), with a request
/// head buffer of [`MAX_HEAD_BUFFER`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    use axum::serve::Listener as _;
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use tower::ServiceExt as _;
    let mut listener = stall::StallGuardedListener::new(listener, state.metrics.clone());
    let app = app(state);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http1().max_buf_size(MAX_HEAD_BUFFER).timer(TokioTimer::new());
    builder.http2().enable_connect_protocol();
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (io, _) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(
            app.clone()
                .map_request(|request: axum::http::Request<hyper::body::Incoming>| request.map(axum::body::Body::new)),
        );
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(io), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::trace!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(grace) => {
            tracing::warn!("in-flight requests did not finish within {grace:?}; exiting");
        }
    }
    Ok(())
}

/// The URL of `path` on this server: under `public_url` when it is set,
/// else as the request reached it (its `Host`, which must look like a host
/// name: anything else gives a relative link, never markup from a header).
pub(super) fn absolute(state: &AppState, headers: &HeaderMap, path: &str) -> String {
    format!("{}{path}", origin(state, headers))
}

/// The scheme, host and prefix links start with: `public_url`, else the
/// request's `Host` and `X-Forwarded-Proto`, else nothing.
pub(super) fn origin(state: &AppState, headers: &HeaderMap) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn plain_rejections_become_problems_with_their_status_and_text() {
        let plain = (
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "Failed to parse the request body",
        )
            .into_response();
        let problem = problem_for_rejections(plain).await;
        assert_eq!(problem.status(), 422);
        assert_eq!(problem.headers()[header::CONTENT_TYPE], "application/problem+json");
        let body = axum::body::to_bytes(problem.into_body(), 1 << 20).await.unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(doc["detail"], "Failed to parse the request body");
        let ok = problem_for_rejections("fine".into_response()).await;
        assert_eq!(ok.headers()[header::CONTENT_TYPE], "text/plain; charset=utf-8");
    }
}
