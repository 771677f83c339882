"""Who may look: the operator's credential, checked on every data request.

A request carries the credential as ``Authorization: Bearer <token>`` or in the
``memorybus_ui`` cookie that ``POST /api/login`` sets (HttpOnly, SameSite=Strict) once
it has checked the token. A bus with a key ring (credentials mode) accepts any valid
operator credential (signature, key, expiry and revocation checked by the bus's own
:class:`~memorybus.auth.Gatekeeper`; an agent's credential is refused); ``memorybus
ui`` mints one (24 h) and prints it at start. Without a key ring (trusted mode) the
token is a random secret made at start. Nothing here ever lets a request through
without a token that checks out.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from typing import Any

from memorybus.errors import MemoryBusError

COOKIE = "memorybus_ui"


class OperatorGuard:
    """``allows(token)``: True only for a credential the operator holds; ``token``:
    one such credential, to print at start."""

    def __init__(self, check: Callable[[str], bool], token: str) -> None:
        self._check = check
        self.token = token

    def allows(self, token: str | None) -> bool:
        if not token or len(token) > 8192:
            return False
        try:
            return self._check(token)
        except MemoryBusError:  # malformed, forged, expired, revoked, an agent's
            return False

    @classmethod
    def for_config(cls, config: Any) -> OperatorGuard:
        """The guard of the bus ``config`` describes: its key ring's operator
        credentials (the operator key is made if the ring has none yet), or a random
        token in trusted mode."""
        if getattr(config, "auth", "credentials") == "trusted":
            return cls.secret()
        from memorybus.auth import OPERATOR_ORG, KeyRing, gatekeeper_for, open_keys

        kv = open_keys(config)
        try:
            KeyRing.load(kv).ensure(OPERATOR_ORG)
        finally:
            kv.close()
        gate = gatekeeper_for(config)

        def check(token: str) -> bool:
            return gate.operator(token, "ui") is not None

        return cls(check, gate.service_token())

    @classmethod
    def secret(cls, token: str | None = None) -> OperatorGuard:
        """A guard accepting one secret token (made here when not given)."""
        expected = token or secrets.token_urlsafe(32)

        def check(given: str) -> bool:
            return hmac.compare_digest(given.encode(), expected.encode())

        return cls(check, expected)


def request_token(headers: Any, cookies: Any) -> str | None:
    """The token a request carries: its bearer token, else its cookie."""
    auth = headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return str(value.strip())
    cookie = cookies.get(COOKIE)
    return str(cookie) if cookie else None
