//! Identity and permissions (contract 4.4) over HTTP: API keys both ways,
//! the legacy dataset token, each grant kind, hidden datasets, rate limits,
//! and OpenID Connect tokens checked against an issuer served here (its
//! discovery document and key set), with rotation and an issuer that is
//! down. `tests/identity/` does the same against a real OpenID provider.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use base64::Engine as _;
use common::{client, config, Server};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::header;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use zarr_serve::config::{ApiKeyConfig, Config, OidcConfig};

const NODE: &str = "/v1/datasets/sample/nodes/temperature";
const AUDIENCE: &str = "zarr-serve";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A signing key of the test issuer and its public JWK.
struct Key {
    kid: String,
    alg: Algorithm,
    encoding: EncodingKey,
    jwk: Value,
}

impl Key {
    fn ed25519(kid: &str) -> Key {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        Key {
            kid: kid.into(),
            alg: Algorithm::EdDSA,
            encoding: EncodingKey::from_ed_der(pkcs8.as_ref()),
            jwk: json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "use": "sig", "alg": "EdDSA",
                        "x": b64(pair.public_key().as_ref())}),
        }
    }

    fn es256(kid: &str) -> Key {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        let point = pair.public_key().as_ref();
        Key {
            kid: kid.into(),
            alg: Algorithm::ES256,
            encoding: EncodingKey::from_ec_der(pkcs8.as_ref()),
            jwk: json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
                        "x": b64(&point[1..33]), "y": b64(&point[33..65])}),
        }
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

/// An OpenID issuer: discovery and a key set that the test can change.
struct Issuer {
    url: String,
    keys: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<Mutex<u32>>,
    _task: tokio::task::JoinHandle<()>,
}

impl Issuer {
    async fn start_on(listener: tokio::net::TcpListener, keys: Vec<Value>) -> Issuer {
        let url = format!("http://{}", listener.local_addr().unwrap());
        let keys = Arc::new(Mutex::new(keys));
        let fetches = Arc::new(Mutex::new(0));
        let (set, count, issuer) = (keys.clone(), fetches.clone(), url.clone());
        let app = axum::Router::new()
            .route(
                "/.well-known/openid-configuration",
                axum::routing::get(move || {
                    let issuer = issuer.clone();
                    async move { axum::Json(json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")})) }
                }),
            )
            .route(
                "/jwks",
                axum::routing::get(move || {
                    *count.lock().unwrap() += 1;
                    let keys = set.lock().unwrap().clone();
                    async move { axum::Json(json!({"keys": keys})) }
                }),
            );
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Issuer {
            url,
            keys,
            fetches,
            _task: task,
        }
    }

    async fn start(keys: Vec<Value>) -> Issuer {
        Issuer::start_on(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(), keys).await
    }

    fn claims(&self, sub: &str, extra: Value) -> Value {
        let now = jsonwebtoken::get_current_timestamp();
        let mut claims = json!({"iss": self.url, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 600});
        for (k, v) in extra.as_object().unwrap() {
            claims[k] = v.clone();
        }
        claims
    }
}

fn hashed(key: &str) -> ApiKeyConfig {
    ApiKeyConfig {
        sha256: hex::encode(Sha256::digest(key.as_bytes())),
    }
}

/// `sample` readable by the grants given, `fixtures` open to anyone.
fn guarded(read: &[&str], oidc_issuer: Option<&str>) -> Config {
    let mut cfg = config();
    let sample = cfg.datasets.get_mut("sample").unwrap();
    sample.read = Some(read.iter().map(|g| g.to_string()).collect());
    cfg.auth.api_keys.insert("pipeline".into(), hashed("pipeline-key-1"));
    cfg.auth.api_keys.insert("other".into(), hashed("other-key-2"));
    cfg.auth.oidc = oidc_issuer.map(|issuer| OidcConfig {
        issuer: issuer.into(),
        audience: AUDIENCE.into(),
        groups_claim: "realm_access.roles".into(),
    });
    cfg
}

async fn status(server: &Server, path: &str, auth: Option<(&str, &str)>) -> reqwest::Response {
    let mut request = client().get(server.url(path));
    if let Some((name, value)) = auth {
        request = request.header(name, value);
    }
    request.send().await.unwrap()
}

fn bearer(token: &str) -> Option<(&'static str, String)> {
    Some(("authorization", format!("Bearer {token}")))
}

/// The names `/v1/datasets` lists.
async fn listed(server: &Server, auth: Option<(&'static str, String)>) -> Vec<String> {
    let auth = auth.as_ref().map(|(n, v)| (*n, v.as_str()));
    let body = status(server, "/v1/datasets", auth)
        .await
        .json::<Value>()
        .await
        .unwrap();
    let names = body["datasets"].as_array().unwrap().iter();
    names.map(|d| d["name"].as_str().unwrap().to_string()).collect()
}

async fn code(server: &Server, path: &str, auth: Option<(&'static str, String)>) -> u16 {
    let auth = auth.as_ref().map(|(n, v)| (*n, v.as_str()));
    status(server, path, auth).await.status().as_u16()
}

#[tokio::test]
async fn api_keys_work_both_ways_and_only_with_their_grant() {
    let server = Server::start(guarded(&["key:pipeline"], None)).await;
    assert_eq!(
        code(&server, NODE, Some(("x-api-key", "pipeline-key-1".into()))).await,
        200
    );
    assert_eq!(code(&server, NODE, bearer("pipeline-key-1")).await, 200);
    // Another key: known, without the grant.
    assert_eq!(
        code(&server, NODE, Some(("x-api-key", "other-key-2".into()))).await,
        403
    );
    // A credential that is nothing known: 401 invalid_token (a dataset
    // with a legacy token keeps part 1's 403, below).
    let unknown = status(&server, NODE, Some(("authorization", "Bearer not-a-key"))).await;
    assert_eq!(unknown.status(), 401);
    let challenge = unknown.headers()[header::WWW_AUTHENTICATE].to_str().unwrap();
    assert!(challenge.starts_with("Bearer error=\"invalid_token\""), "{challenge}");
    let anonymous = status(&server, NODE, None).await;
    assert_eq!(anonymous.status(), 401);
    assert_eq!(anonymous.headers()[header::WWW_AUTHENTICATE], "Bearer");
    // The open dataset stays open, whatever the credential.
    let open = "/v1/datasets/fixtures/nodes";
    assert_eq!(code(&server, open, None).await, 200);
    assert_eq!(code(&server, open, bearer("not-a-key")).await, 200);
}

/// Answers that depend on credentials are never kept by a shared cache.
#[tokio::test]
async fn answers_for_some_callers_only_are_private() {
    let server = Server::start(guarded(&["key:pipeline"], None)).await;
    let header_of = |r: &reqwest::Response, name| {
        r.headers()
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let guarded = status(&server, NODE, Some(("x-api-key", "pipeline-key-1"))).await;
    assert_eq!(guarded.status(), 200);
    assert_eq!(header_of(&guarded, header::CACHE_CONTROL), "private, max-age=60");
    assert!(header_of(&guarded, header::VARY).contains("authorization, x-api-key"));
    let listing = status(&server, "/v1/datasets", None).await;
    assert!(header_of(&listing, header::CACHE_CONTROL).starts_with("private"));
    let open = status(&server, "/v1/datasets/fixtures/nodes", None).await;
    assert_eq!(header_of(&open, header::CACHE_CONTROL), "max-age=60");
    assert!(!header_of(&open, header::VARY).contains("authorization"));
}

/// `authenticated` is a valid token or API key: another dataset's token
/// is a read key of that dataset, not an identity.
#[tokio::test]
async fn a_dataset_token_is_not_authenticated_elsewhere() {
    let mut cfg = guarded(&["authenticated"], None);
    cfg.datasets.get_mut("fixtures").unwrap().token = Some("fixtures-token".into());
    let server = Server::start(cfg).await;
    assert_eq!(
        code(&server, "/v1/datasets/fixtures/nodes", bearer("fixtures-token")).await,
        200
    );
    assert_eq!(code(&server, NODE, bearer("fixtures-token")).await, 403);
    assert_eq!(code(&server, NODE, bearer("other-key-2")).await, 200);
}

#[tokio::test]
async fn a_dataset_token_stays_a_read_key_beside_grants() {
    let mut cfg = guarded(&["key:other"], None);
    cfg.datasets.get_mut("sample").unwrap().token = Some("legacy-token".into());
    let server = Server::start(cfg).await;
    assert_eq!(code(&server, NODE, bearer("legacy-token")).await, 200);
    assert_eq!(
        code(&server, NODE, Some(("x-api-key", "legacy-token".into()))).await,
        200
    );
    assert_eq!(code(&server, NODE, bearer("other-key-2")).await, 200);
    assert_eq!(code(&server, NODE, bearer("pipeline-key-1")).await, 403);
    assert_eq!(code(&server, NODE, bearer("wrong")).await, 403);
}

/// A dataset the request may not read is in no listing: `/v1/datasets`,
/// the explorer's `/`; its WMS capabilities and EDR collections refuse.
#[tokio::test]
async fn unreadable_datasets_are_left_out_of_every_listing() {
    let server = Server::start(guarded(&["key:pipeline"], None)).await;
    assert_eq!(listed(&server, None).await, ["fixtures"]);
    assert_eq!(listed(&server, bearer("other-key-2")).await, ["fixtures"]);
    assert_eq!(listed(&server, bearer("pipeline-key-1")).await, ["fixtures", "sample"]);
    let page = |key: Option<&'static str>| {
        let mut request = client().get(server.url("/")).header(header::ACCEPT, "text/html");
        if let Some(key) = key {
            request = request.header("x-api-key", key);
        }
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    assert!(!page(None).await.contains("/explore/sample\""));
    assert!(page(Some("pipeline-key-1")).await.contains("/explore/sample\""));
    for path in [
        "/v1/datasets/sample/wms?SERVICE=WMS&REQUEST=GetCapabilities",
        "/v1/datasets/sample/edr/collections",
        "/v1/datasets/sample/tiles/tileMatrixSets",
        "/v1/datasets/sample/dap.das",
        "/v1/datasets/sample/zarr/zarr.json",
        "/v1/datasets/sample/data/temperature?format=json",
    ] {
        assert_eq!(code(&server, path, None).await, 401, "{path}");
        assert_eq!(code(&server, path, bearer("pipeline-key-1")).await, 200, "{path}");
    }
    // WMS answers in its own form, with the challenge a client prompts on.
    let wms = status(
        &server,
        "/v1/datasets/sample/wms?SERVICE=WMS&REQUEST=GetCapabilities",
        None,
    )
    .await;
    assert_eq!(wms.headers()[header::WWW_AUTHENTICATE], "Bearer");
    assert!(wms.text().await.unwrap().contains("<ServiceExceptionReport"));
}

#[tokio::test]
async fn callers_are_rate_limited_each_on_their_own() {
    let mut cfg = guarded(&["*"], None);
    cfg.rate_limit_per_second = Some(0.5);
    cfg.rate_limit_burst = Some(3);
    let server = Server::start(cfg).await;
    for _ in 0..3 {
        assert_eq!(code(&server, NODE, None).await, 200);
    }
    let limited = status(&server, NODE, None).await;
    assert_eq!(limited.status(), 429);
    let retry: u64 = limited.headers()[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry), "Retry-After {retry}");
    assert_eq!(limited.headers()[header::CONTENT_TYPE], "application/problem+json");
    // Made-up credentials are no way around it: they count as their address.
    for made_up in ["garbage-1", "garbage-2", "eyJhbGciOiJub25lIn0.e30."] {
        assert_eq!(code(&server, NODE, bearer(made_up)).await, 429, "{made_up}");
    }
    // A key is its own caller; health probes are never limited.
    assert_eq!(code(&server, NODE, bearer("pipeline-key-1")).await, 200);
    assert_eq!(code(&server, "/healthz", None).await, 200);
}

#[tokio::test]
async fn oidc_tokens_are_verified_and_each_grant_kind_holds() {
    let key = Key::ed25519("k1");
    let issuer = Issuer::start(vec![key.jwk.clone()]).await;
    let grants = ["sub:alice", "group:ocean", "scope:zarr.read"];
    let server = Server::start(guarded(&grants, Some(&issuer.url))).await;
    let token = |sub: &str, extra: Value| key.sign(&issuer.claims(sub, extra));
    assert_eq!(code(&server, NODE, bearer(&token("alice", json!({})))).await, 200);
    let roles = json!({"realm_access": {"roles": ["ocean"]}});
    assert_eq!(code(&server, NODE, bearer(&token("bob", roles))).await, 200);
    assert_eq!(
        code(
            &server,
            NODE,
            bearer(&token("bob", json!({"scope": "openid zarr.read"})))
        )
        .await,
        200
    );
    assert_eq!(
        code(&server, NODE, bearer(&token("bob", json!({"scp": ["zarr.read"]})))).await,
        200
    );
    assert_eq!(
        code(&server, NODE, bearer(&token("bob", json!({"scope": "openid"})))).await,
        403
    );

    let now = jsonwebtoken::get_current_timestamp();
    let invalid = [
        ("expired", token("alice", json!({"exp": now - 120}))),
        ("not yet", token("alice", json!({"nbf": now + 600}))),
        ("audience", token("alice", json!({"aud": "another-service"}))),
        ("issuer", token("alice", json!({"iss": "https://elsewhere.example"}))),
        ("no exp", {
            let mut claims = issuer.claims("alice", json!({}));
            claims.as_object_mut().unwrap().remove("exp");
            key.sign(&claims)
        }),
        ("other key", Key::ed25519("k1").sign(&issuer.claims("alice", json!({})))),
        ("alg none", {
            let header = b64(br#"{"alg":"none","typ":"JWT","kid":"k1"}"#);
            format!(
                "{header}.{}.",
                b64(issuer.claims("alice", json!({})).to_string().as_bytes())
            )
        }),
        ("HS256", {
            let mut header = Header::new(Algorithm::HS256);
            header.kid = Some("k1".into());
            let secret = EncodingKey::from_secret(key.jwk["x"].as_str().unwrap().as_bytes());
            jsonwebtoken::encode(&header, &issuer.claims("alice", json!({})), &secret).unwrap()
        }),
    ];
    for (what, token) in invalid {
        let response = status(&server, NODE, Some(("authorization", &format!("Bearer {token}")))).await;
        assert_eq!(response.status(), 401, "{what}");
        let challenge = response.headers()[header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            challenge.starts_with("Bearer error=\"invalid_token\""),
            "{what}: {challenge}"
        );
        assert!(!response.text().await.unwrap().contains(&token), "{what}");
    }
    // A key of another family under a published kid fits no key.
    let mismatched = {
        let es = Key::es256("k1");
        es.sign(&issuer.claims("alice", json!({})))
    };
    assert!([401, 503].contains(&code(&server, NODE, bearer(&mismatched)).await));
    // A token remembered as verified still expires (60 s of leeway).
    let nearly = token("alice", json!({"exp": jsonwebtoken::get_current_timestamp() - 57}));
    assert_eq!(code(&server, NODE, bearer(&nearly)).await, 200);
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(code(&server, NODE, bearer(&nearly)).await, 401);
    // A listing shows what the token may read, and an invalid token sees
    // what anonymous sees.
    assert_eq!(listed(&server, bearer(&token("alice", json!({})))).await.len(), 2);
    let expired = token("alice", json!({"exp": now - 120}));
    assert_eq!(listed(&server, bearer(&expired)).await, ["fixtures"]);
}

#[tokio::test]
async fn rotated_keys_are_fetched_once_for_an_unknown_kid() {
    let first = Key::es256("2026-a");
    let issuer = Issuer::start(vec![first.jwk.clone()]).await;
    let server = Server::start(guarded(&["authenticated"], Some(&issuer.url))).await;
    let claims = issuer.claims("svc", json!({}));
    assert_eq!(code(&server, NODE, bearer(&first.sign(&claims))).await, 200);
    let fetched = *issuer.fetches.lock().unwrap();
    // Rotation: the issuer signs with a new key and withdraws the old one.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let second = Key::ed25519("2026-b");
    *issuer.keys.lock().unwrap() = vec![second.jwk.clone()];
    assert_eq!(code(&server, NODE, bearer(&second.sign(&claims))).await, 200);
    assert_eq!(*issuer.fetches.lock().unwrap(), fetched + 1);
    // Made-up key ids cost the issuer at most one fetch per interval: right
    // after a fetch they are "try again" (503), never accepted; so is a
    // new token of the withdrawn key.
    for n in 0..20 {
        let stranger = Key::ed25519(&format!("made-up-{n}"));
        assert_eq!(code(&server, NODE, bearer(&stranger.sign(&claims))).await, 503);
    }
    let fresh = issuer.claims("svc-2", json!({}));
    assert_eq!(code(&server, NODE, bearer(&first.sign(&fresh))).await, 503);
    assert_eq!(*issuer.fetches.lock().unwrap(), fetched + 1);
    // Once the keys may be asked for again: refused for good.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(code(&server, NODE, bearer(&first.sign(&fresh))).await, 401);
    assert_eq!(code(&server, NODE, bearer(&second.sign(&fresh))).await, 200);
    assert_eq!(*issuer.fetches.lock().unwrap(), fetched + 2);
}

#[tokio::test]
async fn an_unreachable_issuer_answers_503_until_it_is_back() {
    // A port with nothing listening on it (yet).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let issuer_url = format!("http://{addr}");
    let server = Server::start(guarded(&["authenticated"], Some(&issuer_url))).await;
    let key = Key::ed25519("k");
    let now = jsonwebtoken::get_current_timestamp();
    let claims = json!({"iss": issuer_url, "aud": AUDIENCE, "sub": "svc", "exp": now + 600});
    let token = key.sign(&claims);
    let down = status(&server, NODE, Some(("authorization", &format!("Bearer {token}")))).await;
    assert_eq!(down.status(), 503);
    assert!(down.headers().contains_key(header::RETRY_AFTER));
    // The service itself is up, and public datasets answer.
    assert_eq!(code(&server, "/healthz", None).await, 200);
    assert_eq!(code(&server, "/v1/datasets/fixtures/nodes", bearer(&token)).await, 200);
    // The port is from the ephemeral range: another connection may hold
    // it as its own end for a moment.
    let mut bound = None;
    for _ in 0..100 {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => {
                bound = Some(listener);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let _issuer = Issuer::start_on(bound.expect("the issuer's port comes free"), vec![key.jwk.clone()]).await;
    let mut last = 0;
    for _ in 0..40 {
        last = code(&server, NODE, bearer(&token)).await;
        if last == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(last, 200, "tokens verify once the issuer answers");
}
