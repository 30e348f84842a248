"""An identity provider's tokens: verified against its published keys, claims read."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from access.directory import Directory
from core.settings import AccessSettings, Settings

ISSUER, AUDIENCE = "https://login.example.test/", "data-platform"


@pytest.fixture(scope="module")
def provider():
    """A JWKS endpoint on this machine publishing one RSA key; the key to sign with."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(RSAAlgorithm.to_jwk(key.public_key())) | {"kid": "k1", "use": "sig"}
    body = json.dumps({"keys": [public]}).encode()

    class Keys(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Keys)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield key, f"http://127.0.0.1:{server.server_port}/keys"
    server.shutdown()


def _directory(jwks_url: str) -> Directory:
    access = AccessSettings(oidc_issuer=ISSUER, oidc_audience=AUDIENCE, oidc_jwks_url=jwks_url)
    return Directory(Settings(access=access))


def _token(key, **claims) -> str:
    payload = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "00u1",
        "preferred_username": "ana",
        "groups": ["shop-data", "unknown-team"],
        "exp": int(time.time()) + 300,
    } | claims
    return jwt.encode(payload, key, algorithm="RS256", headers={"kid": "k1"})


def test_a_signed_token_of_the_issuer_proves_the_name_and_teams_its_claims_say(provider):
    key, url = provider
    found = _directory(url).identify(_token(key))
    assert found is not None
    assert (found.name, found.source) == ("ana", "oidc")
    assert found.teams == {"shop-data", "unknown-team"}  # an undeclared team grants nothing


def test_an_expired_foreign_or_unsigned_token_is_nobody(provider):
    key, url = provider
    directory = _directory(url)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = {
        "expired": _token(key, exp=int(time.time()) - 5),
        "another issuer": _token(key, iss="https://evil.example.test/"),
        "another audience": _token(key, aud="someone-else"),
        "another key": _token(other),
        "no signature": jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "x"}, None, "none"),
        "a shared secret": jwt.encode(
            {"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": int(time.time()) + 60},
            "secret-guessed-from-the-public-key!",
            algorithm="HS256",
            headers={"kid": "k1"},
        ),
    }
    for why, token in refused.items():
        assert directory.identify(token) is None, why


def test_settings_refuse_half_an_oidc_setup_and_symmetric_algorithms():
    with pytest.raises(ValueError, match="go together"):
        AccessSettings(oidc_issuer=ISSUER)
    with pytest.raises(ValueError, match="public-key signatures only"):
        AccessSettings(oidc_issuer=ISSUER, oidc_jwks_url="http://x/", oidc_algorithms=("HS256",))
