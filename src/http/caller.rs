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
        if let Err(wait) = limits.check(&key) {
            return Err(ApiError::RateLimited(wait.as_secs_f64().ceil().max(1.0) as u64));
        }
    }
    request.extensions_mut().insert(caller);
    Ok(())
}

/// The credential a request sends: `X-API-Key`, else `Authorization: Bearer`.
fn credential(headers: &HeaderMap) -> Option<Credential<'_>> {
    let value = |name| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(key) = value(header::HeaderName::from_static("x-api-key")) {
        return Some(Credential::ApiKey(key));
    }
    let authorization = value(header::AUTHORIZATION)?;
    let (scheme, token) = authorization.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(Credential::Bearer(token))
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
        Ok(parts.extensions.get::<Caller>().cloned().unwrap_or(Caller::Anonymous))
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
