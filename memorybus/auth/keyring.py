"""The bus's signing secrets: one operator secret, one or more secrets per org.

Held in a small durable key-value store beside the data (``auth.sqlite`` in the
data directory, mode 0600, for the embedded backend; a Redis hash for the shared
one; see :func:`open_keys`). Whoever can read that store is the operator: the
same holds for the records themselves.

- **Rotation.** :meth:`KeyRing.rotate` adds a new secret for an org and retires the
  older ones after ``grace`` seconds: credentials they signed keep working until
  then and are refused after.
- **Revocation.** :meth:`KeyRing.revoke` records a credential id until its expiry;
  a revoked credential is refused.

The ring is plain data loaded from the store (:meth:`KeyRing.load`); writers
(``ensure_*``, ``rotate``, ``revoke``) write through to it at once.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import msgpack

from memorybus.auth.credential import OPERATOR_ORG
from memorybus.bus.ports import KeyValue
from memorybus.errors import InvalidRequest

_KEY, _REVOKED = "key/", "revoked/"


@dataclass(frozen=True, slots=True)
class Key:
    kid: str
    owner: str  # an org, or OPERATOR_ORG
    secret: bytes
    created: float
    retires: float | None = None  # Unix time from which it no longer verifies

    def active(self, now: float) -> bool:
        return self.retires is None or now < self.retires

    def encode(self) -> bytes:
        return msgpack.packb([self.kid, self.owner, self.secret, self.created, self.retires], use_bin_type=True)

    @classmethod
    def decode(cls, blob: bytes) -> Key:
        kid, owner, secret, created, retires = msgpack.unpackb(blob, raw=False)
        return cls(kid, owner, bytes(secret), float(created), retires)


@dataclass
class KeyRing:
    """The secrets and revocations read from ``kv`` (None: a ring in memory only)."""

    kv: KeyValue | None = None
    keys: dict[str, Key] = field(default_factory=dict)
    revoked: dict[str, float] = field(default_factory=dict)  # credential id -> its expiry

    @classmethod
    def load(cls, kv: KeyValue) -> KeyRing:
        ring = cls(kv)
        for _, v in kv.scan(_KEY):
            key = Key.decode(v)
            ring.keys[key.kid] = key
        for k, v in kv.scan(_REVOKED):
            ring.revoked[k[len(_REVOKED):]] = float(msgpack.unpackb(v))
        return ring

    # ------------------------------------------------------------- reading
    def secret_of(self, kid: str, org: str, operator: bool, now: float | None = None) -> bytes | None:
        """The secret of ``kid`` when it may sign for ``org`` (operator: the operator
        key) and is not retired; None otherwise."""
        key = self.keys.get(kid)
        if key is None or not key.active(time.time() if now is None else now):
            return None
        owner = OPERATOR_ORG if operator else org
        return key.secret if key.owner == owner else None

    def is_revoked(self, credential_id: str) -> bool:
        return credential_id in self.revoked

    def current(self, owner: str, now: float | None = None) -> Key | None:
        """The newest key of ``owner`` that has no retirement date."""
        now = time.time() if now is None else now
        mine = [k for k in self.keys.values() if k.owner == owner and k.retires is None]
        return max(mine, key=lambda k: (k.created, k.kid)) if mine else None

    def orgs(self) -> list[str]:
        return sorted({k.owner for k in self.keys.values() if k.owner != OPERATOR_ORG})

    # ------------------------------------------------------------- writing
    def _put(self, items: dict[str, bytes]) -> None:
        if self.kv is not None:
            self.kv.put_many(items)

    def ensure(self, owner: str) -> Key:
        """The owner's current key, made (and stored) when it has none."""
        key = self.current(owner)
        if key is None:
            key = Key(secrets.token_hex(8), owner, secrets.token_bytes(32), time.time())
            self._put({_KEY + key.kid: key.encode()})
            self.keys[key.kid] = key
        return key

    def rotate(self, owner: str, grace: float = 3600.0) -> Key:
        """A new key for ``owner``; its older keys stop verifying ``grace`` seconds
        from now (0: at once). Returns the new key."""
        if not isinstance(grace, int | float) or isinstance(grace, bool) or not 0 <= grace <= 365 * 86400:
            raise InvalidRequest("grace", "must be between 0 seconds and a year")
        now = time.time()
        changed: dict[str, bytes] = {}
        for old in [k for k in self.keys.values() if k.owner == owner and k.active(now)]:
            retired = Key(old.kid, old.owner, old.secret, old.created, now + grace)
            self.keys[old.kid] = retired
            changed[_KEY + old.kid] = retired.encode()
        new = Key(secrets.token_hex(8), owner, secrets.token_bytes(32), now + 1e-6)
        self.keys[new.kid] = new
        changed[_KEY + new.kid] = new.encode()
        self._put(changed)
        return new

    def revoke(self, credential_id: str, expires: float) -> None:
        self.revoked[credential_id] = expires
        self._put({_REVOKED + credential_id: msgpack.packb(float(expires))})


def derived_key(config: Any, purpose: str) -> bytes | None:
    """A key for ``purpose`` (export seals, audit checkpoints) derived from the bus's
    operator secret (HMAC-SHA256), made on first use; None in trusted mode. Only who
    can read the key ring (the operator) can derive it."""
    if getattr(config, "auth", "credentials") == "trusted":
        return None
    kv = open_keys(config)
    try:
        key = KeyRing.load(kv).ensure(OPERATOR_ORG)
    finally:
        kv.close()
    return derive(key.secret, purpose)


def derive(secret: bytes, purpose: str) -> bytes:
    """The key for ``purpose`` derived from an operator ``secret`` (see :func:`derived_key`)."""
    return hmac.new(secret, f"memorybus {purpose} v1".encode(), hashlib.sha256).digest()


def open_keys(config: Any) -> KeyValue:
    """The store holding the ring of the bus ``config`` describes (created when
    missing; the embedded file readable by its owner only)."""
    if config.backend == "redis":
        from memorybus.storage.kv import RedisKV

        return RedisKV.for_config(config, f"mb:{{{config.namespace}:auth}}:keys")
    from memorybus.storage.kv import SqliteKV

    path = os.path.join(os.path.abspath(config.data_dir), "auth.sqlite")
    fresh = not os.path.exists(path)
    kv = SqliteKV(path)
    if fresh:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.chmod(path + suffix, 0o600)
    return kv
