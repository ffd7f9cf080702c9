"""Identity against a real OpenID provider (contract 4.4).

node-oidc-provider issues JWT access tokens with the client-credentials
grant; zarr-serve checks them against the provider's discovery document and
key set. Covered: each grant kind (sub, group from a custom claim, scope,
authenticated, API keys both ways), expiry, wrong audience and issuer,
forged `alg: none` and HS256 tokens, key rotation, an unreachable issuer,
hidden datasets in every listing, 429s, and the values read with a token
against zarr-python's own read of the same array.

    ZS_SERVER_BIN=target/ci/zarr-serve OIDC_PROVIDER_MODULES=.cache/oidc/node_modules \\
        .venv-test/bin/python -m pytest tests/identity
"""
import base64
import hashlib
import json
import os
import socket
import subprocess
import tempfile
import time

import jwt
import numpy as np
import pytest
import requests
import zarr
from cryptography.hazmat.primitives.asymmetric import rsa

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.environ.get("ZS_SERVER_BIN", os.path.join(ROOT, "target", "ci", "zarr-serve"))
MODULES = os.environ.get("OIDC_PROVIDER_MODULES", os.path.join(ROOT, ".cache", "oidc", "node_modules"))
SAMPLE = os.path.join(ROOT, "sample", "sample.zarr")
NODE = "/v1/datasets/ocean/nodes/temperature"
API_KEY = "pipeline-" + "k" * 24


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            requests.get(url, timeout=1)
            return
        except requests.RequestException:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer in {timeout} s")


def rsa_jwk(kid):
    """A private RSA signing key as a JWK, and the key object."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key))
    jwk.update(kid=kid, use="sig", alg="RS256")
    return jwk, key


class Provider:
    """node-oidc-provider on `port`, signing with the keys of `jwks`."""

    def __init__(self, port, jwks, tmp):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        path = os.path.join(tmp, f"jwks-{port}-{time.time_ns()}.json")
        with open(path, "w") as f:
            json.dump({"keys": jwks}, f)
        env = dict(os.environ, OIDC_PROVIDER_MODULES=MODULES)
        self.log = open(os.path.join(tmp, f"provider-{port}.log"), "ab")
        self.proc = subprocess.Popen(["node", os.path.join(HERE, "provider.mjs"), str(port), path],
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(f"{self.url}/.well-known/openid-configuration")

    def token(self, client, secret, resource="https://zarr.example.org/", scope=None):
        data = {"grant_type": "client_credentials", "resource": resource}
        if scope:
            data["scope"] = scope
        r = requests.post(f"{self.url}/token", data=data, auth=(client, secret), timeout=10)
        assert r.status_code == 200, r.text
        return r.json()["access_token"]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


class Server:
    def __init__(self, tmp, issuer, rate=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        key_hash = hashlib.sha256(API_KEY.encode()).hexdigest()
        limits = f"rate_limit_per_second = {rate}\nrate_limit_burst = 2\n" if rate else ""
        config = f"""
listen = "127.0.0.1:{self.port}"
{limits}
[auth.oidc]
issuer = "{issuer}"
audience = "zarr-serve"

[auth.api_keys.pipeline]
sha256 = "{key_hash}"

[datasets.public]
url = "{SAMPLE}"

[datasets.ocean]
url = "{SAMPLE}"
read = ["group:ocean", "sub:reader-bot", "key:pipeline"]

[datasets.scoped]
url = "{SAMPLE}"
read = ["scope:zarr.write"]

[datasets.members]
url = "{SAMPLE}"
read = ["authenticated"]
"""
        path = os.path.join(tmp, f"config-{self.port}.toml")
        with open(path, "w") as f:
            f.write(config)
        self.log = open(os.path.join(tmp, f"server-{self.port}.log"), "ab")
        self.proc = subprocess.Popen([BIN, "--config", path], stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(f"{self.url}/healthz")

    def get(self, path, token=None, headers=None):
        headers = dict(headers or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return requests.get(self.url + path, headers=headers, timeout=30)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture(scope="module")
def tmp():
    with tempfile.TemporaryDirectory() as d:
        yield d


@pytest.fixture(scope="module")
def keys():
    return [rsa_jwk("key-2026-1")]


@pytest.fixture(scope="module")
def provider(tmp, keys):
    p = Provider(free_port(), [k[0] for k in keys], tmp)
    yield p
    p.stop()


@pytest.fixture(scope="module")
def server(tmp, provider):
    s = Server(tmp, provider.url)
    yield s
    s.stop()


def names(response):
    assert response.status_code == 200, response.text
    return sorted(d["name"] for d in response.json()["datasets"])


def test_each_grant_kind_against_real_tokens(server, provider):
    ocean = provider.token("ocean-pipeline", "ocean-secret", scope="zarr.read zarr.write")
    land = provider.token("land-pipeline", "land-secret", scope="zarr.read")
    bot = provider.token("reader-bot", "reader-secret")
    claims = jwt.decode(ocean, options={"verify_signature": False})
    assert claims["aud"] == "zarr-serve" and claims["groups"] == ["ocean"] and claims["sub"] == "ocean-pipeline"

    assert server.get(NODE, ocean).status_code == 200          # group:ocean
    assert server.get(NODE, bot).status_code == 200            # sub:reader-bot
    assert server.get(NODE, land).status_code == 403           # known, no grant
    assert server.get("/v1/datasets/scoped/nodes", ocean).status_code == 200  # scope:zarr.write
    assert server.get("/v1/datasets/scoped/nodes", land).status_code == 403
    assert server.get("/v1/datasets/members/nodes", land).status_code == 200  # authenticated
    assert server.get(NODE, headers={"X-API-Key": API_KEY}).status_code == 200
    assert server.get(NODE, API_KEY).status_code == 200
    r = server.get(NODE)
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    assert server.get("/v1/datasets/public/nodes").status_code == 200


def test_values_read_with_a_token_match_zarr_python(server, provider):
    token = provider.token("ocean-pipeline", "ocean-secret")
    r = server.get("/v1/datasets/ocean/data/temperature?format=npy", token)
    assert r.status_code == 200
    path = os.path.join(tempfile.mkdtemp(), "a.npy")
    with open(path, "wb") as f:
        f.write(r.content)
    expected = zarr.open_array(os.path.join(SAMPLE, "temperature"), mode="r")[...]
    np.testing.assert_array_equal(np.load(path), expected)


def test_bad_tokens_are_401_invalid_token(server, provider, keys):
    jwk, private = keys[0]
    now = int(time.time())
    good = {"iss": provider.url, "aud": "zarr-serve", "sub": "reader-bot", "iat": now, "exp": now + 300}
    forged = {
        # Signed with the provider's own key, but expired beyond the leeway.
        "expired": jwt.encode({**good, "exp": now - 120}, private, "RS256", headers={"kid": jwk["kid"]}),
        "not yet valid": jwt.encode({**good, "nbf": now + 600}, private, "RS256", headers={"kid": jwk["kid"]}),
        "wrong issuer": jwt.encode({**good, "iss": "http://127.0.0.1:1"}, private, "RS256", headers={"kid": jwk["kid"]}),
        # A real token of the provider for another resource.
        "wrong audience": provider.token("reader-bot", "reader-secret", resource="https://other.example.org/"),
        "alg none": jwt.encode(good, None, "none", headers={"kid": jwk["kid"]}),
        # HMAC keyed with the public modulus: the classic confusion attack.
        "HS256": jwt.encode(good, jwk["n"].encode() * 2, "HS256", headers={"kid": jwk["kid"]}),
        "signed by a stranger": jwt.encode(good, rsa_jwk("x")[1], "RS256", headers={"kid": jwk["kid"]}),
    }
    for what, token in forged.items():
        r = server.get(NODE, token)
        assert r.status_code == 401, what
        assert r.headers["WWW-Authenticate"].startswith('Bearer error="invalid_token"'), what
        assert token not in r.text, what
        assert r.headers["Content-Type"] == "application/problem+json"
    # The same claims, well signed: the provider's key does verify.
    ok = jwt.encode(good, private, "RS256", headers={"kid": jwk["kid"]})
    assert server.get(NODE, ok).status_code == 200


def test_unreadable_datasets_are_hidden_from_every_listing(server, provider):
    land = provider.token("land-pipeline", "land-secret")
    ocean = provider.token("ocean-pipeline", "ocean-secret", scope="zarr.read zarr.write")
    assert names(server.get("/v1/datasets")) == ["public"]
    assert names(server.get("/v1/datasets", land)) == ["members", "public"]
    assert names(server.get("/v1/datasets", ocean)) == ["members", "ocean", "public", "scoped"]
    html = server.get("/", headers={"Accept": "text/html"}).text
    assert "/explore/public" in html and "/explore/ocean" not in html
    html = server.get("/", ocean, headers={"Accept": "text/html"}).text
    assert "/explore/ocean" in html
    for path in ["/v1/datasets/ocean/wms?SERVICE=WMS&REQUEST=GetCapabilities",
                 "/v1/datasets/ocean/edr/collections", "/v1/datasets/ocean/dap.dds"]:
        assert server.get(path).status_code == 401, path
        assert server.get(path, land).status_code == 403, path
        assert server.get(path, ocean).status_code == 200, path


def test_key_rotation_is_followed(tmp, keys):
    """The provider restarts signing with a new key: tokens with the new
    kid verify after one refetch, without restarting zarr-serve."""
    port = free_port()
    first = Provider(port, [keys[0][0]], tmp)
    server = Server(tmp, first.url)
    try:
        before = first.token("reader-bot", "reader-secret")
        assert server.get(NODE, before).status_code == 200
        first.stop()
        time.sleep(5.5)  # past the service's fewest seconds between two key fetches
        new_key = rsa_jwk("key-2026-2")[0]
        second = Provider(port, [new_key], tmp)  # the old key withdrawn
        try:
            after = second.token("reader-bot", "reader-secret")
            assert jwt.get_unverified_header(after)["kid"] == "key-2026-2"
            assert server.get(NODE, after).status_code == 200
            # A token the withdrawn key signs now (never seen before) is
            # refused once the keys are asked for again.
            jwk, private = keys[0]
            now = int(time.time())
            late = jwt.encode({"iss": first.url, "aud": "zarr-serve", "sub": "late", "exp": now + 300},
                              private, "RS256", headers={"kid": jwk["kid"]})
            assert server.get(NODE, late).status_code == 503  # keys fetched moments ago: try again
            time.sleep(5.5)
            r = server.get(NODE, late)
            assert r.status_code == 401 and "invalid_token" in r.headers["WWW-Authenticate"]
        finally:
            second.stop()
    finally:
        server.stop()


def test_an_unreachable_issuer_gives_503_then_recovers(tmp, keys):
    port = free_port()
    server = Server(tmp, f"http://127.0.0.1:{port}")
    try:
        # A token the provider will issue once it is up, made now with its key.
        jwk, private = keys[0]
        now = int(time.time())
        claims = {"iss": f"http://127.0.0.1:{port}", "aud": "zarr-serve", "sub": "reader-bot", "exp": now + 300}
        token = jwt.encode(claims, private, "RS256", headers={"kid": jwk["kid"]})
        r = server.get(NODE, token)
        assert r.status_code == 503 and "Retry-After" in r.headers
        assert server.get("/healthz").status_code == 200
        assert server.get("/v1/datasets/public/nodes", token).status_code == 200
        provider = Provider(port, [jwk], tmp)
        try:
            deadline = time.time() + 20
            while server.get(NODE, token).status_code != 200:
                assert time.time() < deadline, "tokens never verified after the issuer came back"
                time.sleep(0.5)
        finally:
            provider.stop()
    finally:
        server.stop()


def test_rate_limits_per_principal(tmp, provider):
    server = Server(tmp, provider.url, rate=0.5)
    try:
        codes = [server.get("/v1/datasets/public/nodes").status_code for _ in range(4)]
        assert codes[:2] == [200, 200] and 429 in codes[2:], codes
        r = server.get("/v1/datasets/public/nodes")
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
        token = provider.token("reader-bot", "reader-secret")
        assert server.get("/v1/datasets/public/nodes", token).status_code == 200  # its own budget
        assert server.get("/healthz").status_code == 200
    finally:
        server.stop()
