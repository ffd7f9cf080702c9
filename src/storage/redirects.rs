//! HTTP stores follow redirects only under the URL they were opened at.
//!
//! A dataset, a reference set's directory or a virtual chunk container on
//! a plain HTTP(S) server is one URL prefix; whatever the server answers, a
//! redirect to anywhere else (another host, port, scheme, or a path beside
//! the prefix) fails the read instead of fetching from there, so the bytes
//! served always come from under a prefix the configuration allows.
//! object_store has no redirect setting, so the HTTP client is built here
//! from the same options object_store would build it from, with a policy
//! that checks every hop.

use std::time::Duration;

use object_store::client::{HttpClient, HttpConnector};
use object_store::{ClientConfigKey, ClientOptions};
use reqwest13 as reqwest;
use url::Url;

/// Hops a chain of redirects may take, as reqwest's default allows.
const MAX_HOPS: usize = 10;

/// Builds HTTP clients whose redirects stay under `prefix`.
#[derive(Debug)]
pub(super) struct StayUnder {
    prefix: Url,
}

impl StayUnder {
    /// Redirects allowed under `url`, taken as a directory.
    pub(super) fn new(url: &Url) -> Self {
        let mut prefix = url.clone();
        if !prefix.path().ends_with('/') {
            prefix.set_path(&format!("{}/", prefix.path()));
        }
        prefix.set_query(None);
        prefix.set_fragment(None);
        Self { prefix }
    }
}

/// Whether `target` lies under `prefix`: the same scheme, host and port,
/// no user information, and a path inside the prefix's.
pub(super) fn under(target: &Url, prefix: &Url) -> bool {
    target.scheme() == prefix.scheme()
        && target.host() == prefix.host()
        && target.port_or_known_default() == prefix.port_or_known_default()
        && target.username().is_empty()
        && target.password().is_none()
        && target.path().starts_with(prefix.path())
        && target.path().split('/').all(plain_segment)
}

/// A path segment that no server reads as a step up or aside: once
/// percent-decoded, not `.` or `..` and without `/`, `\` or `;` (which
/// servers may decode and then resolve: `..%2f`, `..%5c`, `..;`).
fn plain_segment(segment: &str) -> bool {
    let decoded = percent_encoding::percent_decode_str(segment).decode_utf8_lossy();
    decoded != "." && decoded != ".." && !decoded.contains(['/', '\\', ';'])
}

impl HttpConnector for StayUnder {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let prefix = self.prefix.clone();
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= MAX_HOPS {
                return attempt.error(format!("more than {MAX_HOPS} redirects"));
            }
            if under(attempt.url(), &prefix) {
                return attempt.follow();
            }
            let refused = format!(
                "redirect to {} refused: it leaves {prefix}, the prefix this read is allowed under",
                crate::storage::open::redact(attempt.url())
            );
            attempt.error(refused)
        });
        let client = builder(options)?.redirect(policy).build().map_err(failed)?;
        Ok(HttpClient::new(client))
    }
}

/// A client with a backend's client options (`get` reads them from its
/// configured builder: the environment and the dataset's settings, as
/// object_store applies them), for the requests object_store cannot make
/// (presigned ones, whose URL the backend built): no redirects.
pub(super) fn client_for(get: impl Fn(ClientConfigKey) -> Option<String>) -> object_store::Result<reqwest::Client> {
    builder_from(get)?
        .https_only(false)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(failed)
}

/// A reqwest client builder with `options` applied as object_store applies
/// them (the options this service sets, or a user may set, as config keys).
fn builder(options: &ClientOptions) -> object_store::Result<reqwest::ClientBuilder> {
    builder_from(|key| options.get_config_value(&key))
}

/// A reqwest client builder with the client options `get` gives.
fn builder_from(get: impl Fn(ClientConfigKey) -> Option<String>) -> object_store::Result<reqwest::ClientBuilder> {
    let on = |key: ClientConfigKey| get(key).is_some_and(|v| v == "true");
    let duration = |key: ClientConfigKey| -> object_store::Result<Option<Duration>> {
        get(key)
            .map(|v| humantime::parse_duration(&v).map_err(|e| failed(format!("{key:?} {v}: {e}"))))
            .transpose()
    };
    let mut b = reqwest::Client::builder()
        .user_agent(
            get(ClientConfigKey::UserAgent).unwrap_or_else(|| concat!("zarr-serve/", env!("CARGO_PKG_VERSION")).into()),
        )
        // Compression would hide the stored size (Content-Length).
        .no_gzip()
        .no_brotli()
        .no_zstd()
        .no_deflate()
        .https_only(!on(ClientConfigKey::AllowHttp))
        .danger_accept_invalid_certs(on(ClientConfigKey::AllowInvalidCertificates));
    if let Some(proxy) = get(ClientConfigKey::ProxyUrl) {
        let mut proxy = reqwest::Proxy::all(&proxy).map_err(failed)?;
        if let Some(excludes) = get(ClientConfigKey::ProxyExcludes) {
            proxy = proxy.no_proxy(reqwest::NoProxy::from_string(&excludes));
        }
        b = b.proxy(proxy);
    }
    if let Some(t) = duration(ClientConfigKey::Timeout)? {
        b = b.timeout(t);
    }
    if let Some(t) = duration(ClientConfigKey::ConnectTimeout)? {
        b = b.connect_timeout(t);
    }
    if let Some(t) = duration(ClientConfigKey::PoolIdleTimeout)? {
        b = b.pool_idle_timeout(t);
    }
    if let Some(n) = get(ClientConfigKey::PoolMaxIdlePerHost).and_then(|v| v.parse().ok()) {
        b = b.pool_max_idle_per_host(n);
    }
    if on(ClientConfigKey::Http1Only) {
        b = b.http1_only();
    }
    if on(ClientConfigKey::Http2Only) {
        b = b.http2_prior_knowledge();
    }
    Ok(b)
}

fn failed(e: impl std::fmt::Display) -> object_store::Error {
    object_store::Error::Generic {
        store: "HTTP",
        source: e.to_string().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_urls_under_the_prefix_are_followed() {
        let prefix = StayUnder::new(&Url::parse("https://data.example/files").unwrap()).prefix;
        assert_eq!(prefix.as_str(), "https://data.example/files/");
        for ok in [
            "https://data.example/files/a.nc",
            "https://data.example:443/files/b/c.nc",
            "https://DATA.example/files/x?sig=1",
            // Parsed, the dot segments are resolved: still under the prefix.
            "https://data.example/files/a/%2E%2E/b",
        ] {
            assert!(under(&Url::parse(ok).unwrap(), &prefix), "{ok}");
        }
        for bad in [
            "https://evil.example/files/a.nc",
            "http://data.example/files/a.nc",
            "https://data.example:8443/files/a.nc",
            "https://data.example/files_evil/a.nc",
            "https://data.example/other/a.nc",
            "https://data.example/files",
            "https://user@data.example/files/a.nc",
            "https://data.example.evil/files/a.nc",
            "https://data.example/files/..%2fsecret",
            "https://data.example/files/%2e%2e%2Fsecret",
            "https://data.example/files/..%5csecret",
            "https://data.example/files/..;/secret",
        ] {
            assert!(!under(&Url::parse(bad).unwrap(), &prefix), "{bad}");
        }
    }
}
