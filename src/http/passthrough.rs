//! Raw store values: `GET|HEAD /v1/datasets/{ds}/zarr/{key}`, so any Zarr v3
//! client can read a dataset over plain HTTP. Single byte ranges are
//! answered 206; `If-None-Match` 304. A key ending in `/` is a prefix
//! listing ([`super::view`]).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::Response;

use super::conditional::if_none_match;
use super::problem::ApiError;
use super::AppState;
use crate::identity::Caller;
use crate::storage::{validate_key, ByteRange, ObjectInfo};

/// A parsed `Range` header.
#[derive(Debug, PartialEq, Eq)]
enum RangeSpec {
    /// `bytes=a-b` or `bytes=a-`
    From(u64, Option<u64>),
    /// `bytes=-n`
    Suffix(u64),
}

/// Parse a single `bytes=` range; `None` means ignore the header (not a
/// single byte range: RFC 9110 lets a server answer with the whole object).
fn parse_range(value: &str) -> Option<Result<RangeSpec, ()>> {
    let spec = value.trim().strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (a, b) = spec.trim().split_once('-')?;
    let num = |s: &str| s.trim().parse::<u64>().map_err(|_| ());
    Some(match (a.trim(), b.trim()) {
        ("", n) => num(n).map(RangeSpec::Suffix),
        (a, "") => num(a).map(|a| RangeSpec::From(a, None)),
        (a, b) => match (num(a), num(b)) {
            (Ok(a), Ok(b)) if a <= b => Ok(RangeSpec::From(a, Some(b))),
            _ => Err(()),
        },
    })
}

/// The byte range `spec` selects in an object of `size` bytes, or `None`
/// when it is unsatisfiable.
fn resolve(spec: &RangeSpec, size: u64) -> Option<std::ops::Range<u64>> {
    match *spec {
        RangeSpec::Suffix(0) => None,
        RangeSpec::Suffix(_) if size == 0 => None,
        RangeSpec::Suffix(n) => Some(size.saturating_sub(n)..size),
        RangeSpec::From(a, _) if a >= size => None,
        RangeSpec::From(a, b) => Some(a..b.map_or(size, |b| (b + 1).min(size))),
    }
}

/// `GET|HEAD /v1/datasets/{ds}/zarr/{key}`
pub(super) async fn get(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((ds, key)): Path<(String, String)>,
    method: Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if let Some(prefix) = key.strip_suffix('/') {
        return super::view::zarr_listing(&state, &caller, &ds, prefix, &method, &headers).await;
    }
    let dataset = &state.dataset(&ds, &caller).await?;
    validate_key(&key).map_err(ApiError::BadRequest)?;
    let store = dataset.store();
    let not_found = || ApiError::NotFound(format!("no key '{key}' in dataset '{ds}'"));
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_range);
    // The object's size and version first (api.md 4.1): 304 and 413 before
    // its bytes are fetched, and the read pinned to the version tagged.
    let info = store.head(&key).await?.ok_or_else(not_found)?;
    if info
        .etag
        .as_deref()
        .is_some_and(|e| if_none_match(&headers, &quoted(e)))
    {
        let response = base_headers(Response::builder(), &info, &key).status(StatusCode::NOT_MODIFIED);
        return Ok(response.body(Body::empty()).expect("valid response"));
    }
    let byte_range = match &range {
        Some(Err(())) => return Err(ApiError::RangeNotSatisfiable { size: info.size }),
        Some(Ok(spec)) => Some(resolve(spec, info.size).ok_or(ApiError::RangeNotSatisfiable { size: info.size })?),
        None => None,
    };
    let size = byte_range.as_ref().map_or(info.size, |r| r.end - r.start);
    if size > state.max_response_bytes {
        return Err(ApiError::TooLarge {
            requested: size,
            limit: state.max_response_bytes,
        });
    }
    if method == Method::HEAD {
        let (status, length) = match &byte_range {
            Some(r) => (StatusCode::PARTIAL_CONTENT, r.end - r.start),
            None => (StatusCode::OK, info.size),
        };
        let mut response = base_headers(Response::builder(), &info, &key)
            .status(status)
            .header(header::CONTENT_LENGTH, length);
        if let Some(r) = &byte_range {
            response = response.header(
                header::CONTENT_RANGE,
                format!("bytes {}-{}/{}", r.start, r.end - 1, info.size),
            );
        }
        return Ok(response.body(Body::empty()).expect("valid response"));
    }
    let request_range = byte_range.clone().map_or(ByteRange::All, ByteRange::Bounded);
    let read = store
        .get(&key, request_range, info.etag.as_deref())
        .await?
        .ok_or_else(not_found)?;
    let size = read.data.len() as u64;
    let mut response = base_headers(Response::builder(), &read.info, &key).header(header::CONTENT_LENGTH, size);
    if byte_range.is_some() {
        response = response.status(StatusCode::PARTIAL_CONTENT).header(
            header::CONTENT_RANGE,
            format!(
                "bytes {}-{}/{}",
                read.range.start,
                read.range.end.saturating_sub(1),
                read.info.size
            ),
        );
    }
    Ok(response.body(Body::from(read.data)).expect("valid response"))
}

fn quoted(etag: &str) -> String {
    format!("\"{}\"", etag.trim_matches('"'))
}

fn base_headers(builder: axum::http::response::Builder, info: &ObjectInfo, key: &str) -> axum::http::response::Builder {
    let content_type = if key == "zarr.json" || key.ends_with("/zarr.json") {
        "application/json"
    } else {
        "application/octet-stream"
    };
    let mut builder = builder
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::CONTENT_TYPE, content_type)
        .header(header::LAST_MODIFIED, httpdate::fmt_http_date(info.last_modified));
    if let Some(etag) = &info.etag {
        builder = builder.header(header::ETAG, quoted(etag));
    }
    builder
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let r = |h: &str, size: u64| parse_range(h).map(|p| p.ok().and_then(|s| resolve(&s, size)));
        assert_eq!(r("bytes=0-9", 100), Some(Some(0..10)));
        assert_eq!(r("bytes=90-", 100), Some(Some(90..100)));
        assert_eq!(r("bytes=-10", 100), Some(Some(90..100)));
        assert_eq!(r("bytes=-1000", 100), Some(Some(0..100)));
        assert_eq!(r("bytes=50-1000", 100), Some(Some(50..100)));
        assert_eq!(r("bytes=100-", 100), Some(None));
        assert_eq!(r("bytes=-0", 100), Some(None));
        assert_eq!(r("bytes=5-2", 100), Some(None));
        assert_eq!(r("bytes=a-b", 100), Some(None));
        assert_eq!(r("bytes=0-1,3-4", 100), None);
        assert_eq!(r("items=0-1", 100), None);
    }
}
