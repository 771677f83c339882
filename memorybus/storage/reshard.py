"""Moving scopes when the shard count changes (``Config(migrate=True)``).

Scope keys map to shards by rendezvous hashing, so with another ``num_shards`` some
scopes belong to another shard. :func:`reshard` runs, with the bus stopped, before
the shards start: for every scope of every old shard whose owner changed, it copies
everything the scope holds (memories, keyed-fact slots, the event log with its
sequence, the fact index) to the new owner in one transaction, then deletes it from
the old one in another. A crash in between leaves a copy in both; running again
copies over it (same rows) and deletes, so a rerun finishes the move. Only then are
the stores' identities updated to the new count, the first shard's last (it is what
:func:`recorded_num_shards` reads, so an interrupted move is resumed). Shards beyond
the new count are empty by then and are removed. Vector indexes are derived: each
shard rebuilds its own when it starts. Operation records stay where they are (a
re-execution from before the move cannot happen: the bus was stopped).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from typing import Any

from memorybus.config import Config
from memorybus.errors import StoreMismatch
from memorybus.scopes import Router, shard_name
from memorybus.storage.base import Store
from memorybus.storage.identity import new_identity, read_marker, remove_marker, write_marker

_SQLITE_TABLES = {  # table -> columns (the scope's rows are those with its scope_key)
    "nodes": "id, scope_key, mkey, version, access_count, last_accessed, blob",
    "slots": "scope_key, mkey, head, seq",
    "seqs": "scope_key, seq",
    "events": "scope_key, seq, blob",
    "fact_events": "scope_key, mkey, seq",
}


def recorded_num_shards(config: Config) -> int | None:
    """The shard count this bus's stores were written with (None: a new bus)."""
    if config.backend == "embedded":
        marker = read_marker(config, shard_name(0))
        return None if marker is None else int(marker["num_shards"])
    from memorybus.storage.factory import open_store

    store = open_store(config, shard_name(0))
    try:
        value = store.meta().get("num_shards")
    finally:
        store.close()
    return None if value is None else int(value)


def reshard(config: Config, old: int) -> dict[str, int]:
    """Move every scope of a bus written with ``old`` shards to its owner among
    ``config.num_shards``; returns how many scopes and memories moved."""
    from memorybus.storage.factory import open_store

    new = config.num_shards
    old_cfg = config.with_(num_shards=old)
    count = max(old, new)
    stores: list[Store] = [open_store(config if i < new else old_cfg, shard_name(i)) for i in range(count)]
    router = Router(new)
    moved = {"scopes": 0, "memories": 0}
    try:
        for i in range(old):
            src = stores[i]
            for scope_key in _scope_keys(src):
                j = router.shard_for(scope_key)
                if j == i:
                    continue
                moved["memories"] += _copy_scope(src, stores[j], scope_key)
                _drop_scope(src, scope_key)
                moved["scopes"] += 1
        for i in range(new, old):  # old shards beyond the new count: empty now
            if _scope_keys(stores[i]):
                raise StoreMismatch(shard_name(i), "still holds scopes after the move")
        for i in [*range(1, new), 0]:  # the first shard last: it says which count the bus has
            identity = dict(stores[i].meta() or new_identity(config, shard_name(i)))
            identity["num_shards"] = str(new)
            stores[i].set_meta(identity)
            write_marker(config, shard_name(i), identity)
    finally:
        for store in stores:
            store.close()
    for i in range(new, old):
        _remove_shard(old_cfg, shard_name(i))
    return moved


def _remove_shard(config: Config, shard: str) -> None:
    from memorybus.storage.factory import open_store

    if config.backend == "redis":
        store = open_store(config, shard)
        store.clear()
        store.close()
    else:
        shutil.rmtree(config.shard_dir(shard), ignore_errors=True)
    remove_marker(config, shard)
    with contextlib.suppress(OSError):
        shutil.rmtree(os.path.join(config.shard_dir(shard), "vectors"), ignore_errors=True)


# ------------------------------------------------------------------- backends
def _scope_keys(store: Store) -> list[str]:
    if store.backend == "sqlite":
        rows = store._query(  # type: ignore[attr-defined]
            "SELECT scope_key FROM nodes UNION SELECT scope_key FROM seqs UNION SELECT scope_key FROM slots"
        )
        return sorted(str(r[0]) for r in rows)
    prefix = store.keys.prefix  # type: ignore[attr-defined]
    found: set[str] = set()
    for kind in ("s", "q", "h"):
        for raw in store.client.scan_iter(match=f"{_glob(prefix)}:{kind}:*", count=1000):  # type: ignore[attr-defined]
            rest = raw.decode()[len(prefix) + len(kind) + 2 :]
            found.add("\x1f".join(rest.split("\x1f")[:4]))
    return sorted(found)


def _copy_scope(src: Store, dst: Store, scope_key: str) -> int:
    """Copy a scope's records into ``dst`` in one transaction; returns its memories."""
    if src.backend == "sqlite":
        tables = {t: src._query(f"SELECT {cols} FROM {t} WHERE scope_key=?", (scope_key,))  # type: ignore[attr-defined]
                  for t, cols in _SQLITE_TABLES.items()}
        db = dst._db  # type: ignore[attr-defined]
        with dst._lock:  # type: ignore[attr-defined]
            db.execute("BEGIN IMMEDIATE")
            try:
                for table, cols in _SQLITE_TABLES.items():
                    marks = ",".join("?" * len(cols.split(",")))
                    db.executemany(f"INSERT OR REPLACE INTO {table}({cols}) VALUES ({marks})", tables[table])
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return len(tables["nodes"])
    keys, ids = _redis_scope_keys(src, scope_key)
    r_src, r_dst = src.client, dst.client  # type: ignore[attr-defined]
    src_prefix, dst_prefix = src.keys.prefix, dst.keys.prefix  # type: ignore[attr-defined]
    dumps = [(key, r_src.dump(key)) for key in keys]
    pipe = r_dst.pipeline(transaction=True)
    for key, blob in dumps:
        if blob is not None:
            pipe.restore(dst_prefix + key[len(src_prefix) :], 0, blob, replace=True)
    if ids:
        pipe.sadd(dst.keys.all(), *ids)  # type: ignore[attr-defined]
    pipe.execute()
    return len(ids)


def _drop_scope(store: Store, scope_key: str) -> None:
    if store.backend == "sqlite":
        db = store._db  # type: ignore[attr-defined]
        with store._lock:  # type: ignore[attr-defined]
            db.execute("BEGIN IMMEDIATE")
            try:
                for table in _SQLITE_TABLES:
                    db.execute(f"DELETE FROM {table} WHERE scope_key=?", (scope_key,))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        return
    keys, ids = _redis_scope_keys(store, scope_key)
    pipe = store.client.pipeline(transaction=True)  # type: ignore[attr-defined]
    for key in keys:  # one key a call: a cluster pipeline takes no more
        pipe.delete(key)
    if ids:
        pipe.srem(store.keys.all(), *ids)  # type: ignore[attr-defined]
    pipe.execute()


def _redis_scope_keys(store: Any, scope_key: str) -> tuple[list[str], list[str]]:
    """Every Redis key holding the scope's records, and its memories' ids."""
    k = store.keys
    ids = sorted(m.decode() for m in store.client.smembers(k.scope(scope_key)))
    keys = [k.scope(scope_key), k.seq(scope_key), k.stream(scope_key)] + [k.node(i) for i in ids]
    for kind in ("k", "h", "f"):
        pattern = f"{_glob(k.prefix)}:{kind}:{_glob(scope_key)}\x1f*"
        keys += [raw.decode() for raw in store.client.scan_iter(match=pattern, count=1000)]
    return [key for key in keys if store.client.exists(key)], ids


def _glob(text: str) -> str:
    """``text`` as a literal inside a Redis MATCH pattern."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
