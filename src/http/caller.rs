//! The identity layer: each request's credential resolved once into a
//! [`Caller`] (which handlers extract), and its rate limit counted.

use std::net::{IpAddr, SocketAddr};

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
        let key = caller.rate_key(&client_address(request));
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

/// The client's address: the connection's peer, or, when the peer is a
/// proxy on a private or loopback address, the last address that proxy
/// appended to `X-Forwarded-For`.
fn client_address(request: &Request) -> String {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let behind_proxy = peer.is_none_or(private);
    let forwarded = request
        .headers()
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.rsplit(',').next())
        .and_then(|a| a.trim().parse::<IpAddr>().ok());
    match (behind_proxy, forwarded, peer) {
        (true, Some(client), _) => client.to_string(),
        (_, _, Some(peer)) => peer.to_string(),
        _ => "unknown".into(),
    }
}

fn private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_private(),
        IpAddr::V6(v6) => v6.is_loopback() || (v6.segments()[0] & 0xfe00) == 0xfc00,
    }
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

    #[test]
    fn a_forwarded_address_counts_only_behind_a_private_proxy() {
        let request = |peer: &str, forwarded: &str| {
            let mut r = Request::builder()
                .header("x-forwarded-for", forwarded)
                .body(axum::body::Body::empty())
                .unwrap();
            r.extensions_mut()
                .insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
            r
        };
        assert_eq!(client_address(&request("10.0.0.2:5000", "1.2.3.4, 5.6.7.8")), "5.6.7.8");
        assert_eq!(client_address(&request("9.9.9.9:5000", "5.6.7.8")), "9.9.9.9");
        assert_eq!(client_address(&request("127.0.0.1:5000", "junk")), "127.0.0.1");
    }
}
