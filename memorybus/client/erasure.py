"""Erasure from the client: ``bus.erase(org=..., user=...)``, ``(org=..., agent=...)`` or
``(memory_ids=[...])`` removes that content from every shard (see
:mod:`memorybus.shard.erase` for what each shard removes, and how an interrupted
erasure is completed). An operator's call: it takes no ``Context``.

Memories derived from erased ones live on other shards too (a broadcast copy in the
org's scope, a summary of a copy): the client asks every shard for the ids it would
erase, given the ids found so far, until no shard finds a new one, then has every shard
erase them, in parallel; then the hub of the org deletes the erased user's or agent's
subscriptions and their cursors. ``dry_run``: the same counts, nothing changed.

Not cleared: the embedders' and the query encoder's caches, which map a content hash
to its vector (no text) and age out; subscribers' own copies of events delivered
before the erasure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memorybus.actors.runtime import Op, Within
from memorybus.client.identity import require_operator
from memorybus.errors import InvalidRequest
from memorybus.shard.erase import Selector

if TYPE_CHECKING:
    from memorybus.client.handle import BusHandle

_WAIT = 600  # seconds a shard may take (an erase rewrites its log and compacts its files)


def erase(
    bus: BusHandle,
    *,
    org: str | None = None,
    user: str | None = None,
    agent: str | None = None,
    memory_ids: Sequence[str] | None = None,
    dry_run: bool = False,
) -> Op[dict[str, int]]:
    """Erase every memory of ``user`` or ``agent`` within ``org`` (both: that user's
    agent), or the memories ``memory_ids`` (with ``org``: only those of that org), and
    what derives from them, everywhere the bus keeps them. Returns counts summed over
    the shards: ``memories``, ``summaries``, ``copies``, ``relinked``, ``events``,
    ``ops``, ``slots``, ``graph_edges``, ``vectors``, and ``subscriptions`` (the erased
    user's or agent's subscriptions and cursors, deleted at its org's hub). Idempotent: a second call finds
    nothing. Raises InvalidRequest for a bad selector (nothing changes); an operator call."""
    auth = require_operator(bus, "erase")
    selector = Selector.of(org, user, agent, memory_ids)
    if not isinstance(dry_run, bool):
        raise InvalidRequest("dry_run", "must be a bool")
    handles = bus._shard_handles()
    known: set[str] = set()
    while True:
        found = yield Within([s.erase_targets.remote(auth, selector, sorted(known)) for s in handles], _WAIT)
        more = {i for ids in found for i in ids} - known
        if not more:
            break
        known |= more
    counts = yield Within([s.erase.remote(auth, selector, sorted(known), dry_run) for s in handles], _WAIT)
    total: Counter[str] = Counter()
    for c in counts:
        total.update(c)
    out = {k: total.get(k, 0) for k in counts[0]}
    out["subscriptions"] = 0
    if selector.user or selector.agent:  # the principal's subscriptions and cursors, at its org's hub
        _, hub = bus._hub_for(selector.org)
        out["subscriptions"] = (yield Within([hub.erase_principal.remote(auth, selector.org, selector.user,
                                                                         selector.agent, dry_run)], _WAIT))[0]
    return out
