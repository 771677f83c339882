"""Push targets that outlive the process (and the Ray cluster) that subscribed them.

A push subscription names its subscriber with a :class:`TargetRef`, which is what
the hub stores (never a live handle alone):

- a **named** target (an actor name and its namespace) is durable: after any
  restart, of the hub or of the whole cluster, the hub looks the name up again;
- an **unnamed** target carries its handle's serialized form and the cluster it
  is valid in (``cluster``); in another cluster it can never be found again.

A push subscription whose target cannot be found is *parked*: nothing is delivered
and its acknowledged cursors do not move, so every event it may see stays in the
shards' durable logs; it is re-attached (and replays what it missed) when its
target appears, or when its owner subscribes again with the same name. A parked
subscription is listed by ``bus_stats`` and can be unsubscribed.

:class:`LocalTargets` is the in-process resolver (unit tests, no Ray); the hub
actor's resolver over Ray is :mod:`memorybus.actors.targets`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memorybus.errors import InvalidRequest


@dataclass(frozen=True, slots=True)
class TargetRef:
    """The stored name of a push subscriber (see the module docstring)."""

    name: str = ""
    namespace: str = ""
    cluster: str = ""
    blob: bytes = b""

    @property
    def durable(self) -> bool:
        """Whether it can be found again in another cluster (a named target)."""
        return bool(self.name)

    def describe(self) -> str:
        if self.name:
            return f"actor {self.name!r} in namespace {self.namespace!r}"
        return "an unnamed actor" + (f" of Ray cluster {self.cluster}" if self.cluster else "")

    def encode(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace, "cluster": self.cluster, "blob": self.blob}

    @classmethod
    def decode(cls, d: dict[str, Any]) -> TargetRef:
        return cls(str(d.get("name") or ""), str(d.get("namespace") or ""), str(d.get("cluster") or ""),
                   bytes(d.get("blob") or b""))  # fmt: skip


def named(target: object) -> TargetRef | None:
    """``("name", "namespace")`` as a :class:`TargetRef`; None for anything that is not a
    pair; InvalidRequest for a pair that is not two non-empty strings."""
    if not isinstance(target, tuple):
        return None
    if len(target) != 2 or not all(isinstance(x, str) and x for x in target):
        raise InvalidRequest("target", "a named target is a pair of non-empty strings (name, namespace)")
    return TargetRef(name=target[0], namespace=target[1])


class LocalTargets:
    """Targets registered by name in this process (what unit tests drive the hub with).

    ``register(name, obj)`` makes ``obj`` findable as ``(name, namespace)``;
    ``remove(name)`` makes it disappear (as a stopped actor does). An object that is
    not registered is an unnamed target, valid in this resolver only."""

    def __init__(self, namespace: str = "local", cluster: str = "this-process") -> None:
        self.namespace = namespace
        self.cluster = cluster
        self._named: dict[tuple[str, str], Any] = {}
        self._unnamed: dict[bytes, Any] = {}
        self.lookups = 0

    def register(self, name: str, obj: Any, namespace: str | None = None) -> Any:
        self._named[(name, namespace or self.namespace)] = obj
        return obj

    def remove(self, name: str, namespace: str | None = None) -> None:
        self._named.pop((name, namespace or self.namespace), None)

    def ref(self, target: Any) -> TargetRef:
        pair = named(target)
        if pair is not None:
            return pair
        for (name, ns), obj in self._named.items():
            if obj is target:
                return TargetRef(name=name, namespace=ns)
        blob = str(id(target)).encode()
        self._unnamed[blob] = target
        return TargetRef(cluster=self.cluster, blob=blob)

    async def find(self, ref: TargetRef) -> Any | None:
        self.lookups += 1
        if ref.name:
            return self._named.get((ref.name, ref.namespace))
        return self._unnamed.get(ref.blob) if ref.cluster == self.cluster else None
