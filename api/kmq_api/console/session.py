"""Console sessions: an API key logs in, a signed cookie follows (no server-side store, so any replica serves it).

The cookie names the key by its fingerprint, never the key itself; each request looks the fingerprint up in the
configuration again, so a key removed from it (or moved between read-only and admin) takes effect at once."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

from pydantic import SecretStr

from kmq_api.config import ApiConfig

COOKIE = "kmq_console"
LOGIN_COOKIE = "kmq_console_login"  # the login form's nonce: its CSRF token is bound to it
LOGIN_TTL_S = 3600
SESSION_TTL_MS = 8 * 3600 * 1000
ANONYMOUS = "anonymous"  # the name of every session of an API served without keys (read-only)


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who is logged in: the key's name (`admin-…` or `read-…` and a fingerprint), its rights, the form token."""

    name: str
    admin: bool
    csrf: str
    expires_ms: int


def fingerprint(key: SecretStr) -> str:
    return hashlib.sha256(key.get_secret_value().encode()).hexdigest()[:12]


def find_key(config: ApiConfig, offered: str) -> tuple[str, bool] | None:
    """(fingerprint, admin) of the configured key equal to `offered` (compared in constant time), or None."""
    found: tuple[str, bool] | None = (ANONYMOUS, False) if config.allow_anonymous else None
    for keys, admin in ((config.api_keys, False), (config.admin_keys, True)):
        for key in keys:
            if hmac.compare_digest(offered.encode(), key.get_secret_value().encode()):
                found = (fingerprint(key), admin)
    return found


class SessionSigner:
    """Signs and checks session cookies with a key derived from the receipt secret (shared by every replica)."""

    def __init__(self, config: ApiConfig) -> None:
        self._config = config
        secret = config.receipt_secret.get_secret_value().encode()
        self._key = hmac.new(secret, b"kmq-console-session", hashlib.sha256).digest()

    def issue(self, key_fingerprint: str, now_ms: int) -> str:
        body = {"k": key_fingerprint, "c": secrets.token_urlsafe(24), "e": now_ms + SESSION_TTL_MS}
        payload = base64.urlsafe_b64encode(json.dumps(body).encode()).decode()
        return f"{payload}.{self._sign(payload)}"

    def login_token(self, nonce: str) -> str:
        """The login form's CSRF token for the nonce of the visitor's login cookie: a page of another site can
        neither read the token nor compute it for the cookie the browser holds."""
        return hmac.new(self._key, f"login:{nonce}".encode(), hashlib.sha256).hexdigest()

    def login_token_valid(self, nonce: str | None, token: str) -> bool:
        """Whether `token` is the login form's token for the login cookie's `nonce` (a missing nonce: no)."""
        if not nonce:
            return False
        return hmac.compare_digest(token.encode(), self.login_token(nonce).encode())

    def viewer(self, cookie: str | None, now_ms: int) -> Viewer | None:
        """The session's viewer, or None when the cookie is missing, forged, expired or its key is gone."""
        if not cookie or "." not in cookie:
            return None
        payload, signature = cookie.rsplit(".", 1)
        if not hmac.compare_digest(signature, self._sign(payload)):
            return None
        try:
            body = json.loads(base64.urlsafe_b64decode(payload))
            key, csrf, expires_ms = str(body["k"]), str(body["c"]), int(body["e"])
        except (ValueError, KeyError, TypeError):
            return None
        role = self._role(key)
        if role is None or expires_ms <= now_ms:
            return None
        return Viewer(f"{'admin' if role else 'read'}-{key}", role, csrf, expires_ms)

    def _role(self, key_fingerprint: str) -> bool | None:
        if any(fingerprint(key) == key_fingerprint for key in self._config.admin_keys):
            return True
        if any(fingerprint(key) == key_fingerprint for key in self._config.api_keys):
            return False
        if key_fingerprint == ANONYMOUS and self._config.allow_anonymous:
            return False
        return None

    def _sign(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()
