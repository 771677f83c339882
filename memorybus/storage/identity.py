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

The store also records the model its vectors came from (``model``: its name as
configured, ``model_fingerprint``: :func:`memorybus.encoder.modelinfo.model_fingerprint`
as ``Config.fingerprint()`` gives it,
``embedding_dim``). Opening it with a model of another fingerprint or dimension
raises :class:`~memorybus.errors.ConfigError` naming both models, before anything
is read or written: vectors of two models are not comparable. A store written
before models were recorded (made with the only model there was, MiniLM) records
the configured one the first time it is opened.

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
from memorybus.errors import ConfigError, StoreMismatch
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
        **model_identity(config),
    }


def model_identity(config: Config) -> dict[str, str]:
    """What the store records of the model that makes its vectors."""
    return {
        "model": config.model_label(),
        "model_fingerprint": config.fingerprint(),
        "embedding_dim": str(config.vector_dim()),
    }


def check_model(config: Config, shard: str, meta: dict[str, str]) -> dict[str, str]:
    """The model fields to add to ``meta`` (none when it has them); ConfigError when
    ``meta`` records another model than ``config`` names."""
    mine = model_identity(config)
    if "model_fingerprint" not in meta:
        return mine
    if (meta["model_fingerprint"], meta.get("embedding_dim")) != (mine["model_fingerprint"], mine["embedding_dim"]):
        raise ConfigError("model_path", f"{config.shard_dir(shard)} holds vectors of model {meta.get('model')!r} "
                                        f"(dimension {meta.get('embedding_dim')}, fingerprint "
                                        f"{meta['model_fingerprint']}); this config names model {mine['model']!r} "
                                        f"(dimension {mine['embedding_dim']}, fingerprint "
                                        f"{mine['model_fingerprint']}): their vectors are not comparable. Open it "
                                        "with its own model, or give the other model a new data_dir")
    return {}


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
    missing = check_model(config, shard, meta)
    if missing:
        store.set_meta(missing)
        meta = {**meta, **missing}
    recorded = int(meta.get("num_shards", config.num_shards))
    if recorded != config.num_shards:
        raise StoreMismatch(shard, f"the bus was written with num_shards={recorded}, not {config.num_shards}: "
                                   "connect with Config(migrate=True) to move the scopes to the new shards")
    if marker is None or marker != meta:
        write_marker(config, shard, meta)
    return meta
