"""Open a shard: its store (checked to be this shard's), its vector index, and the
:class:`Shard` over them, rebuilt from the store."""

from __future__ import annotations

import shutil
from collections.abc import Callable

from memorybus.clock import Clock
from memorybus.config import Config, resolve_hook
from memorybus.errors import IndexUnavailable
from memorybus.memory.events import Event
from memorybus.scopes import Router
from memorybus.shard.shard import Shard
from memorybus.storage.base import Store
from memorybus.storage.factory import local_index_dir, open_index, open_store
from memorybus.storage.identity import check_identity
from memorybus.storage.vectors import VectorIndex


def open_shard(
    config: Config,
    shard: str,
    *,
    clock: Clock | None = None,
    on_events: Callable[[list[Event]], None] | None = None,
    audit_key: bytes | None = None,
) -> Shard:
    """Open the store, check it is this shard's (see :mod:`.identity`), open the
    index, and rebuild the index from the store.

    An index that fails while it is rebuilt is removed and rebuilt once more from
    scratch; a store that fails raises StoreUnavailable (the caller retries later).
    ``audit_key``: signs the audit trail's checkpoints (see :mod:`.auditing`)."""
    store = open_store(config, shard)
    try:
        check_identity(config, shard, store)
        try:
            return _build(config, shard, store, open_index(config, shard), clock, on_events, audit_key)
        except IndexUnavailable:
            path = local_index_dir(config, shard)
            if path is None:
                raise
            shutil.rmtree(path, ignore_errors=True)
            return _build(config, shard, store, open_index(config, shard), clock, on_events, audit_key)
    except BaseException:
        store.close()
        raise


def _build(
    config: Config,
    shard: str,
    store: Store,
    index: VectorIndex,
    clock: Clock | None,
    on_events: Callable[[list[Event]], None] | None,
    audit_key: bytes | None = None,
) -> Shard:
    router, me = Router(config.num_shards), int(shard.rsplit("-", 1)[1])
    try:
        return Shard(
            shard,
            store,
            index,
            dim=config.vector_dim(),
            clock=clock,
            ranking=config.ranking,
            max_content_chars=config.max_content_chars,
            max_tags=config.max_tags,
            max_structured_bytes=config.max_structured_bytes,
            touch_flush_seconds=config.touch_flush_seconds,
            policy=config.bus,
            judge=resolve_hook(config.bus.judge, "bus.judge"),
            graph=config.graph,
            on_events=on_events,
            owns=lambda scope_key: router.shard_for(scope_key) == me,
            audit_key=audit_key,
        )
    except BaseException:
        index.close()
        raise
