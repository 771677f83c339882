"""The operator's view of the audit trail: who read and wrote which memories of an org.

An operation generator of :class:`~memorybus.client.MemoryBus` (see
:mod:`memorybus.client.operation`). Every shard keeps one hash-chained log per org
(:mod:`memorybus.audit`); :meth:`audit` asks every shard and merges their entries by
time. Entries hold ids and content hashes, never content. Each is a dict (JSON-ready:
``json.dumps`` each one for a JSON-lines export) with ``shard``, ``seq``, ``at``,
``org``, ``principal``, ``operation``, ``ids``, ``hashes``, ``prev``, ``hash``.
Reads reach the log within the shard's flush period (``touch_flush_seconds``);
this call flushes them first. ``memorybus audit verify`` checks the chains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memorybus.actors.runtime import Op, Within
from memorybus.audit.read import AuditQuery
from memorybus.client.identity import require_operator
from memorybus.errors import InvalidRequest
from memorybus.scopes import shard_name

if TYPE_CHECKING:
    from memorybus.client.handle import BusHandle


def audit(
    bus: BusHandle,
    org: str,
    *,
    since: float | None = None,
    until: float | None = None,
    principal: str | None = None,
    limit: int = 1000,
) -> Op[list[dict[str, Any]]]:
    """``org``'s audit entries with ``since <= at < until`` by ``principal`` (e.g.
    ``"acme/u1/planner#<credential id>"``; None: anyone), oldest first, at most
    ``limit``. Operator only."""
    auth = require_operator(bus, "audit")
    if not isinstance(org, str) or not org:
        raise InvalidRequest("org", "must be a non-empty string")
    q = AuditQuery(since, until, principal, limit)
    found = yield Within([s.audit_log.remote(auth, org, q) for s in bus._shard_handles()], 120)
    merged = [{"shard": shard_name(i), **e.to_dict()} for i, entries in enumerate(found) for e in entries]
    merged.sort(key=lambda e: (e["at"], e["shard"], e["seq"]))
    return merged[:q.limit]
