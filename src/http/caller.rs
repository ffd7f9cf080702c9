//! The identity layer: each request's credential resolved once into a
//! [`Caller`] (which handlers extract), and its rate limit counted.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};

use super::{ApiError, AppState};
use crate::identity::{Caller, Credential};

/// Routes a rate limit never refuses: probes of liveness and readiness.
const UNLIMITED: [&str; 2] = ["/healthz", "/readyz"];

/// Resolve the request's caller into its extensions, then count it
/// against its rate limit.
pub(super) async fn identify(state: &AppState, request: &mut Request) -> Result<(), ApiError> {
    let caller = state.identity.resolve(credential(request.headers())).await;
    let limited = state
        .rate_limits
        .as_ref()
        .filter(|_| !UNLIMITED.contains(&request.uri().path()));
    if let Some(limits) = limited {
        let key = caller.rate_key(|| client_address(state, request));
        if let Err(wait) = limits.check(key) {
            return Err(ApiError::RateLimited(wait.as_secs_f64().ceil().max(1.0) as u64));
        }
    }
    request.extensions_mut().insert(caller);
    Ok(())
}

/// The credential a request sends: `X-API-Key`, else `Authorization: Bearer`.
fn credential(headers: &HeaderMap) -> Option<Credential<'_>> {
    match headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        Some(key) => Some(Credential::ApiKey(key)),
        None => bearer(headers).map(Credential::Bearer),
    }
}

/// The value of `Authorization: Bearer <value>` (the scheme in any case).
pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let authorization = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = authorization.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

/// The caller the layer put in a request's extensions (anonymous if none).
pub(super) fn of(extensions: &axum::http::Extensions) -> Caller {
    extensions.get::<Caller>().cloned().unwrap_or(Caller::Anonymous)
}

/// The rate-limit key of the client's address (the connection's peer, or
/// what a trusted proxy says in `X-Forwarded-For`).
fn client_address(state: &AppState, request: &Request) -> String {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let forwarded = request.headers().get("x-forwarded-for").and_then(|v| v.to_str().ok());
    state.trusted_proxies.client_key(peer, forwarded)
}

/// Handlers take the caller the layer resolved (anonymous if none was).
impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(of(&parts.extensions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_read_from_either_header() {
        let mut headers = HeaderMap::new();
        assert!(credential(&headers).is_none());
        headers.insert(header::AUTHORIZATION, "bearer abc".parse().unwrap());
        assert!(matches!(credential(&headers), Some(Credential::Bearer("abc"))));
        headers.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert!(credential(&headers).is_none());
        headers.insert("x-api-key", "k".parse().unwrap());
        assert!(matches!(credential(&headers), Some(Credential::ApiKey("k"))));
    }
}
