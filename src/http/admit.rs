//! Read slots: the route layer of every route that reads array data.

use std::sync::Arc;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::middleware::MAX_BODY_BYTES;
use super::{ApiError, AppState};
use crate::identity::Permission;

/// The route layer of every route that reads array data (api.md 4.1, 2):
/// one of `max_concurrent_reads` read slots, taken before the handler runs
/// (503 with `Retry-After` after `read_slot_wait_secs`) and held until the
/// response body has been sent or dropped, so a streamed answer holds it
/// for as long as it streams. Handlers take no slot of their own.
pub(crate) async fn read_slot(request: Request, next: Next) -> Response {
    admit(request, next, |e| ApiError::Engine(e).into_response()).await
}

/// A write: `PUT`, `PATCH`, `DELETE`, or a `POST` that appends.
fn is_write(request: &Request) -> bool {
    use axum::http::Method;
    let method = request.method();
    let appends = || {
        request
            .uri()
            .query()
            .is_some_and(|q| url::form_urlencoded::parse(q.as_bytes()).any(|(k, _)| k == "append"))
    };
    [Method::PUT, Method::PATCH, Method::DELETE].contains(method) || (method == Method::POST && appends())
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
    // Writes take no read slot; their bodies are received by their handler.
    if is_write(&request) {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    // A request for an unknown dataset, or one it may not read, is
    // answered by its handler without a slot.
    let allowed = match axum::extract::RawPathParams::from_request_parts(&mut parts, &()).await {
        Ok(params) => params.iter().find(|(name, _)| *name == "ds").is_none_or(|(_, ds)| {
            let caller = super::caller::of(&parts.extensions);
            state.configured(ds, &caller, Permission::Read).is_ok()
        }),
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
