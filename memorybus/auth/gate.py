"""The check every actor makes before it does anything: who is calling, and may it?

An actor (shard, hub, maintenance) holds one :class:`Gatekeeper`. Each call that
acts for a caller passes through :meth:`Gatekeeper.admit` (a context-bearing call)
or :meth:`Gatekeeper.operator` (an operator call) first, so nothing is read,
parsed or written for a caller whose credential does not check out:

- the credential's signature, key (its org's, not retired) and expiry are checked,
  and that it is not revoked;
- the context asked for must lie inside the credential: every field the credential
  names is the context's (a user credential may name a session or an agent, never
  another user); its roles must be among the credential's roles, and the roles the
  call carries are the credential's, never the caller's; a write needs the
  ``write`` right, a read the ``read`` right; the levels it may write to travel on
  the admitted context (checked by the shard against each memory's scope);
- an operator credential admits any context and every operator call.

In trusted mode (``Config.auth == "trusted"``) contexts are taken as given and no
credential is asked for: single-process embedded use only.

Verified credentials are remembered (bounded) so a call pays a dictionary lookup
and an expiry check; the key ring is read again at most every
``refresh_seconds`` and at once when a credential names a key not yet seen, so a
rotation or revocation reaches every actor within that period (the operator's
handle also tells every actor at once, see ``MemoryBus.rotate_org_secret``).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

from memorybus.auth.credential import OPERATOR_ORG, Grant, peek, verify
from memorybus.auth.keyring import KeyRing
from memorybus.errors import NotAuthenticated, NotAuthorized
from memorybus.scopes import Context

_CACHE = 4096


class Gatekeeper:
    """Verifies credentials against the key ring ``load()`` reads (None: trusted mode)."""

    def __init__(self, load: Callable[[], KeyRing] | None, refresh_seconds: float = 2.0,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.trusted = load is None
        self._load = load
        self._refresh = refresh_seconds
        self._clock = clock
        self._ring: KeyRing | None = None
        self._loaded = -1e18
        self._lock = threading.Lock()
        self._seen: dict[str, Grant] = {}
        self._service: tuple[str, float] | None = None

    # ------------------------------------------------------------ the ring
    def ring(self, force: bool = False) -> KeyRing:
        now = time.monotonic()
        with self._lock:
            if force or self._ring is None or now - self._loaded >= self._refresh:
                ring = self._load() if self._load is not None else KeyRing()
                if self._ring is not None and (ring.revoked != self._ring.revoked or ring.keys != self._ring.keys):
                    self._seen.clear()  # a revocation or retirement: check every credential again
                self._ring, self._loaded = ring, now
            return self._ring

    def reload(self) -> None:
        """Read the key ring again now (after a rotation or revocation)."""
        if not self.trusted:
            self.ring(force=True)
            with self._lock:
                self._seen.clear()

    def grant(self, token: object) -> Grant:
        """The verified grant of ``token``; NotAuthenticated otherwise."""
        now = self._clock()
        if isinstance(token, str):
            seen = self._seen.get(token)
            if seen is not None:
                if now < seen.expires:
                    ring = self.ring()  # refreshes on its period: revocations reach cached grants
                    if not ring.is_revoked(seen.id):
                        return seen
                    raise NotAuthenticated("credential revoked")
                raise NotAuthenticated("credential expired")
        ring = self.ring()
        kid = peek(token).kid
        if kid not in ring.keys:
            ring = self.ring(force=True)  # a key made since the last read (a new org, a rotation)
        grant = verify(token, ring.secret_of, now)
        if ring.is_revoked(grant.id):
            raise NotAuthenticated("credential revoked")
        with self._lock:
            if len(self._seen) >= _CACHE:
                self._seen.clear()
            self._seen[token] = grant  # type: ignore[index]
        return grant

    # ----------------------------------------------------------- the checks
    def admit(self, context: object, action: str, write: bool) -> Context:
        """The context a call acts in, once its credential allows it (see the module
        docstring). ``action`` names the call in errors."""
        if not isinstance(context, Context):
            from memorybus.errors import InvalidRequest

            raise InvalidRequest("context", f"must be a Context, got {type(context).__name__}")
        if self.trusted:
            return context
        grant = self.grant(context.credential)
        if grant.operator:
            return dataclasses.replace(context, principal=grant.principal)
        right = "write" if write else "read"
        if right not in grant.rights:
            raise NotAuthorized(action, f"the credential has no {right} right")
        mine = (grant.org, grant.user, grant.agent, grant.session)
        asked = (context.org, context.user, context.agent, context.session)
        if any(m and m != a for m, a in zip(mine, asked, strict=True)):
            raise NotAuthorized(action, "the context lies outside the credential")
        if not context.roles <= grant.roles:
            raise NotAuthorized(action, "a role the credential does not grant")
        return dataclasses.replace(context, roles=grant.roles, levels=grant.levels, principal=grant.principal)

    def operator(self, token: object, action: str) -> Grant | None:
        """An operator call: the credential must be the operator's (None in trusted mode)."""
        if self.trusted:
            return None
        grant = self.grant(token)
        if not grant.operator:
            raise NotAuthorized(action, "an operator call (agents' credentials cannot make it)")
        return grant

    # -------------------------------------------------- the actor's own calls
    def service_token(self) -> str:
        """An operator credential for this actor's own calls to other actors (a hub
        replaying a subscription, the decay actor sweeping shards); minted from the
        operator key it reads, renewed before it expires. "" in trusted mode."""
        if self.trusted:
            return ""
        now = self._clock()
        if self._service is None or self._service[1] - now < 600:
            key = self.ring().current(OPERATOR_ORG) or self.ring(force=True).current(OPERATOR_ORG)
            if key is None:
                raise NotAuthenticated("the bus has no operator key (connect creates it)")
            grant = Grant(org=OPERATOR_ORG, operator=True, issued=now, expires=now + 86400, kid=key.kid)
            self._service = (grant.sign(key.secret), grant.expires)
        return self._service[0]

    def as_service(self, context: Context) -> Context:
        """``context`` carrying this actor's service credential (for a context the
        actor holds itself, such as a restored subscription's)."""
        return context if self.trusted else dataclasses.replace(context, credential=self.service_token())


def gatekeeper_for(config: object) -> Gatekeeper:
    """The gatekeeper of an actor of the bus ``config`` describes (trusted mode: none
    of the checks). The key ring's store is opened on first use."""
    if getattr(config, "auth", "credentials") == "trusted":
        return Gatekeeper(None)
    from memorybus.auth.keyring import open_keys

    opened: list[object] = []

    def load() -> KeyRing:
        if not opened:
            opened.append(open_keys(config))
        return KeyRing.load(opened[0])  # type: ignore[arg-type]

    return Gatekeeper(load)
