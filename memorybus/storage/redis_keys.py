"""RedisKeys: the one place a Redis store's key names are built (one hash tag per
shard, so its Lua scripts touch one slot)."""

from __future__ import annotations


class RedisKeys:
    """The one place Redis key names are built."""

    def __init__(self, namespace: str, shard: str) -> None:
        self.prefix = f"mb:{{{namespace}:{shard}}}"

    def node(self, memory_id: str) -> str:
        return f"{self.prefix}:n:{memory_id}"

    def scope(self, scope_key: str) -> str:
        return f"{self.prefix}:s:{scope_key}"

    def fact(self, scope_key: str, key: str) -> str:
        return f"{self.prefix}:k:{scope_key}\x1f{key}"

    def all(self) -> str:
        return f"{self.prefix}:all"

    def slot(self, scope_key: str, key: str) -> str:
        return f"{self.prefix}:h:{scope_key}\x1f{key}"

    def seq(self, scope_key: str) -> str:
        return f"{self.prefix}:q:{scope_key}"

    def stream(self, scope_key: str) -> str:
        return f"{self.prefix}:x:{scope_key}"

    def fact_events(self, scope_key: str, key: str) -> str:
        return f"{self.prefix}:f:{scope_key}\x1f{key}"

    def op(self, op: str) -> str:
        return f"{self.prefix}:o:{op}"

    def fence(self) -> str:
        """The marker :meth:`RedisStore.confirm_reads` writes and WAITs for."""
        return f"{self.prefix}:fence"

    def meta(self) -> str:
        return f"{self.prefix}:meta"

    def audit(self, org: str) -> str:
        return f"{self.prefix}:a:{org}"

    def audit_head(self, org: str) -> str:
        return f"{self.prefix}:ah:{org}"

    def checkpoints(self, org: str) -> str:
        return f"{self.prefix}:ac:{org}"
