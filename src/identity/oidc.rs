//! OpenID Connect bearer tokens: the issuer's keys found through
//! discovery, kept and refreshed, and each token's signature and claims
//! verified against them.
//!
//! The keys are fetched when first needed and again when they are older
//! than [`REFRESH`] (in the background: requests go on with the keys they
//! have) or when a token names a key id they lack. Fetches are at least
//! [`MIN_FETCH_INTERVAL`] apart, so a stream of tokens with made-up key
//! ids costs the issuer one request per interval. An issuer that cannot be
//! reached leaves the keys as they were; a token none of them fits is
//! answered "issuer unavailable" (503) until the issuer answers, and a
//! request waits at most [`FETCH_WAIT`] for a fetch another started.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use reqwest13 as reqwest;
use serde_json::{Map, Value};

use super::{Caller, Principal};

/// How old the keys may grow before they are fetched again.
const REFRESH: Duration = Duration::from_secs(300);
/// Fewest seconds between two fetches of the keys.
const MIN_FETCH_INTERVAL: Duration = Duration::from_secs(5);
/// Time allowed for one request to the issuer.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a request waits for a fetch another request started.
const FETCH_WAIT: Duration = Duration::from_secs(2);
/// Clock skew allowed on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 60;
/// The signature algorithms accepted (never `none` or HMAC).
const ALGORITHMS: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];
/// Verified tokens remembered (by hash), so a client sending the same
/// token on every request pays for one signature check.
const VERIFIED_CACHE: u64 = 10_000;
/// Largest discovery document or key set read.
const MAX_DOCUMENT_BYTES: usize = 1 << 20;

/// `[auth.oidc]`.
#[derive(Debug, Clone)]
pub struct OidcSettings {
    /// The issuer's URL, exactly as tokens name it in `iss`.
    pub issuer: String,
    /// The audience tokens must name in `aud`.
    pub audience: String,
    /// The claim holding the caller's groups; a dotted path reaches into
    /// objects (`realm_access.roles`).
    pub groups_claim: String,
}

/// The issuer's signing keys as last fetched.
#[derive(Debug)]
struct KeySet {
    keys: Vec<SigningKey>,
    fetched: Instant,
}

#[derive(Debug)]
struct SigningKey {
    id: Option<String>,
    /// The algorithm the key set pins, if any.
    algorithm: Option<Algorithm>,
    key: DecodingKey,
}

impl SigningKey {
    /// Whether this key may check a token with key id `kid` signed with `alg`.
    fn fits(&self, kid: Option<&str>, alg: Algorithm) -> bool {
        let id_fits = kid.is_none_or(|kid| self.id.as_deref() == Some(kid));
        id_fits && self.algorithm.is_none_or(|a| a == alg) && self.key.family() == alg.family()
    }
}

/// What a token's key lookup found.
enum Keys {
    /// Keys of which one or more fit the token.
    Held(Arc<KeySet>),
    /// The issuer's keys, just fetched, and none fits.
    NoneFits,
    /// No key fits and the issuer could not be asked (down, or asked
    /// moments ago): try again shortly.
    Unavailable,
}

/// The outcome of one attempt to fetch the keys.
enum Fetch {
    Done(usize),
    Skipped,
    Failed,
}

/// Verifies bearer tokens of one issuer.
#[derive(Debug)]
pub(super) struct Verifier {
    settings: OidcSettings,
    client: reqwest::Client,
    /// One per accepted algorithm (the crate checks one family at a time).
    validations: Vec<Validation>,
    keys: RwLock<Option<Arc<KeySet>>>,
    /// When the keys were last asked for (held while a fetch runs, so
    /// requests that need keys wait for it instead of fetching too).
    last_fetch: tokio::sync::Mutex<Option<Instant>>,
    /// A background refresh is running.
    refreshing: AtomicBool,
    verified: moka::sync::Cache<[u8; 32], (Arc<Principal>, u64)>,
}

impl Verifier {
    pub(super) fn new(settings: OidcSettings) -> Result<Self, String> {
        url::Url::parse(&settings.issuer)
            .map_err(|e| format!("invalid [auth.oidc] issuer '{}': {e}", settings.issuer))?;
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build the OIDC client: {e}"))?;
        let validations = ALGORITHMS
            .iter()
            .map(|alg| {
                let mut validation = Validation::new(*alg);
                validation.leeway = LEEWAY_SECS;
                validation.validate_nbf = true;
                validation.set_audience(&[&settings.audience]);
                validation.set_issuer(&[&settings.issuer]);
                validation.set_required_spec_claims(&["exp", "iss", "aud"]);
                validation
            })
            .collect();
        Ok(Self {
            settings,
            client,
            validations,
            keys: RwLock::new(None),
            last_fetch: tokio::sync::Mutex::new(None),
            refreshing: AtomicBool::new(false),
            verified: moka::sync::Cache::builder()
                .max_capacity(VERIFIED_CACHE)
                .time_to_live(REFRESH)
                .build(),
        })
    }

    /// Fetch the keys once now, saying in the log whether the issuer
    /// answered (start-up goes on either way).
    pub(super) async fn warm_up(self: Arc<Self>) {
        if let Fetch::Done(n) = self.fetch().await {
            tracing::info!(issuer = %self.settings.issuer, keys = n, "OIDC issuer keys fetched");
        }
    }

    /// Who the token (whose SHA-256 is `hash`) says the caller is, once
    /// its signature and claims hold.
    pub(super) async fn verify(self: &Arc<Self>, token: &str, hash: [u8; 32]) -> Caller {
        if let Some((principal, exp)) = self.verified.get(&hash) {
            if jsonwebtoken::get_current_timestamp() <= exp.saturating_add(LEEWAY_SECS) {
                return Caller::Known(principal);
            }
            self.verified.invalidate(&hash);
        }
        let header = match jsonwebtoken::decode_header(token) {
            Ok(header) => header,
            Err(_) => return Caller::Invalid("the token is not a well-formed JWT of an accepted algorithm"),
        };
        let Some(validation) = self.validations.iter().find(|v| v.algorithms == [header.alg]) else {
            return Caller::Invalid("the token's algorithm is not accepted (RS256, ES256 or EdDSA)");
        };
        let kid = header.kid.as_deref();
        let keys = match self.keys_for(kid, header.alg).await {
            Keys::Held(keys) => keys,
            Keys::NoneFits => return Caller::Invalid("the token is signed with a key the issuer does not publish"),
            Keys::Unavailable => return Caller::IssuerUnavailable,
        };
        // Every key that fits (a token without `kid` may match any of them).
        let mut failure = "the token's signature does not verify";
        for key in keys.keys.iter().filter(|k| k.fits(kid, header.alg)) {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, validation) {
                Ok(data) => {
                    let exp = data.claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
                    let principal = Arc::new(self.principal(&data.claims));
                    self.verified.insert(hash, (principal.clone(), exp));
                    return Caller::Known(principal);
                }
                Err(e) => failure = reason(e.kind()),
            }
        }
        Caller::Invalid(failure)
    }

    /// The keys to check a token with key id `kid` by: those held, fetched
    /// again first when none fits (at most once per interval, and never
    /// waiting on a fetch already running) and in the background when
    /// they are old.
    async fn keys_for(self: &Arc<Self>, kid: Option<&str>, alg: Algorithm) -> Keys {
        let fits = |keys: &KeySet| keys.keys.iter().any(|k| k.fits(kid, alg));
        let held = self.keys.read().expect("keys lock").clone();
        if let Some(keys) = held.filter(|k| fits(k)) {
            if keys.fetched.elapsed() > REFRESH && !self.refreshing.swap(true, Ordering::AcqRel) {
                let verifier = self.clone();
                tokio::spawn(async move {
                    verifier.fetch().await;
                    verifier.refreshing.store(false, Ordering::Release);
                });
            }
            return Keys::Held(keys);
        }
        let fetched = self.fetch().await;
        match (self.keys.read().expect("keys lock").clone(), fetched) {
            (Some(keys), _) if fits(&keys) => Keys::Held(keys),
            // The issuer answered and publishes no such key.
            (Some(_), Fetch::Done(_)) => Keys::NoneFits,
            // Not asked again yet (or not answering): the key may be new.
            _ => Keys::Unavailable,
        }
    }

    /// Fetch discovery and the key set, unless one was made less than
    /// [`MIN_FETCH_INTERVAL`] ago. A fetch already running is waited for
    /// at most [`FETCH_WAIT`] (then this one is skipped).
    async fn fetch(&self) -> Fetch {
        let Ok(mut last) = tokio::time::timeout(FETCH_WAIT, self.last_fetch.lock()).await else {
            return Fetch::Skipped;
        };
        if last.is_some_and(|t| t.elapsed() < MIN_FETCH_INTERVAL) {
            return Fetch::Skipped;
        }
        *last = Some(Instant::now());
        let fetched = tokio::time::timeout(FETCH_TIMEOUT, self.fetch_keys())
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {FETCH_TIMEOUT:?}")));
        match fetched {
            Ok(keys) => {
                let count = keys.len();
                *self.keys.write().expect("keys lock") = Some(Arc::new(KeySet {
                    keys,
                    fetched: Instant::now(),
                }));
                Fetch::Done(count)
            }
            Err(e) => {
                tracing::warn!(issuer = %self.settings.issuer, "OIDC issuer keys not fetched: {e}");
                Fetch::Failed
            }
        }
    }

    async fn fetch_keys(&self) -> Result<Vec<SigningKey>, String> {
        let issuer = self.settings.issuer.trim_end_matches('/');
        let discovery = self
            .get_json(&format!("{issuer}/.well-known/openid-configuration"))
            .await?;
        let named = discovery.get("issuer").and_then(Value::as_str).unwrap_or_default();
        if named.trim_end_matches('/') != issuer {
            return Err(format!("the discovery document names issuer '{named}'"));
        }
        let jwks_uri = discovery
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or("the discovery document has no jwks_uri")?;
        let keys = signing_keys(&self.get_json(jwks_uri).await?);
        if keys.is_empty() {
            return Err("the issuer's key set has no signing key of an accepted type".into());
        }
        Ok(keys)
    }

    /// A JSON document of at most [`MAX_DOCUMENT_BYTES`], read as it comes.
    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let mut response = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("GET {url}: status {}", response.status()));
        }
        let too_large = || format!("GET {url}: more than {MAX_DOCUMENT_BYTES} bytes");
        if response.content_length().is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| format!("GET {url}: {e}"))? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| format!("GET {url}: not JSON: {e}"))
    }

    fn principal(&self, claims: &Map<String, Value>) -> Principal {
        let strings = |v: Option<&Value>| -> Vec<String> {
            match v {
                Some(Value::String(s)) => s.split_whitespace().map(str::to_string).collect(),
                Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(str::to_string).collect(),
                _ => Vec::new(),
            }
        };
        let mut groups_at = Some(claims.get(self.settings.groups_claim.as_str()));
        if groups_at.flatten().is_none() {
            // A dotted path into objects, as Keycloak's `realm_access.roles`.
            let mut parts = self.settings.groups_claim.split('.');
            let first = parts.next().and_then(|p| claims.get(p));
            groups_at = Some(parts.try_fold(first, |v, p| Some(v?.get(p))).flatten());
        }
        let mut scopes = strings(claims.get("scope"));
        scopes.extend(strings(claims.get("scp")));
        // A string groups claim names one group ("ocean admins" is not two).
        let groups = match groups_at.flatten() {
            Some(Value::String(group)) => vec![group.clone()],
            other => strings(other),
        };
        Principal {
            subject: claims.get("sub").and_then(Value::as_str).map(str::to_string),
            groups,
            scopes,
            ..Principal::default()
        }
    }
}

/// The keys of a JWK set that can check signatures of an accepted
/// algorithm (encryption keys and keys of other types are passed over).
fn signing_keys(set: &Value) -> Vec<SigningKey> {
    let items = set
        .get("keys")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    items
        .iter()
        .filter(|item| item.get("use").and_then(Value::as_str).is_none_or(|u| u == "sig"))
        .filter_map(|item| {
            let jwk: Jwk = serde_json::from_value(item.clone()).ok()?;
            let algorithm = match item.get("alg").and_then(Value::as_str) {
                None => None,
                Some(name) => Some(name.parse::<Algorithm>().ok().filter(|a| ALGORITHMS.contains(a))?),
            };
            Some(SigningKey {
                id: jwk.common.key_id.clone(),
                algorithm,
                key: DecodingKey::from_jwk(&jwk).ok()?,
            })
        })
        .collect()
}

/// What a client is told of a token that failed (never the token).
fn reason(kind: &jsonwebtoken::errors::ErrorKind) -> &'static str {
    use jsonwebtoken::errors::ErrorKind as K;
    match kind {
        K::ExpiredSignature => "the token has expired",
        K::ImmatureSignature => "the token is not valid yet (nbf)",
        K::InvalidAudience => "the token is for another audience",
        K::InvalidIssuer => "the token is from another issuer",
        K::InvalidSignature => "the token's signature does not verify",
        K::MissingRequiredClaim(_) => "the token lacks exp, iss or aud",
        K::InvalidAlgorithm => "the token's algorithm is not accepted (RS256, ES256 or EdDSA)",
        _ => "the token is not valid",
    }
}
