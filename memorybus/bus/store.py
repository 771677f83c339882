"""The durable side of a hub's subscriptions: their records and acknowledged cursors.

Kept in the hub's :class:`~memorybus.bus.ports.KeyValue` under ``sub:<id>`` (owner,
filter, target, method) and ``cur:<id>`` (the acknowledged cursors). A push target is
stored as its :class:`~memorybus.bus.targets.TargetRef` (a name that outlives the
cluster, or an unnamed handle valid in one cluster), never as a live handle only.
Records written before targets were named (a pickled handle) load as unnamed targets
of an unknown cluster: parked until their owner subscribes again. A record that
cannot be read at all is logged and skipped, never fatal to the others. Every
failure of the store itself surfaces as :class:`~memorybus.errors.StoreUnavailable`.
"""

from __future__ import annotations

import logging
from collections.abc import Container, Iterable
from typing import Any

import msgpack

from memorybus.bus.ports import KeyValue
from memorybus.bus.records import (
    Subscription,
    decode_context,
    decode_filter,
    encode_context,
    encode_filter,
    subscription_id,
)
from memorybus.bus.targets import TargetRef

log = logging.getLogger(__name__)


def _pack(value: Any) -> bytes:
    return bytes(msgpack.packb(value, use_bin_type=True))


class SubscriptionStore:
    """Subscription records and cursors in ``kv`` (see the module docstring)."""

    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    def save(self, sub: Subscription) -> None:
        """The record and the cursors of ``sub``, in one durable write."""
        record = {
            "name": sub.name,
            "context": encode_context(sub.context),
            "filter": encode_filter(sub.filter),
            "method": sub.method,
            "target": None,  # records of older versions held a pickled handle here
            "ref": sub.ref.encode() if sub.ref is not None else None,
            "push": sub.ref is not None,
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
            try:
                sub = self._load_one(key[4:], blob)
            except (ValueError, TypeError, KeyError, IndexError, msgpack.UnpackException) as exc:
                log.warning("subscription record %s cannot be read, skipped: %r", key, exc)
                continue
            if sub.id not in skip:  # else already restored (an earlier attempt stopped part way)
                out.append(sub)
        return out

    def _load_one(self, sub_id: str, blob: bytes) -> Subscription:
        rec = msgpack.unpackb(blob, raw=False)
        cur = self.kv.get(f"cur:{sub_id}")
        name = rec.get("name") or sub_id
        owner = decode_context(rec["context"])
        if sub_id != subscription_id(owner, name):
            old, sub_id = sub_id, subscription_id(owner, name)
            self.kv.put_many({f"sub:{sub_id}": _pack({**rec, "name": name}),
                              **({f"cur:{sub_id}": cur} if cur else {})})  # fmt: skip
            self.delete(old)
        ref: TargetRef | None = None
        if rec.get("ref") is not None:
            ref = TargetRef.decode(rec["ref"])
        elif rec.get("push") and rec.get("target") is not None:
            ref = TargetRef(blob=bytes(rec["target"]))  # an older record: a handle of an unknown cluster
        return Subscription(
            sub_id,
            owner,
            decode_filter(rec["filter"]),
            None,  # the hub finds the live target
            rec["method"],
            dict(msgpack.unpackb(cur, raw=False)) if cur else {},
            name=name,
            ref=ref,
        )
