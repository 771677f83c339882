"""Credentials: signed, expiring statements of who a caller is and what it may do.

A credential is a compact string ``mbc1.<claims>.<signature>``: the claims are a
msgpack map (base64url), the signature an HMAC-SHA256 over ``mbc1.<claims>`` with
the secret named by the claims' key id (``kid``). Agent credentials are signed
with their org's secret, operator credentials with the bus's operator secret, so
one org's secret never signs for another org. Nothing here trusts the claims
before :meth:`Grant.verify` checked the signature; :func:`peek` reads them
unverified, for the client's own defaults only.

Pure Python (no Ray, no I/O).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Any

import msgpack

from memorybus.errors import InvalidRequest, NotAuthenticated
from memorybus.scopes import Context, Level

PREFIX = "mbc1"
#: the longest credential string accepted (a few hundred bytes in practice)
MAX_CREDENTIAL = 8192
RIGHTS = frozenset({"read", "write"})
LEVELS = frozenset(level.value for level in Level)
#: the org field of an operator credential (operators span every org)
OPERATOR_ORG = "*"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class Grant:
    """What a credential says about its holder (its claims).

    ``org``/``user``/``agent``/``session``: the holder's own scope; empty fields
    leave the holder free to name them (a user credential may act in any of that
    user's sessions). ``roles``: the only roles the holder's calls carry.
    ``levels``: the scope levels it may write to (``org``, ``user``, ``agent``,
    ``session``). ``rights``: ``read`` and/or ``write``. ``operator``: the
    operator's credential (every org, operator calls). ``expires``: Unix time.
    ``id``: the credential's id (revocation, audit); ``kid``: the signing key.
    """

    org: str
    user: str = ""
    agent: str = ""
    session: str = ""
    roles: frozenset[str] = frozenset()
    levels: frozenset[str] = LEVELS
    rights: frozenset[str] = RIGHTS
    operator: bool = False
    issued: float = 0.0
    expires: float = 0.0
    id: str = field(default_factory=lambda: secrets.token_hex(12))
    kid: str = ""

    def __post_init__(self) -> None:
        for name in ("roles", "levels", "rights"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
                raise InvalidRequest(name, "must be a collection of non-empty strings")
            object.__setattr__(self, name, frozenset(value))
        if not self.levels <= LEVELS:
            raise InvalidRequest("levels", f"unknown level in {sorted(self.levels - LEVELS)}")
        if not self.rights <= RIGHTS:
            raise InvalidRequest("rights", f"unknown right in {sorted(self.rights - RIGHTS)}")
        if not self.operator:
            # the scope fields are checked as a Context checks them (lengths, separators)
            Context(self.org, self.user, self.agent, self.session, self.roles)

    @property
    def context(self) -> Context:
        """The holder's own context (its default for every call)."""
        return Context(self.org, self.user, self.agent, self.session, self.roles)

    @property
    def principal(self) -> str:
        """The holder's name in provenance and audit: ``org/user/agent[/session]#id``."""
        if self.operator:
            return f"operator#{self.id}"
        parts = [self.org, self.user, self.agent] + ([self.session] if self.session else [])
        return "/".join(parts) + f"#{self.id}"

    def claims(self) -> dict[str, Any]:
        return {"o": self.org, "u": self.user, "a": self.agent, "s": self.session, "r": sorted(self.roles),
                "l": sorted(self.levels), "w": sorted(self.rights), "op": self.operator,
                "iat": self.issued, "exp": self.expires, "id": self.id, "kid": self.kid}  # fmt: skip

    def sign(self, secret: bytes) -> str:
        body = _b64(msgpack.packb(self.claims(), use_bin_type=True))
        return f"{PREFIX}.{body}.{_b64(_mac(secret, body))}"


def _mac(secret: bytes, body: str) -> bytes:
    return hmac.new(secret, f"{PREFIX}.{body}".encode("ascii"), hashlib.sha256).digest()


def _split(token: object) -> tuple[str, str]:
    if not isinstance(token, str) or not token:
        raise NotAuthenticated("no credential")
    if len(token) > MAX_CREDENTIAL:
        raise NotAuthenticated("credential too long")
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != PREFIX:
        raise NotAuthenticated("not a memorybus credential")
    return parts[1], parts[2]


def peek(token: object) -> Grant:
    """The claims of ``token`` WITHOUT checking its signature (the client's defaults
    only: every actor verifies with :func:`verify`). NotAuthenticated when malformed."""
    body, _ = _split(token)
    try:
        c = msgpack.unpackb(_unb64(body), raw=False)
        return Grant(org=c["o"], user=c["u"], agent=c["a"], session=c["s"], roles=frozenset(c["r"]),
                     levels=frozenset(c["l"]), rights=frozenset(c["w"]), operator=bool(c["op"]),
                     issued=float(c["iat"]), expires=float(c["exp"]), id=str(c["id"]), kid=str(c["kid"]))  # fmt: skip
    except (ValueError, TypeError, KeyError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise NotAuthenticated(f"malformed credential ({type(exc).__name__})") from None
    except InvalidRequest as exc:
        raise NotAuthenticated(f"malformed credential ({exc})") from None


def verify(token: object, secret_of: Any, now: float) -> Grant:
    """The grant of ``token`` once its signature, key and expiry check out.

    ``secret_of(kid, org, operator)`` returns the secret that may sign for that key
    (None: unknown, retired, or a key of another org). Raises NotAuthenticated with
    the reason; the signature is compared in constant time and checked before any
    claim is trusted.
    """
    body, sig = _split(token)
    grant = peek(token)
    secret = secret_of(grant.kid, grant.org, grant.operator)
    if secret is None:
        raise NotAuthenticated("credential signed with an unknown or retired key")
    try:
        given = _unb64(sig)
    except ValueError:
        raise NotAuthenticated("malformed signature") from None
    if not hmac.compare_digest(given, _mac(secret, body)):
        raise NotAuthenticated("bad signature")
    if not grant.expires or now >= grant.expires:
        raise NotAuthenticated("credential expired")
    if grant.issued > now + 300:
        raise NotAuthenticated("credential issued in the future")
    return grant
