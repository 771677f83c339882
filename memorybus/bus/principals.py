"""What the hub tells and forgets about its callers' subscriptions: delivery figures of
the subscriptions a context manages (nothing of other orgs), and an erased
principal's subscriptions removed. A mixin of :class:`~memorybus.bus.hub.Hub`."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from memorybus.bus.records import Subscription
from memorybus.scopes import Context

if TYPE_CHECKING:
    from memorybus.bus.store import SubscriptionStore


class Principals:
    """The hub supplies ``subs``, ``store``, ``published_by_org`` and ``_drop``."""

    subs: dict[str, Subscription]
    store: SubscriptionStore
    published_by_org: Counter[str]

    def _drop(self, sub_id: str) -> None:
        raise NotImplementedError

    def erase_principal(self, org: str, user: str = "", agent: str = "", *, dry_run: bool = False) -> int:
        """Delete every subscription (record and cursors, live or stored) owned by
        ``user`` or ``agent`` of ``org`` (both: that user's agent): part of an erasure.
        Returns how many; ``dry_run``: count only."""
        ids = set(self.store.owned_by(org, user, agent))
        ids |= {i for i, s in self.subs.items() if s.context.org == org and (not user or s.context.user == user)
                and (not agent or s.context.agent == agent)}  # fmt: skip
        if dry_run:
            return len(ids)
        for sub_id in ids:
            self._drop(sub_id)
        return len(ids)

    def stats(self, context: Context) -> dict[str, Any]:
        """Delivery figures of the subscriptions ``context`` manages (by name), and the
        events published for its org. Nothing about other orgs. ``replays`` counts the
        replays that re-read events from the logs; ``parked`` lists the subscriptions
        waiting for their target (each also says ``parked``: why, and ``target``)."""
        mine = [s for s in self.subs.values() if s.context.org == context.org and context.manages(s.context.scope)]

        def label(s: Subscription) -> str:
            return s.name if s.context.scope == context.scope else f"{s.name}@{s.context}"

        return {
            "published": self.published_by_org[context.org],
            "delivered": sum(s.delivered for s in mine),
            "parked": sorted(label(s) for s in mine if s.parked),
            "subscriptions": {
                label(s): {
                    "queued": len(s.queue),
                    "delivered": s.delivered,
                    "replays": s.replays,
                    "replaying": not s.parked and (s.needs_replay or s.more),
                    "errors": s.errors,
                    "last_error": s.last_error,
                    "parked": s.parked,
                    "target": s.ref.describe() if s.ref is not None else "pull",
                }
                for s in mine
            },
        }
