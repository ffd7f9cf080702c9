//! Who a request is and what it may do.
//!
//! The credential a request carries is resolved once into a [`Caller`]:
//! an API key (kept only as its SHA-256), a dataset's legacy `token`, an
//! OpenID Connect bearer token verified against its issuer's keys, or
//! nobody. Each dataset's [`Grants`] then say whether the caller may
//! `read` or `write` it. No HTTP here: the http layer hands over the
//! credential and turns a [`Denied`] into its status.

mod grants;
mod oidc;
mod rate;

use std::collections::HashMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};

pub use grants::{Denied, Grant, Grants, Permission};
pub use oidc::OidcSettings;
pub use rate::{RateLimits, TrustedProxies};

/// The credential of a request, as sent.
#[derive(Debug, Clone, Copy)]
pub enum Credential<'a> {
    /// `Authorization: Bearer <value>`: a JWT, an API key or a dataset token.
    Bearer(&'a str),
    /// `X-API-Key: <value>`: an API key or a dataset token.
    ApiKey(&'a str),
}

/// Who a request is, once its credential is resolved.
#[derive(Debug, Clone)]
pub enum Caller {
    /// No credential.
    Anonymous,
    /// A credential the service recognises.
    Known(Arc<Principal>),
    /// An opaque credential that matches no key or token.
    Unknown,
    /// A token that failed verification, and why (never the token).
    Invalid(&'static str),
    /// A token that cannot be checked: its issuer's keys cannot be fetched.
    IssuerUnavailable,
}

impl Caller {
    /// The key its requests are rate-limited under: the principal, or
    /// `client` (its address key) for anyone else.
    pub fn rate_key(&self, client: impl FnOnce() -> String) -> String {
        match self {
            Caller::Known(principal) => principal.rate_key(),
            _ => client(),
        }
    }
}

/// Who made a request, for logs: `key:NAME`, `sub:SUBJECT`, `anonymous`.
impl std::fmt::Display for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Caller::Known(principal) => f.write_str(&principal.rate_key()),
            Caller::Anonymous => f.write_str("anonymous"),
            _ => f.write_str("unrecognised"),
        }
    }
}

/// A recognised caller: what its credential says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Principal {
    /// The token's `sub`.
    pub subject: Option<String>,
    /// The token's groups (the configured groups claim).
    pub groups: Vec<String>,
    /// The token's `scope` and `scp`.
    pub scopes: Vec<String>,
    /// The name of the API key used.
    pub key: Option<String>,
    /// Datasets whose legacy `token` was sent (each a read key).
    pub tokens_of: Vec<String>,
}

impl Principal {
    fn rate_key(&self) -> String {
        match (&self.key, &self.subject) {
            (Some(key), _) => format!("key:{key}"),
            (None, Some(sub)) => format!("sub:{sub}"),
            (None, None) => format!("token:{}", self.tokens_of.join(",")),
        }
    }
}

/// `[auth]`: the keys and issuer requests are resolved against.
#[derive(Debug, Clone, Default)]
pub struct IdentitySettings {
    /// `[auth.oidc]`, if set.
    pub oidc: Option<OidcSettings>,
    /// `[auth.api_keys.NAME]`: each key's name and the hex SHA-256 of the key.
    pub api_keys: Vec<(String, String)>,
    /// Each dataset's legacy `token`, by dataset name.
    pub dataset_tokens: Vec<(String, String)>,
}

/// Resolves credentials into callers.
#[derive(Debug)]
pub struct Identity {
    /// API key names by the SHA-256 of the key.
    keys: HashMap<[u8; 32], String>,
    /// Each dataset's token, as its SHA-256 (compared in constant time).
    dataset_tokens: Vec<(String, [u8; 32])>,
    oidc: Option<Arc<oidc::Verifier>>,
}

impl Identity {
    /// Check the settings (key hashes, issuer URL); contacts nothing.
    pub fn new(settings: IdentitySettings) -> Result<Self, String> {
        let mut keys = HashMap::new();
        for (name, hex_hash) in settings.api_keys {
            let hash: [u8; 32] = hex::decode(hex_hash.trim())
                .ok()
                .and_then(|h| h.try_into().ok())
                .ok_or_else(|| format!("[auth.api_keys.{name}]: sha256 must be 64 hexadecimal digits"))?;
            if let Some(other) = keys.insert(hash, name.clone()) {
                return Err(format!(
                    "[auth.api_keys.{name}] and [auth.api_keys.{other}] have the same sha256"
                ));
            }
        }
        let oidc = settings.oidc.map(oidc::Verifier::new).transpose()?.map(Arc::new);
        let mut dataset_tokens = Vec::new();
        for (name, token) in settings.dataset_tokens {
            if token.trim().is_empty() {
                return Err(format!("dataset '{name}': token is empty"));
            }
            dataset_tokens.push((name, Sha256::digest(token.trim().as_bytes()).into()));
        }
        Ok(Self {
            keys,
            dataset_tokens,
            oidc,
        })
    }

    /// Fetch the issuer's keys in the background (start-up does not wait).
    pub fn start(&self) {
        if let Some(oidc) = &self.oidc {
            tokio::spawn(oidc.clone().warm_up());
        }
    }

    /// Who `credential` makes the caller.
    pub async fn resolve(&self, credential: Option<Credential<'_>>) -> Caller {
        let (value, bearer) = match credential {
            None => return Caller::Anonymous,
            Some(Credential::Bearer(v)) => (v.trim(), true),
            Some(Credential::ApiKey(v)) => (v.trim(), false),
        };
        if value.is_empty() {
            return Caller::Unknown;
        }
        // One hash names the credential to the key table, the dataset
        // tokens and the verified-token cache.
        let hash: [u8; 32] = Sha256::digest(value.as_bytes()).into();
        if let Some(principal) = self.key(&hash) {
            return Caller::Known(Arc::new(principal));
        }
        match &self.oidc {
            Some(oidc) if bearer && looks_like_jwt(value) => oidc.verify(value, hash).await,
            _ => Caller::Unknown,
        }
    }

    /// The API key or dataset tokens whose SHA-256 is `hash`, if any.
    fn key(&self, hash: &[u8; 32]) -> Option<Principal> {
        use subtle::ConstantTimeEq;
        let key = self.keys.get(hash).cloned();
        let tokens_of: Vec<String> = self
            .dataset_tokens
            .iter()
            .filter(|(_, token)| bool::from(hash.ct_eq(token)))
            .map(|(name, _)| name.clone())
            .collect();
        (key.is_some() || !tokens_of.is_empty()).then_some(Principal {
            key,
            tokens_of,
            ..Principal::default()
        })
    }
}

/// Three dot-separated base64url parts, the first a JSON object: a JWT
/// (an opaque key never is one).
fn looks_like_jwt(value: &str) -> bool {
    use base64::Engine as _;
    let mut parts = value.split('.');
    let header = parts.next().unwrap_or_default();
    parts.count() == 2
        && base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(header.trim_end_matches('='))
            .is_ok_and(|h| h.first() == Some(&b'{'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> Identity {
        let hash = hex::encode(Sha256::digest(b"s3cret-pipeline-key"));
        Identity::new(IdentitySettings {
            oidc: None,
            api_keys: vec![("pipeline".into(), hash)],
            dataset_tokens: vec![("a".into(), "tok-a".into()), ("b".into(), "tok-a".into())],
        })
        .unwrap()
    }

    #[tokio::test]
    async fn keys_and_tokens_resolve_both_ways_and_nothing_else_does() {
        let id = identity();
        for credential in [
            Credential::Bearer("s3cret-pipeline-key"),
            Credential::ApiKey("s3cret-pipeline-key"),
        ] {
            let Caller::Known(p) = id.resolve(Some(credential)).await else {
                panic!("{credential:?}")
            };
            assert_eq!(p.key.as_deref(), Some("pipeline"));
            assert_eq!(p.rate_key(), "key:pipeline");
        }
        let Caller::Known(p) = id.resolve(Some(Credential::ApiKey("tok-a"))).await else {
            panic!()
        };
        assert_eq!(p.tokens_of, ["a", "b"]);
        assert!(matches!(
            id.resolve(Some(Credential::Bearer("wrong"))).await,
            Caller::Unknown
        ));
        assert!(matches!(id.resolve(None).await, Caller::Anonymous));
        // Without [auth.oidc] a JWT is just an unknown credential.
        let jwt = "eyJhbGciOiJSUzI1NiJ9.e30.c2ln";
        assert!(looks_like_jwt(jwt));
        assert!(matches!(
            id.resolve(Some(Credential::Bearer(jwt))).await,
            Caller::Unknown
        ));
        assert!(!looks_like_jwt("s3cret-pipeline-key") && !looks_like_jwt("a.b.c"));
    }

    #[test]
    fn bad_key_hashes_are_refused() {
        for bad in ["", "abc", &"g".repeat(64)] {
            let settings = IdentitySettings {
                api_keys: vec![("k".into(), bad.to_string())],
                ..IdentitySettings::default()
            };
            assert!(Identity::new(settings).unwrap_err().contains("64 hexadecimal"), "{bad}");
        }
    }
}
