"""The state every :class:`~memorybus.client.MemoryBus` handle carries, and its wiring:
the actors it calls (found by name), which shards own a context's scopes, where a query
is embedded. The operation modules of this package (:mod:`~memorybus.client.memories`,
:mod:`~memorybus.client.queries`, ...) take a :class:`BusHandle`; the package's
``MemoryBus`` adds the public methods over them. This module imports none of them, so
the package has no import circle.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from memorybus.actors import runtime
from memorybus.bus.routing import partition_of
from memorybus.config import Config
from memorybus.errors import BusClosed, InvalidRequest, MemoryBusError
from memorybus.memory.items import build_memory
from memorybus.memory.model import MemoryNode
from memorybus.scopes import Context, Router

if TYPE_CHECKING:
    from memorybus.auth import Grant
    from memorybus.client.exit import ExitHook
    from memorybus.encoder.embedding import Embedder


class BusHandle:
    """A handle's state and wiring (see the module docstring)."""

    def __init__(self, config: Config) -> None:
        if not isinstance(config, Config):
            raise InvalidRequest("config", "must be a memorybus.Config")
        self.config = config
        self._router = Router(config.num_shards)
        self._shards: list[Any] | None = None
        self._embedders: list[Any] | None = None
        self._hubs: list[Any] | None = None
        self._maintenance: dict[str, Any] = {}
        self._rr = 0
        #: shard index -> (its handle, its direct channel or None); see client.channels
        self._channels: dict[int, tuple[Any, Any]] = {}
        self._local_failed = False
        #: the background load of this process's query model that ``connect`` starts
        #: once the actors are up (``query_encoder="auto"``); None: loaded on first use
        self._query_loader: threading.Thread | None = None
        self._closed: str | None = None
        self._owns_actors = False
        self._owns_ray = False
        self._exit_hook: ExitHook | None = None  # set by connect when it started Ray (client.exit)
        #: the credential every call carries and what it says (None: trusted mode, or
        #: a handle not yet connected); see memorybus.client.identity
        self._credential: str | None = None
        self._grant: Grant | None = None
        #: the operator's own handle (from connect): it never pickles
        self._pinned = False

    @property
    def closed(self) -> bool:
        """Whether this handle can no longer be used (closed, or Ray left)."""
        return self._closed is not None or not runtime.is_connected()

    def warm_up(self, timeout: float = 120.0) -> bool:
        """Wait (up to ``timeout`` seconds) for this process's query model, which
        ``connect`` loads in the background; True when recall now embeds queries in
        this process. Until then recall works, embedding queries in the embedder
        actor: call this only before timing recall, or to spend the load up front."""
        loader = self._query_loader
        if loader is not None:
            loader.join(timeout)
        return self._encodes_queries_here(blocking=True)

    # ----------------------------------------------------------------- wiring
    def _check_open(self) -> None:
        """BusClosed unless this handle can be used (see :attr:`closed`): raised before
        anything is sent, so a closed handle never starts Ray again."""
        if self._closed is not None:
            raise BusClosed(self.config.namespace, self._closed)
        if not runtime.is_connected():
            raise BusClosed(self.config.namespace, "this process is not connected to Ray (call memorybus.connect)")

    def _actor(self, name: str, namespace: str | None = None) -> Any:
        """The actor named ``name`` (in the bus's namespace unless another is given);
        BusClosed when the bus is not running."""
        from memorybus import actors

        self._check_open()
        try:
            return actors.lookup(name, namespace or self.config.namespace)
        except ValueError:
            raise BusClosed(self.config.namespace, f"no running actor {name!r} (the bus was shut down)") from None

    def _shard_handles(self) -> list[Any]:
        self._check_open()
        if self._shards is None:
            from memorybus import actors

            self._shards = [self._actor(actors.shard_actor_name(self.config, i)) for i in range(self.config.num_shards)]
        return self._shards

    def _embedder(self) -> Any:
        self._check_open()
        if self._embedders is None:
            from memorybus import actors

            self._embedders = [
                self._actor(actors.embedder_actor_name(self.config, i), actors.embedder_namespace(self.config))
                for i in range(self.config.embedder_replicas)
            ]
        self._rr = (self._rr + 1) % len(self._embedders)
        return self._embedders[self._rr]

    def _hub(self, partition: int) -> Any:
        self._check_open()
        if self._hubs is None:
            from memorybus import actors

            self._hubs = [self._actor(actors.hub_actor_name(self.config, i)) for i in range(self.config.bus.partitions)]
        return self._hubs[partition]

    def _hub_for(self, org: str) -> tuple[int, Any]:
        p = partition_of(org, self.config.bus.partitions)
        return p, self._hub(p)

    def _maintenance_actor(self, kind: str) -> Any:
        from memorybus import actors

        self._check_open()
        if kind not in self._maintenance:
            try:
                self._maintenance[kind] = actors.lookup(
                    actors.maintenance_name(self.config, kind), self.config.namespace
                )
            except ValueError:
                self._maintenance[kind] = actors.create_maintenance(self.config, kind)
        return self._maintenance[kind]

    def _owners(self, context: Context) -> list[int]:
        """The shards that own the scopes ``context`` may see."""
        return sorted({self._router.shard_for(s.key) for s in context.visible_scopes()})

    def _owners_narrowest_first(self, context: Context) -> list[int]:
        """:meth:`_owners`, the shard of the context's narrowest scope first, then in the
        order of the next narrower ones: a recall calls them in this order, so the shard
        likely to hold the caller's own memories (the most work) starts first. Only the
        order of the calls: their answers are merged in shard order."""
        order: list[int] = []
        for scope in reversed(context.visible_scopes()):  # visible_scopes lists the org first
            shard = self._router.shard_for(scope.key)
            if shard not in order:
                order.append(shard)
        return order

    def _build(self, item: Any, context: Context, now: float) -> MemoryNode:
        cfg = self.config
        return build_memory(item, context, now, max_content_chars=cfg.max_content_chars, max_tags=cfg.max_tags,
                            max_structured_bytes=cfg.max_structured_bytes)  # fmt: skip

    def _local_encoder(self) -> Embedder | None:
        """The query encoder in this process, or None when ``query_encoder="auto"`` and
        the model cannot be loaded here (the embedder actor is used instead)."""
        if self._local_failed:
            return None
        from memorybus.encoder.embedding import shared_query_encoder

        try:
            # as many cached queries as the embedder caches texts (up to 1000): no cache, no cache here
            return shared_query_encoder(self.config.resolved_model_path(), min(1000, self.config.embed_cache_size))
        except (MemoryBusError, OSError, ImportError):
            if self.config.query_encoder == "local":
                raise
            self._local_failed = True
            return None

    def _encodes_queries_here(self, blocking: bool) -> bool:
        """Whether a recall embeds its query in this process (see ``Config.query_encoder``)."""
        mode = self.config.query_encoder
        if mode != "auto":
            return mode == "local"
        if not blocking or self._local_failed or runtime.in_ray_worker():
            return False
        # while connect's background load runs, the embedder actor embeds (no wait here)
        loader = self._query_loader
        return loader is None or not loader.is_alive()
