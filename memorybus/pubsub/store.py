"""The durable side of a hub's subscriptions: their records and acknowledged cursors.

Kept in the hub's :class:`~memorybus.pubsub.ports.KeyValue` under ``sub:<id>`` (owner,
filter, target, method) and ``cur:<id>`` (the acknowledged cursors). Every failure of
the store surfaces as the store's :class:`~memorybus.errors.StoreUnavailable`.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from typing import Any

import msgpack

from memorybus.pubsub.ports import KeyValue
from memorybus.pubsub.records import (
    Subscription,
    decode_context,
    decode_filter,
    encode_context,
    encode_filter,
    subscription_id,
)


def _pack(value: Any) -> bytes:
    return bytes(msgpack.packb(value, use_bin_type=True))


class SubscriptionStore:
    """Subscription records and cursors in ``kv``; a push target is stored as
    ``encode_target`` makes it and restored with ``decode_target`` (which returns None
    for a target that cannot be restored: the subscriber re-attaches by subscribing)."""

    def __init__(
        self,
        kv: KeyValue,
        encode_target: Callable[[Any], bytes | None],
        decode_target: Callable[[bytes], Any],
    ) -> None:
        self.kv = kv
        self._encode_target = encode_target
        self._decode_target = decode_target

    def save(self, sub: Subscription) -> None:
        """The record and the cursors of ``sub``, in one durable write."""
        record = {
            "name": sub.name,
            "context": encode_context(sub.context),
            "filter": encode_filter(sub.filter),
            "method": sub.method,
            "target": self._encode_target(sub.target) if sub.target is not None else None,
            "push": sub.target is not None,
        }
        self.kv.put_many({f"sub:{sub.id}": _pack(record), f"cur:{sub.id}": _pack(sub.acked)})

    def save_cursors(self, subs: Iterable[Subscription]) -> None:
        """The cursors of every one of ``subs``, in one durable write."""
        self.kv.put_many({f"cur:{sub.id}": _pack(sub.acked) for sub in subs})

    def cursors(self, sub_id: str) -> dict[str, int] | None:
        """The stored cursors of subscription ``sub_id``, or None if none are stored."""
        saved = self.kv.get(f"cur:{sub_id}")
        return dict(msgpack.unpackb(saved, raw=False)) if saved is not None else None

    def owned_by(self, org: str, user: str = "", agent: str = "") -> list[str]:
        """The ids of the stored subscriptions whose owner is ``user`` or ``agent`` of
        ``org`` (both given: that user's agent)."""
        out = []
        for key, blob in self.kv.scan("sub:"):
            owner = decode_context(msgpack.unpackb(blob, raw=False)["context"])
            if owner.org == org and (not user or owner.user == user) and (not agent or owner.agent == agent):
                out.append(key[4:])
        return out

    def delete(self, sub_id: str) -> None:
        self.kv.delete(f"sub:{sub_id}")
        self.kv.delete(f"cur:{sub_id}")

    def load(self, skip: Container[str] = ()) -> list[Subscription]:
        """Every stored subscription, as it was last saved, but those whose id is in
        ``skip`` (already live).

        A record written before subscriptions had owners (keyed by name alone) is moved
        under its owner's id first."""
        out: list[Subscription] = []
        for key, blob in self.kv.scan("sub:"):
            sub_id = key[4:]
            rec = msgpack.unpackb(blob, raw=False)
            cur = self.kv.get(f"cur:{sub_id}")
            name = rec.get("name") or sub_id
            owner = decode_context(rec["context"])
            if sub_id != subscription_id(owner, name):
                old, sub_id = sub_id, subscription_id(owner, name)
                self.kv.put_many({f"sub:{sub_id}": _pack({**rec, "name": name}),
                                  **({f"cur:{sub_id}": cur} if cur else {})})  # fmt: skip
                self.delete(old)
            if sub_id in skip:
                continue  # already restored (an earlier attempt stopped part way)
            push = rec["push"] and rec["target"] is not None
            out.append(Subscription(
                sub_id,
                owner,
                decode_filter(rec["filter"]),
                self._decode_target(rec["target"]) if push else None,
                rec["method"],
                dict(msgpack.unpackb(cur, raw=False)) if cur else {},
                name=name,
            ))  # fmt: skip
        return out
