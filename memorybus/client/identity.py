"""Who a handle acts as: the operator's handle, agents' handles bound to a credential.

- ``connect`` (credentials mode) reads the bus's key ring from the storage it was
  given (making the operator key on first use) and returns the **operator's
  handle**: any context, every operator call. Whoever can read the storage is the
  operator: the records are theirs anyway.
- The operator mints credentials (:func:`issue_credential`) and hands agents
  :func:`as_agent` handles. An agent handle carries its credential with every call;
  its operations take no context (the credential's own is used) or a narrower one
  inside it; it pickles to its config (without storage secrets) and credential, so
  it can be passed into Ray tasks and actors. An operator handle refuses to pickle:
  it never reaches an agent by accident.
- The actors verify every call (see :mod:`memorybus.auth.gate`); the checks here
  only fail early with the same errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from memorybus.auth import OPERATOR_ORG, Grant, KeyRing, open_keys, peek
from memorybus.auth.credential import LEVELS, RIGHTS
from memorybus.auth.keyring import derived_key
from memorybus.errors import InvalidRequest, MemoryBusError, NotAuthorized
from memorybus.scopes import Context

if TYPE_CHECKING:
    from memorybus.client.handle import BusHandle

B = TypeVar("B", bound="BusHandle")  # the caller's own handle class comes back

#: how long the operator's own credential lives (its handle re-mints it when older)
OPERATOR_TTL = 7 * 86400.0
_MAX_TTL = 366 * 86400.0


def bootstrap(bus: BusHandle) -> None:
    """Make this handle the operator's (credentials mode): the operator key is made on
    first use and an operator credential minted from it."""
    if bus.config.auth == "trusted":
        return
    kv = open_keys(bus.config)
    try:
        ring = KeyRing.load(kv)
        key = ring.ensure(OPERATOR_ORG)
        now = time.time()
        grant = Grant(org=OPERATOR_ORG, operator=True, issued=now, expires=now + OPERATOR_TTL, kid=key.kid)
        bus._credential = grant.sign(key.secret)
        bus._grant = grant
        bus._pinned = True
    finally:
        kv.close()


def is_operator(bus: BusHandle) -> bool:
    return bus.config.auth == "trusted" or (bus._grant is not None and bus._grant.operator)


def require_operator(bus: BusHandle, action: str) -> str:
    """The handle's operator credential ("" in trusted mode); NotAuthorized on an agent's."""
    if not is_operator(bus):
        raise NotAuthorized(action, "an operator call: this handle is an agent's (see MemoryBus.as_agent)")
    return bus._credential or ""


def bind(bus: BusHandle, context: object) -> Any:
    """The context an operation sends: an agent's own when none is given, carrying the
    handle's credential. A context outside an agent's credential fails here already."""
    grant = bus._grant
    if grant is None:  # trusted mode
        return context
    if context is None:
        return None if grant.operator else dataclasses.replace(grant.context, credential=bus._credential or "")
    if not isinstance(context, Context):
        return context  # the operation's own check names the error
    if context.credential:
        return context  # a context with a credential of its own acts as that (the actors verify it)
    if not grant.operator:
        mine = (grant.org, grant.user, grant.agent, grant.session)
        asked = (context.org, context.user, context.agent, context.session)
        if any(m and m != a for m, a in zip(mine, asked, strict=True)):
            raise NotAuthorized("context", "the context lies outside this handle's credential")
        if not context.roles <= grant.roles:
            raise NotAuthorized("context", "a role this handle's credential does not grant")
        if not context.roles:
            context = dataclasses.replace(context, roles=grant.roles)
    return dataclasses.replace(context, credential=bus._credential or "")


def _names(value: Iterable[str] | None, default: frozenset[str], name: str) -> frozenset[str]:
    if value is None:
        return default
    if isinstance(value, str):
        value = [value]
    try:
        return frozenset(value)
    except TypeError:
        raise InvalidRequest(name, "must be a collection of names") from None


def issue_credential(
    bus: BusHandle,
    org: str | None = None,
    user: str = "",
    agent: str = "",
    session: str = "",
    *,
    roles: Iterable[str] = (),
    levels: Iterable[str] | None = None,
    rights: Iterable[str] | None = None,
    ttl: float = 86400.0,
    operator: bool = False,
) -> str:
    """A signed credential for a principal (operator only).

    ``org`` (required unless ``operator``), ``user``, ``agent``, ``session``: the
    principal's scope; its calls may name any context inside it. ``roles``: the
    roles its calls carry (e.g. an authority's). ``levels``: the scope levels it may
    write to (default all of ``org``, ``user``, ``agent``, ``session``).
    ``rights``: ``"read"`` and/or ``"write"`` (default both). ``ttl``: seconds it is
    valid (at most a year). ``operator=True``: a credential with the operator's
    powers, for another operator process. Signed with the org's secret (made on first
    use); InvalidRequest for bad values, NotAuthorized on an agent's handle.
    """
    require_operator(bus, "issue_credential")
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= _MAX_TTL:
        raise InvalidRequest("ttl", "must be a positive number of seconds, at most a year")
    now = time.time()
    owner = OPERATOR_ORG if operator else org
    if not operator and (not isinstance(org, str) or not org):
        raise InvalidRequest("org", "is required")
    kv = open_keys(bus.config)
    try:
        ring = KeyRing.load(kv)
        grant = Grant(org=owner or OPERATOR_ORG, user="" if operator else user, agent="" if operator else agent,
                      session="" if operator else session, roles=_names(roles, frozenset(), "roles"),
                      levels=_names(levels, LEVELS, "levels"), rights=_names(rights, RIGHTS, "rights"),
                      operator=operator, issued=now, expires=now + ttl, kid="")  # fmt: skip
        key = ring.ensure(grant.org)
        return dataclasses.replace(grant, kid=key.kid).sign(key.secret)
    finally:
        kv.close()


def as_agent(bus: B, credential: str) -> B:
    """A handle on the same bus bound to ``credential`` (see the module docstring)."""
    try:
        grant = peek(credential)
    except MemoryBusError:
        raise InvalidRequest("credential", "is not a memorybus credential") from None
    other = type(bus)(bus.config.without_secrets() if not grant.operator else bus.config)
    other._credential, other._grant = credential, grant
    other._shards, other._embedders, other._hubs = bus._shards, bus._embedders, bus._hubs
    return other


def agent_handle(bus: B, org: str, user: str = "", agent: str = "", session: str = "",
                 **grant: Any) -> B:  # fmt: skip
    """``as_agent(issue_credential(...))`` in one call; in trusted mode the handle itself
    (there are no credentials to bind)."""
    if bus.config.auth == "trusted":
        return bus
    return as_agent(bus, issue_credential(bus, org, user, agent, session, **grant))


def export_key(bus: BusHandle) -> bytes | None:
    """The key export files of this bus are sealed under when the caller names none:
    derived from the operator secret (HMAC), so only this bus's operator can seal a file
    this bus imports without ``trusted=True``. None in trusted mode (no secrets)."""
    return derived_key(bus.config, "export seal")


def _tell_actors(bus: BusHandle) -> None:
    """Every actor reads the key ring again now (best effort: they do within seconds anyway)."""
    from memorybus.actors import runtime

    handles = (bus._shards or []) + (bus._hubs or []) + list(bus._maintenance.values())
    with contextlib.suppress(MemoryBusError):
        runtime.run_sync(runtime.iter_refs([h.auth_reload.remote() for h in handles]), 30)


def rotate_org_secret(bus: BusHandle, org: str, grace: float = 3600.0) -> str:
    """A new signing secret for ``org`` (operator only); credentials signed with the
    old one are refused ``grace`` seconds from now (0: at once). Returns the new key id."""
    require_operator(bus, "rotate_org_secret")
    if not isinstance(org, str) or not org or org == OPERATOR_ORG:
        raise InvalidRequest("org", "must be an org name")
    kv = open_keys(bus.config)
    try:
        key = KeyRing.load(kv).rotate(org, grace)
    finally:
        kv.close()
    _tell_actors(bus)
    return key.kid


def revoke_credential(bus: BusHandle, credential: str) -> str:
    """Refuse ``credential`` from now on, everywhere (operator only); returns its id."""
    require_operator(bus, "revoke_credential")
    try:
        grant = peek(credential)
    except MemoryBusError:
        raise InvalidRequest("credential", "is not a memorybus credential") from None
    kv = open_keys(bus.config)
    try:
        KeyRing.load(kv).revoke(grant.id, grant.expires)
    finally:
        kv.close()
    _tell_actors(bus)
    return grant.id
