//! Conditional requests: strong ETags over a representation's bytes and
//! `If-None-Match` answered 304.

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use sha2::{Digest, Sha256};

/// Whether `If-None-Match` lists `etag` (weak comparison, `*` matches all;
/// the tag of a compressed representation matches its uncompressed one).
pub(super) fn if_none_match(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim() == "*" || super::strip_coding(t) == super::strip_coding(etag))
}

/// Whether `If-Match` holds for a representation whose ETag is now
/// `etag` (strong comparison; `*` matches any; the tag of a compressed
/// representation matches its uncompressed one). No header: it holds.
pub(super) fn if_match(headers: &HeaderMap, etag: &str) -> bool {
    let mut given = headers
        .get_all(header::IF_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .peekable();
    if given.peek().is_none() {
        return true;
    }
    given.any(|t| t == "*" || (!t.starts_with("W/") && super::strip_coding(t) == super::strip_coding(etag)))
}

/// A strong ETag over `parts`.
pub(super) fn strong_etag(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for part in parts {
        h.update(part);
        h.update([0]);
    }
    tag(h)
}

/// The strong ETag of what `h` has hashed.
pub(super) fn tag(h: Sha256) -> String {
    format!("\"{}\"", hex::encode(&h.finalize()[..16]))
}

/// `body` with its type and ETag; 304 when `If-None-Match` names the ETag.
pub(super) fn respond(body: Bytes, content_type: &str, etag: &str, method: &Method, headers: &HeaderMap) -> Response {
    let builder = Response::builder().header(header::ETAG, etag);
    if if_none_match(headers, etag) {
        return builder
            .status(StatusCode::NOT_MODIFIED)
            .body(Body::empty())
            .expect("valid response");
    }
    let builder = builder
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CONTENT_LENGTH, body.len());
    let body = if method == Method::HEAD {
        Body::empty()
    } else {
        Body::from(body)
    };
    builder.body(body).expect("valid response")
}
