"""Redis Cluster: a ``redis://`` (or ``rediss://``) URL of any node of a cluster opens
redis-py's :class:`redis.cluster.RedisCluster` over the same options (timeouts, TLS,
the URL's ACL user).

Guarantees:

- **Detected from the server.** :func:`open_cluster_if_enabled` asks the URL's node
  ``INFO cluster``; ``cluster_enabled:1`` gives a cluster client, anything else (a
  standalone server, or one that cannot be reached now: its error surfaces at the
  first command, as with a plain client) a plain one.
- **One slot per shard.** Every key of a shard carries the shard's hash tag
  (:class:`~memorybus.storage.redis_keys.RedisKeys`), as do the hub's and the key
  ring's single hashes, so every script and transaction runs on one node. The commit
  script is given every key it touches (:func:`commit_keys`): while its slot moves
  between nodes (``redis-cli --cluster reshard``), the server answers ``ASK`` or
  ``TRYAGAIN`` *before* running it rather than failing half-way, and redis-py follows
  or retries, so a move loses no write.
- **Acknowledged after WAIT.** :class:`OwnerReplicatedScript` (``Config.redis_wait_replicas``)
  sends the script and ``WAIT`` on one connection to the primary that owns the slot;
  fewer replicas than asked within the timeout raises :class:`StoreUnavailable` (the
  write is on the primary, possibly not on a replica; the caller's operation id makes a
  retry safe). Redirects (``MOVED``, ``ASK``, ``TRYAGAIN``, ``CLUSTERDOWN``) mean the
  script did not run and are retried here for up to ``_REDIRECT_SECONDS``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import redis
import redis.exceptions as rexc
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

from memorybus.errors import StoreUnavailable
from memorybus.storage.redis_durability import mark, unconfirmed

_REDIRECT_SECONDS = 30.0


def open_cluster_if_enabled(url: str, kwargs: dict[str, Any]) -> RedisCluster | None:
    """A cluster client for ``url`` when its node runs in cluster mode, else None."""
    probe = redis.Redis.from_url(url, **kwargs, retry=Retry(NoBackoff(), 0))  # once: a down server is told later
    try:
        enabled = str(probe.info("cluster").get("cluster_enabled", 0)) == "1"
    except rexc.RedisError:  # unreachable, or INFO refused: the plain client reports at first use
        return None
    finally:
        probe.close()
    if not enabled:
        return None
    return RedisCluster.from_url(url, **kwargs)


def is_cluster(client: Any) -> bool:
    return isinstance(client, RedisCluster)


def node_clients(client: Any, *, replicas: bool = True) -> list[tuple[str, redis.Redis]]:
    """``(host:port, client)`` of every node (primaries, and replicas unless told not);
    a standalone client is its own single node."""
    if not is_cluster(client):
        return [("", client)]
    nodes = client.get_nodes() if replicas else client.get_primaries()
    return [(node.name, client.get_redis_connection(node)) for node in nodes]


def commit_keys(prefix: str, ops: Sequence[Sequence[Any]], op: str) -> list[str]:
    """Every key the commit script (:mod:`memorybus.storage.redis`) names for ``ops``:
    the shard's set of ids first, then the operation record, nodes, scope and fact
    sets, slots, sequences, streams, fact-event lists and audit keys. A deleted
    memory's scope and fact sets are not known here; the script reads them before its
    first write, so a missing one stops it before anything is written."""
    keys = {f"{prefix}:all": None}
    if op:
        keys[f"{prefix}:o:{op}"] = None
    for item in ops:
        kind = item[0]
        if kind == "slot":
            keys[f"{prefix}:h:{item[1]}\x1f{item[2]}"] = None
        elif kind == "evt":
            keys[f"{prefix}:q:{item[1]}"] = None
            keys[f"{prefix}:x:{item[1]}"] = None
            if item[3]:
                keys[f"{prefix}:f:{item[1]}\x1f{item[3]}"] = None
        elif kind == "aud":
            keys[f"{prefix}:ah:{item[1]}"] = None
            keys[f"{prefix}:a:{item[1]}"] = None
        else:
            keys[f"{prefix}:n:{item[1]}"] = None
            if kind == "put":
                keys[f"{prefix}:s:{item[6]}"] = None
                if item[7]:
                    keys[f"{prefix}:k:{item[6]}\x1f{item[7]}"] = None
    return list(keys)


def _acked(replies: list[Any], wanted: int, timeout_ms: int) -> Any:
    reply, acked = replies[-2], int(replies[-1])
    if acked < wanted:
        raise unconfirmed(acked, wanted, timeout_ms)
    return reply


class OwnerReplicatedScript:
    """:class:`~memorybus.storage.redis_durability.ReplicatedScript` for a cluster: the
    script and ``WAIT`` go in one pipeline to the primary that owns the keys' slot (a
    cluster pipeline would send the keyless WAIT to another node)."""

    def __init__(self, client: Any, script: Any, replicas: int, timeout: float) -> None:
        self.client, self.script, self.replicas = client, script, replicas
        self.timeout_ms = max(1, int(timeout * 1000))

    def __call__(self, keys: list[Any], args: list[Any]) -> Any:
        def fill(pipe: Any) -> None:
            self.script(keys=keys, args=args, client=pipe)  # a plain pipeline loads the script if need be
            pipe.execute_command("WAIT", self.replicas, self.timeout_ms)

        return _acked(on_owner(self.client, keys[0], fill), self.replicas, self.timeout_ms)


def confirm_on_owner(rc: Any, key: str, retention_ms: str, replicas: int, timeout: float, *,
                     create: bool = False) -> None:
    """:func:`~memorybus.storage.redis_durability.confirm_record` on the slot's primary."""
    timeout_ms = max(1, int(timeout * 1000))

    def fill(pipe: Any) -> None:
        mark(pipe, key, retention_ms, create)
        pipe.execute_command("WAIT", replicas, timeout_ms)

    _acked(on_owner(rc, key, fill), replicas, timeout_ms)


def on_owner(rc: RedisCluster, key: str, fill: Callable[[Any], None]) -> list[Any]:
    """Run the commands ``fill`` queues in one pipeline on one connection to the primary
    owning ``key``'s slot, following redirects (after which nothing ran)."""
    deadline = time.monotonic() + _REDIRECT_SECONDS
    asking: ClusterNode | None = None
    pause = 0.01
    while True:
        node = asking or rc.get_node_from_key(key)
        pipe = rc.get_redis_connection(node).pipeline(transaction=False)
        if asking is not None:
            pipe.execute_command("ASKING")
        fill(pipe)
        try:
            replies = pipe.execute()
            return replies[1:] if asking is not None else replies
        except rexc.AskError as exc:  # the slot is moving and these keys are already there
            asking = rc.get_node(host=exc.host, port=exc.port)
            if asking is None:
                rc.nodes_manager.initialize()
            continue
        except (rexc.MovedError, rexc.TryAgainError, rexc.ClusterDownError) as exc:
            if time.monotonic() > deadline:
                raise StoreUnavailable("redis", f"{node.name}: {type(exc).__name__}: {exc}") from None
            asking = None
            if not isinstance(exc, rexc.TryAgainError):
                rc.nodes_manager.initialize()
        except (rexc.ConnectionError, rexc.TimeoutError):
            with contextlib.suppress(rexc.RedisError):  # learn the new owner for the next call
                rc.nodes_manager.initialize()
            raise
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def read_on_owner(rc: Any, key: str, fill: Callable[[Any], None]) -> list[Any] | None:
    """Replies of the reads ``fill`` queues, sent in one pipeline to the primary owning
    ``key``'s slot (a cluster pipeline routes command by command, at a cost per command);
    None when any was redirected (the slot is moving): the caller reads through the
    cluster pipeline instead, which follows each redirect."""
    pipe = rc.get_redis_connection(rc.get_node_from_key(key)).pipeline(transaction=False)
    fill(pipe)
    replies = pipe.execute(raise_on_error=False)
    redirected = (rexc.AskError, rexc.MovedError, rexc.TryAgainError, rexc.ClusterDownError)
    if any(isinstance(r, redirected) for r in replies):
        return None
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return list(replies)
