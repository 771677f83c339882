"""Store identity: a shard never starts on the wrong store, an empty one, or a
changed shard count.

Each store records, in its own meta (SQLite ``meta`` table, Redis ``<prefix>:meta``
hash), the bus namespace, the shard's name, the shard count it was written with
and a random store id. On the node's disk, next to the store (embedded) or next to
the derived index (Redis), ``<data_dir>/<shard>/shard.json`` records the same: its
presence says "a store existed here". Opening a shard then refuses, with
:class:`~memorybus.errors.StoreMismatch`, when

- the marker exists but the store is missing, empty or another store (its file was
  deleted, truncated or replaced; the Redis keys are gone);
- the store belongs to another shard or namespace;
- the store was written with another shard count: resharding moves scopes between
  shards (rendezvous routing), so the bus must be migrated first
  (``Config(migrate=True)``, see :mod:`memorybus.storage.reshard`).

A store written before identities existed (no meta, no marker, but records) is
adopted as it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from typing import Any

from memorybus.config import Config
from memorybus.errors import StoreMismatch
from memorybus.storage.base import Store

MARKER = "shard.json"


def marker_path(config: Config, shard: str) -> str:
    return os.path.join(config.shard_dir(shard), MARKER)


def read_marker(config: Config, shard: str) -> dict[str, Any] | None:
    try:
        with open(marker_path(config, shard), encoding="utf-8") as fh:
            value = json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise StoreMismatch(shard, f"its identity file {marker_path(config, shard)} is unreadable: {exc}") from None
    return value if isinstance(value, dict) else None


def write_marker(config: Config, shard: str, identity: dict[str, str]) -> None:
    """Write the marker atomically (temporary file, fsync, rename)."""
    path = marker_path(config, shard)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(identity, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def remove_marker(config: Config, shard: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(marker_path(config, shard))


def new_identity(config: Config, shard: str) -> dict[str, str]:
    return {
        "namespace": config.namespace,
        "shard": shard,
        "num_shards": str(config.num_shards),
        "store_id": uuid.uuid4().hex,
        "created": repr(time.time()),
    }


def store_file_missing(config: Config, shard: str, path: str) -> None:
    """Before a SQLite store is opened (opening creates the file): refuse if the
    marker says a store existed and its file is gone or empty."""
    marker = read_marker(config, shard)
    if marker is not None and (not os.path.exists(path) or os.path.getsize(path) == 0):
        what = "missing" if not os.path.exists(path) else "empty (truncated)"
        raise StoreMismatch(shard, f"its store {path} is {what}, but {marker_path(config, shard)} says store "
                                   f"{marker.get('store_id')} existed: restore it from a backup (or delete that "
                                   "file to start this shard empty)")


def check_identity(config: Config, shard: str, store: Store) -> dict[str, str]:
    """Check that ``store`` is this shard's store, written with this shard count;
    claim a new (or pre-identity) store. Returns the store's identity."""
    marker = read_marker(config, shard)
    meta = store.meta()
    if not meta:
        if marker is not None:
            raise StoreMismatch(shard, f"its store is empty or was replaced, but {marker_path(config, shard)} says "
                                       f"store {marker.get('store_id')} existed: restore it from a backup (or "
                                       "delete that file to start this shard empty)")
        meta = new_identity(config, shard)
        store.set_meta(meta)
        write_marker(config, shard, meta)
        return meta
    if meta.get("namespace") != config.namespace or meta.get("shard") != shard:
        raise StoreMismatch(shard, f"its store belongs to {meta.get('namespace')}/{meta.get('shard')}")
    if marker is not None and marker.get("store_id") != meta.get("store_id"):
        raise StoreMismatch(shard, f"its store is {meta.get('store_id')}, but {marker_path(config, shard)} says "
                                   f"{marker.get('store_id')}: the store was replaced")
    recorded = int(meta.get("num_shards", config.num_shards))
    if recorded != config.num_shards:
        raise StoreMismatch(shard, f"the bus was written with num_shards={recorded}, not {config.num_shards}: "
                                   "connect with Config(migrate=True) to move the scopes to the new shards")
    if marker is None or marker != meta:
        write_marker(config, shard, meta)
    return meta
