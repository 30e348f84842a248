"""An identity provider on this machine, for the services' OIDC: a JWKS endpoint publishing one
RSA key, and the signed tokens (JWT) that key makes."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["AUDIENCE", "ISSUER", "IdentityProvider", "identity_provider"]

ISSUER, AUDIENCE = "https://login.example.test/", "data-platform"


@dataclass
class IdentityProvider:
    key: Any
    """The private key its tokens are signed with."""
    jwks_url: str

    def token(self, name: str, groups: list[str], key: Any = None, **claims: Any) -> str:
        """A token of ``name`` in ``groups``, valid five minutes (``claims`` override)."""
        import jwt

        payload = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": f"00u-{name}",
            "preferred_username": name,
            "groups": groups,
            "exp": int(time.time()) + 300,
        } | claims
        return jwt.encode(payload, key or self.key, algorithm="RS256", headers={"kid": "k1"})

    def access(self) -> dict[str, str]:
        """The ``access`` settings that trust it."""
        return {"oidc_issuer": ISSUER, "oidc_audience": AUDIENCE, "oidc_jwks_url": self.jwks_url}


@contextmanager
def identity_provider() -> Iterator[IdentityProvider]:
    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(RSAAlgorithm.to_jwk(key.public_key())) | {"kid": "k1", "use": "sig"}
    body = json.dumps({"keys": [public]}).encode()

    class Keys(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Keys)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield IdentityProvider(key, f"http://127.0.0.1:{server.server_port}/keys")
    finally:
        server.shutdown()
