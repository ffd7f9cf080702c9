//! The middleware every route runs under: size limits, the request
//! timeout, metrics and the access log, `Cache-Control`, per-coding ETags,
//! compression, CORS and problem+json for rejections.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::compression::predicate::{NotForContentType, Predicate, SizeAbove};
use tower_http::compression::{CompressionLayer, CompressionLevel};
use tower_http::cors::{AllowOrigin, CorsLayer};

use super::{query, ApiError, AppState};

/// The largest POST body of a region read.
pub(super) const MAX_BODY_BYTES: usize = 1 << 20;

/// 400 naming the first query parameter of a `/v1/` route that takes none
/// (a typo must never silently change an answer).
pub(super) async fn no_query_parameters(request: Request, next: Next) -> Response {
    only_parameters(request, next, &[]).await
}

/// The node routes: no query parameters, but a write's `transaction`.
pub(super) async fn only_a_transaction(request: Request, next: Next) -> Response {
    let allowed: &[&str] = match *request.method() {
        axum::http::Method::GET | axum::http::Method::HEAD => &[],
        _ => &["transaction"],
    };
    only_parameters(request, next, allowed).await
}

/// 400 naming the first query parameter not `allowed`.
async fn only_parameters(request: Request, next: Next, allowed: &[&str]) -> Response {
    let unknown = request.uri().query().and_then(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .find(|(name, _)| !allowed.contains(&name.as_ref()))
            .map(|(name, _)| name.into_owned())
    });
    match unknown {
        Some(name) => query::unknown_parameter(&name, allowed).into_response(),
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
pub(super) fn compression() -> CompressionLayer<impl Predicate> {
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
        header::WWW_AUTHENTICATE,
        header::RETRY_AFTER,
    ];
    let base = CorsLayer::new()
        .allow_methods([
            Method::GET,
            Method::HEAD,
            Method::OPTIONS,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ])
        .allow_headers([
            header::RANGE,
            header::IF_NONE_MATCH,
            header::IF_MATCH,
            header::CONTENT_TYPE,
            header::ACCEPT,
            header::AUTHORIZATION,
            header::HeaderName::from_static("x-api-key"),
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
    /// Kept, but asked again each time: a transaction's reads.
    Revalidate,
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
    let version = dataset
        .split_once('@')
        .and_then(|(_, v)| crate::storage::Version::parse(v).ok());
    match version {
        Some(v) if v.is_immutable() && segments.next() != Some("refs") => Caching::Immutable,
        // Each write changes what a transaction reads (and its explorer pages).
        Some(crate::storage::Version::Transaction(_)) => Caching::Revalidate,
        _ => otherwise,
    }
}

/// Whether the answer to `path` is the same for every caller: it names a
/// dataset anyone may read (or none), or it lists datasets and every one
/// is open to anyone. Other answers depend on the credentials sent.
fn shared(state: &AppState, path: &str) -> bool {
    let rest = match (path.strip_prefix(CACHEABLE_PREFIX), path.strip_prefix("/explore")) {
        (Some(rest), _) | (None, Some(rest)) => rest,
        (None, None) if path == "/" => "",
        (None, None) => return true,
    };
    let segment = rest.trim_start_matches('/').split('/').next().unwrap_or_default();
    if segment.is_empty() {
        return state.all_public();
    }
    let dataset = percent_encoding::percent_decode_str(segment).decode_utf8_lossy();
    state.is_public(dataset.split('@').next().unwrap_or_default())
}

/// `Cache-Control` on successful and 304 answers of the dataset routes
/// (data, nodes, listings, passthrough, the v2 view, the protocols). An
/// answer that depends on the caller's credentials is `private` (never
/// kept by a shared cache) and varies on them.
fn cache_control(state: &AppState, caching: Caching, shared: bool, mut response: Response) -> Response {
    let status = response.status();
    let ok = status.is_success() || status == axum::http::StatusCode::NOT_MODIFIED;
    if ok && caching != Caching::Unsaid {
        let value = match (caching, shared) {
            (Caching::Immutable, true) => HeaderValue::from_static("public, max-age=31536000, immutable"),
            (Caching::Immutable, false) => HeaderValue::from_static("private, max-age=31536000, immutable"),
            (Caching::Revalidate, _) => HeaderValue::from_static("private, no-cache"),
            (_, true) => state.cache_control.clone(),
            (_, false) => HeaderValue::from_str(&format!("private, {}", state.cache_control.to_str().unwrap_or("")))
                .unwrap_or(HeaderValue::from_static("private")),
        };
        response.headers_mut().entry(header::CACHE_CONTROL).or_insert(value);
    } else if ok && !shared {
        let private = HeaderValue::from_static("private");
        response.headers_mut().entry(header::CACHE_CONTROL).or_insert(private);
    }
    if !shared {
        let vary = HeaderValue::from_static("authorization, x-api-key");
        response.headers_mut().append(header::VARY, vary);
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
pub(super) const MAX_TARGET_BYTES: usize = 8 << 10;
/// Largest header section accepted.
pub(super) const MAX_HEADER_BYTES: usize = 32 << 10;

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
/// log around the size limits, the caller and its rate limit, the handler, `Cache-Control`, the ETag of a
/// compressed representation and problem+json for rejections.
async fn every_request(State(state): State<Arc<AppState>>, mut request: Request, next: Next) -> Response {
    // For the route layers that need it ([`read_slot`]).
    request.extensions_mut().insert(state.clone());
    let caching = caching(request.uri().path());
    let shared = shared(&state, request.uri().path());
    let line = request_line(&request);
    let answer = async {
        let admitted = match size_limits(&request) {
            Ok(()) => super::caller::identify(&state, &mut request).await,
            Err(rejection) => Err(rejection),
        };
        let response = match admitted {
            Ok(()) => next.run(request).await,
            Err(rejection) => rejection.into_response(),
        };
        problem_for_rejections(etag_per_coding(cache_control(&state, caching, shared, response))).await
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
