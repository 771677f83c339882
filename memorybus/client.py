"""The client: ``memorybus.connect(config)`` returns a :class:`MemoryBus`.

A MemoryBus pickles to its config, so it can be passed into Ray tasks and
actors and used there. Every call has a sync form and an ``*_async`` form over
one implementation (an operation generator driven by
:mod:`memorybus.actors.runtime`).

What a returned call guarantees: ``remember``/``remember_many``/``update``/
``forget`` return after the owning shard committed durably to its store.
``remember_many`` validates the whole batch before anything is written; each
shard applies its part atomically. Calls by id (``get``, ``update``,
``forget``) ask the one shard the id routes to and touch at most one memory.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from memorybus.actors import runtime
from memorybus.actors.runtime import Op, Settled
from memorybus.client_admin import AdminClientMixin
from memorybus.client_facts import FactsClientMixin, MaintenanceClientMixin
from memorybus.client_life import LifecycleMixin, open_bus
from memorybus.client_list import ListingClientMixin
from memorybus.client_subs import SubscriptionClientMixin
from memorybus.config import Config
from memorybus.errors import (
    InvalidMemory,
    InvalidRequest,
    MemoryBusError,
    MemoryNotFound,
    PartialWrite,
)
from memorybus.items import build_memory, turn_items
from memorybus.model import MemoryKind, MemoryNode, MemoryStatus
from memorybus.prompt import ContextBlock, ContextBuilder
from memorybus.retrieval import DEFAULT_STATUSES, RecallHit, merge_hits
from memorybus.retrieval.options import RecallOptions
from memorybus.retrieval.structure import embedding_texts
from memorybus.scopes import Context, Level, Router, Scope
from memorybus.shard.ops import new_op, tag_op
from memorybus.validation import check_text

if TYPE_CHECKING:
    from memorybus.embedding import Embedder

class MemoryBus(
    LifecycleMixin,
    FactsClientMixin,
    SubscriptionClientMixin,
    MaintenanceClientMixin,
    ListingClientMixin,
    AdminClientMixin,
):
    """A handle on the memory bus. Cheap to pickle; actors are found by name.

    Get one from :func:`connect`; use it as a context manager or call :meth:`close`
    (see :mod:`memorybus.client_life`). Calls on a closed handle raise ``BusClosed``.
    """

    def __init__(self, config: Config) -> None:
        if not isinstance(config, Config):
            raise InvalidRequest("config", "must be a memorybus.Config")
        self.config = config
        self.router = Router(config.num_shards)
        self._shards: list[Any] | None = None
        self._embedders: list[Any] | None = None
        self._hubs: list[Any] | None = None
        self._maintenance: dict[str, Any] = {}
        self._rr = 0
        self._local_failed = False
        self._closed: str | None = None

    # ------------------------------------------------------------------ wiring
    def __reduce__(self) -> tuple[Any, ...]:
        return (MemoryBus, (self.config,))

    def _shard_handles(self) -> list[Any]:
        self._check_open()
        if self._shards is None:
            from memorybus import actors

            self._shards = [self._actor(actors.shard_actor_name(self.config, i)) for i in range(self.config.num_shards)]
        return self._shards

    def _local_encoder(self) -> Embedder | None:
        """The query encoder in this process, or None when ``query_encoder="auto"`` and
        the model cannot be loaded here (the embedder actor is used instead)."""
        if self._local_failed:
            return None
        from memorybus.embedding import shared_query_encoder

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
        return blocking and not self._local_failed and not runtime.in_ray_worker()

    def _embedder(self) -> Any:
        self._check_open()
        if self._embedders is None:
            from memorybus import actors

            self._embedders = [
                self._actor(actors.embedder_actor_name(self.config, i)) for i in range(self.config.embedder_replicas)
            ]
        self._rr = (self._rr + 1) % len(self._embedders)
        return self._embedders[self._rr]

    def _shard_for(self, scope: Scope) -> Any:
        return self._shard_handles()[self.router.shard_for(scope.key)]

    # --------------------------------------------------------------- building
    def _build(self, item: Any, context: Context, now: float) -> MemoryNode:
        cfg = self.config
        return build_memory(item, context, now, max_content_chars=cfg.max_content_chars, max_tags=cfg.max_tags,
                            max_structured_bytes=cfg.max_structured_bytes)  # fmt: skip

    # ----------------------------------------------------------------- remember
    def _remember_many_op(
        self, items: Sequence[Any], context: Context, op_id: str | None = None
    ) -> Op[list[MemoryNode]]:
        op = new_op(op_id)
        nodes = yield from tag_op(op, self._remember_nodes_op(items, context, op))
        return nodes

    def _remember_nodes_op(self, items: Sequence[Any], context: Context, op: str) -> Op[list[MemoryNode]]:
        _check_context(context)
        if isinstance(items, str | bytes | dict) or not isinstance(items, Iterable):
            raise InvalidRequest("items", "must be a list of memories")
        items = list(items)
        if len(items) > self.config.max_batch:
            raise InvalidRequest("items", f"{len(items)} exceeds max_batch {self.config.max_batch}")
        now = time.time()
        nodes = [self._build(item, context, now) for item in items]
        ids = [n.id for n in nodes]
        if len(set(ids)) != len(ids):
            raise InvalidRequest("items", "duplicate ids")
        if not nodes:
            return []
        handles = self._shard_handles()
        chunk = self.config.ingest_chunk
        # one call per (chunk, shard); each chunk is one operation, recorded by each shard for its part
        calls: list[tuple[int, int, list[int]]] = []  # (chunk start, shard, item indexes)
        for start in range(0, len(nodes), chunk):
            by_shard: dict[int, list[int]] = {}
            for i in range(start, min(start + chunk, len(nodes))):
                by_shard.setdefault(self.router.shard_for(nodes[i].scope.key), []).append(i)
            calls += [(start, s, idx) for s, idx in by_shard.items()]
        chosen = [i for i, item in enumerate(items) if isinstance(item, MemoryNode) or
                  (isinstance(item, dict) and item.get("id") is not None)]
        if len(calls) > 1 and chosen:
            # every part is checked before any shard writes: a caller-chosen id taken by
            # another memory fails the whole call with nothing written
            per_shard: dict[int, list[MemoryNode]] = {}
            for i in chosen:
                per_shard.setdefault(self.router.shard_for(nodes[i].scope.key), []).append(nodes[i])
            yield [handles[s].check_puts.remote(context, part) for s, part in per_shard.items()]
        stored: list[MemoryNode | None] = [None] * len(nodes)
        errors: dict[int, BaseException] = {}
        vectors: dict[int, Any] = {}
        window: list[tuple[list[tuple[int, int, list[int]]], Settled]] = []
        for n, (start, s, idx) in enumerate(calls):
            if start not in vectors:
                part = nodes[start : start + chunk]
                texts = embedding_texts(part, self.config.ranking.contextual_text)  # no date stamp in vectors
                vectors = {start: self._embedder().encode.remote(texts)}
            ref = handles[s].put_many.remote(
                context, [nodes[i] for i in idx], vectors[start], [i - start for i in idx], f"{op}/{start // chunk}"
            )
            if not window or window[-1][0][0][0] != start:
                window.append(([], Settled([])))
            window[-1][0].append((start, s, idx))
            window[-1][1].refs.append(ref)
            last = n == len(calls) - 1
            while window and (len(window) > 4 or last):
                sent, refs = window.pop(0)
                for (_, _, asked), answer in zip(sent, (yield refs), strict=True):
                    for i, node in zip(asked, answer if isinstance(answer, list) else [answer] * len(asked),
                                       strict=True):
                        if isinstance(node, BaseException):
                            errors[i] = node
                        else:
                            stored[i] = node
        if not errors:
            return [n for n in stored if n is not None]
        if all(n is None for n in stored):
            raise errors[min(errors)]  # nothing was stored (an OutcomeUnknown says it may have been)
        raise PartialWrite(op, stored, errors)

    def remember(self, content: str, context: Context, *, op_id: str | None = None, **fields: Any) -> MemoryNode:
        """Store one memory; returns it as stored (version 1).

        ``fields`` are MemoryNode fields (``scope`` as a level name such as
        ``"user"``, ``kind``, ``importance``, ``tags``, ``valid_from``, ``ttl``
        seconds, ...), including the optional conversation fields ``thread``,
        ``position`` and ``speaker``. ``source`` defaults to ``agent:<name>`` of
        the context's agent, so every hit says who wrote it.

        ``scope`` defaults to the writer's agent level, ``(org, user, agent)``: the
        agent still sees it in its next session, other agents do not (``kind="working"``
        defaults to the session). Returns once the owning shard committed durably. A
        repeat of a stored memory (see ``BusPolicy.repeat_window_seconds``) returns the
        stored one, reinforced, instead of a copy.

        ``id`` (optional, a remember field): keep this id instead of a fresh one. It must
        be an id of the memory's scope (``memorybus.new_id(scope)``, ``derived_id(scope,
        name)``, or one exported from that scope: see :mod:`memorybus.ids`); it is unique
        across shards, so an id already taken is refused (``VersionConflict`` when the
        caller can see that memory, a bare ``ScopeViolation`` when it cannot).

        ``op_id``: this write's operation id (default: a fresh one). Calling again with
        the same id (a retry after an error such as OutcomeUnknown) returns the first
        call's outcome instead of writing again."""
        op = self._remember_many_op([{"content": content, **fields}], context, op_id)
        return runtime.run_sync(op, self.config.write_timeout)[0]

    async def remember_async(
        self, content: str, context: Context, *, op_id: str | None = None, **fields: Any
    ) -> MemoryNode:
        op = self._remember_many_op([{"content": content, **fields}], context, op_id)
        return (await runtime.run_async(op, self.config.write_timeout))[0]

    def remember_many(self, items: Sequence[Any], context: Context, *, op_id: str | None = None) -> list[MemoryNode]:
        """Store many memories (str, dict of remember fields, or MemoryNode each);
        ``op_id`` as for :meth:`remember`."""
        return runtime.run_sync(self._remember_many_op(items, context, op_id), self.config.write_timeout)

    async def remember_many_async(
        self, items: Sequence[Any], context: Context, *, op_id: str | None = None
    ) -> list[MemoryNode]:
        return await runtime.run_async(self._remember_many_op(items, context, op_id), self.config.write_timeout)

    def remember_turns(
        self,
        turns: Sequence[Any],
        context: Context,
        *,
        thread: str,
        start: int = 0,
        op_id: str | None = None,
        **fields: Any,
    ) -> list[MemoryNode]:
        """Store the turns of one conversation thread, in order (one episodic memory each).

        A turn is its text, a ``(speaker, text)`` pair, or a dict of remember fields
        (``content`` and e.g. ``speaker``, ``valid_from``). Turn ``i`` gets
        ``thread`` and ``position = start + i`` unless it names its own;
        ``fields`` (e.g. ``scope="user"``, ``valid_from``) apply to every turn.
        Validated and stored like :meth:`remember_many` (``op_id`` as there).
        """
        return runtime.run_sync(self._remember_many_op(turn_items(turns, thread, start, fields), context, op_id))

    async def remember_turns_async(
        self,
        turns: Sequence[Any],
        context: Context,
        *,
        thread: str,
        start: int = 0,
        op_id: str | None = None,
        **fields: Any,
    ) -> list[MemoryNode]:
        op = self._remember_many_op(turn_items(turns, thread, start, fields), context, op_id)
        return await runtime.run_async(op)

    # ------------------------------------------------------------------- recall
    def _recall_op(
        self,
        query: str,
        context: Context,
        k: int | None,
        kinds: Sequence[MemoryKind | str] | None,
        statuses: Sequence[MemoryStatus | str] | None,
        include_archived: bool,
        include_deprecated: bool,
        *,
        as_of: float | None = None,
        start: float | None = None,
        end: float | None = None,
        min_relevance: float | None = None,
        options: RecallOptions | None = None,
        blocking: bool = False,
    ) -> Op[list[RecallHit]]:
        _check_context(context)
        if not isinstance(query, str) or not query.strip():
            raise InvalidRequest("query", "must be a non-empty string")
        check_text("query", query, InvalidRequest)
        if len(query) > self.config.max_content_chars:
            raise InvalidRequest("query", "is longer than max_content_chars")
        k = self.config.default_recall_k if k is None else k
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
            raise InvalidRequest("k", "must be an int between 1 and 1000")
        kind_list = _enums(MemoryKind, kinds, "kinds")
        status_list = _enums(MemoryStatus, statuses, "statuses") or list(DEFAULT_STATUSES)
        if include_archived:
            status_list.append(MemoryStatus.ARCHIVED)
        if include_deprecated:
            status_list.append(MemoryStatus.DEPRECATED)
        if options is not None and not isinstance(options, RecallOptions):
            raise InvalidRequest("options", "must be a RecallOptions")
        opts = options or RecallOptions()
        opts = replace(
            opts,
            as_of=opts.as_of if as_of is None else as_of,
            start=opts.start if start is None else start,
            end=opts.end if end is None else end,
            min_relevance=opts.min_relevance if min_relevance is None else min_relevance,
        ).validate()
        handles = self._shard_handles()
        owners = self._owners(context)
        encoder = self._local_encoder() if self._encodes_queries_here(blocking) else None
        # embedded here, in the caller's process (no embedder round trip); or the vector's
        # ref: Ray starts the shards' searches once the embedder has it, with the vector
        # inlined in the call (no fetch back from this process)
        vector: Any = encoder.encode([query])[0] if encoder is not None else self._embedder().encode.remote([query])
        request = (context, k, kind_list or None, status_list, query, opts)
        refs = [handles[i].recall.remote(request, vector) for i in owners]
        groups = yield refs
        return merge_hits(groups, k)

    def recall(
        self,
        query: str,
        context: Context,
        *,
        k: int | None = None,
        kinds: Sequence[MemoryKind | str] | None = None,
        statuses: Sequence[MemoryStatus | str] | None = None,
        include_archived: bool = False,
        include_deprecated: bool = False,
        as_of: float | None = None,
        start: float | None = None,
        end: float | None = None,
        min_relevance: float | None = None,
        options: RecallOptions | None = None,
    ) -> list[RecallHit]:
        """The ``k`` memories visible to ``context`` that best answer ``query``.

        Hybrid recall in every shard that owns a visible scope (dense + keyword,
        thread, speaker and time aware; see :mod:`memorybus.retrieval.ranking`),
        merged by score. Deprecated (superseded) and archived memories are
        excluded unless asked for; ``as_of`` (epoch seconds) recalls the state
        valid at that time; ``start``/``end`` keep memories whose event time
        (``valid_from``) is in ``[start, end)``. ``options``
        (:class:`~memorybus.retrieval.RecallOptions`) adds thread neighbours and
        relation-linked memories after the ``k`` hits, sets the reference time of
        relative expressions ("last week"), or makes the recall read-only
        (``touch=False``).

        Each hit's ``relevance`` (0..1) says how well it matches the query and
        its ``score`` (0..1) orders the hits (see
        :class:`~memorybus.retrieval.RecallHit`). Memories whose relevance is
        below ``min_relevance`` (default ``config.ranking.min_relevance``) are
        not returned: a query nothing answers returns ``[]``.
        """
        op = self._recall_op(
            query, context, k, kinds, statuses, include_archived, include_deprecated, as_of=as_of, start=start,
            end=end, min_relevance=min_relevance, options=options, blocking=True,
        )  # fmt: skip
        return runtime.run_sync(op, self.config.read_timeout)

    async def recall_async(
        self,
        query: str,
        context: Context,
        *,
        k: int | None = None,
        kinds: Sequence[MemoryKind | str] | None = None,
        statuses: Sequence[MemoryStatus | str] | None = None,
        include_archived: bool = False,
        include_deprecated: bool = False,
        as_of: float | None = None,
        start: float | None = None,
        end: float | None = None,
        min_relevance: float | None = None,
        options: RecallOptions | None = None,
    ) -> list[RecallHit]:
        op = self._recall_op(
            query, context, k, kinds, statuses, include_archived, include_deprecated, as_of=as_of, start=start,
            end=end, min_relevance=min_relevance, options=options,
        )  # fmt: skip
        return await runtime.run_async(op, self.config.read_timeout)

    # ---------------------------------------------------------- prompt context
    def _context_for_op(
        self,
        query: str,
        context: Context,
        token_budget: int,
        k: int,
        options: RecallOptions | None,
        min_relevance: float | None = None,
        blocking: bool = False,
    ) -> Op[ContextBlock]:
        if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
            raise InvalidRequest("token_budget", "must be a positive int")
        recall = self._recall_op(
            query, context, k, None, None, False, False, min_relevance=min_relevance, options=options,
            blocking=blocking,
        )  # fmt: skip
        hits = yield from recall
        owners = self._owners(context)
        handles = self._shard_handles()
        pinned_groups = yield [handles[i].pinned.remote(context) for i in owners]
        builder = ContextBuilder([n for g in pinned_groups for n in g], hits, token_budget)
        texts = builder.texts_to_count()
        embedder = self._embedder()
        (counted,) = yield [embedder.count_tokens.remote(texts)]
        counts = dict(zip(texts, counted, strict=True))
        block = builder.build(counts)
        while True:
            (total,) = yield [embedder.count_tokens.remote([block.text])]
            block.tokens = int(total[0]) if block.text else 0
            if block.tokens <= token_budget:
                return block
            block = builder.shrink(block, counts)

    def context_for(
        self,
        query: str,
        context: Context,
        token_budget: int = 1000,
        *,
        k: int = 20,
        min_relevance: float | None = None,
        options: RecallOptions | None = None,
    ) -> ContextBlock:
        """A prompt-ready block for ``query``: core memory (memories tagged ``pinned`` or
        ``core``, most important first), then the recalled memories grouped by
        thread (or session) and dated. Recalled memories pass the same relevance
        floor as :meth:`recall` (``min_relevance``, default
        ``config.ranking.min_relevance``): a query nothing answers adds none. Its
        text never exceeds ``token_budget`` tokens of the embedding model's
        tokenizer; what did not fit is listed in ``dropped``. ``options`` as for
        :meth:`recall` (e.g. ``RecallOptions(neighbors=1)`` to bring the turns
        around each hit).
        """
        op = self._context_for_op(query, context, token_budget, k, options, min_relevance, blocking=True)
        return runtime.run_sync(op, self.config.read_timeout)

    async def context_for_async(
        self,
        query: str,
        context: Context,
        token_budget: int = 1000,
        *,
        k: int = 20,
        min_relevance: float | None = None,
        options: RecallOptions | None = None,
    ) -> ContextBlock:
        op = self._context_for_op(query, context, token_budget, k, options, min_relevance)
        return await runtime.run_async(op, self.config.read_timeout)

    # ---------------------------------------------------- get / update / forget
    def _owners(self, context: Context) -> list[int]:
        """The shards that own the scopes ``context`` may see."""
        return sorted({self.router.shard_for(s.key) for s in context.visible_scopes()})

    def _holder_op(self, context: Context, memory_id: str) -> Op[int]:
        """The one shard that may hold ``memory_id``: the shard its bucket routes to (see
        :mod:`memorybus.ids`). An id without a bucket (a store written before ids carried
        one) is looked for on every shard, and only a single holder is acted on: the one
        ``context`` may see when several hold it."""
        _check_context(context)
        _check_memory_id(memory_id)
        routed = self.router.shard_for_id(memory_id)
        if routed is not None:
            return routed
        results = yield Settled([h.get.remote(context, memory_id) for h in self._shard_handles()])
        holders = [i for i, r in enumerate(results) if not isinstance(r, MemoryNotFound)]
        if len(holders) > 1:
            holders = [i for i in holders if not isinstance(results[i], BaseException)]
            if len(holders) != 1:
                raise InvalidRequest("memory_id", "is held by several shards (an id without its scope's bucket)")
        if not holders:
            raise MemoryNotFound(memory_id)
        return holders[0]

    def _fanout_op(self, method: str, context: Context, memory_id: str, *args: Any) -> Op[Any]:
        """Call ``method`` on the one shard that holds ``memory_id`` (:meth:`_holder_op`)."""
        shard = yield from self._holder_op(context, memory_id)
        (result,) = yield [getattr(self._shard_handles()[shard], method).remote(context, memory_id, *args)]
        return result

    def _get_op(self, memory_id: str, context: Context) -> Op[MemoryNode]:
        node = yield from self._fanout_op("get", context, memory_id)
        return node

    def get(self, memory_id: str, context: Context) -> MemoryNode:
        """The memory with this id, if ``context`` may see it."""
        return runtime.run_sync(self._get_op(memory_id, context), self.config.read_timeout)

    async def get_async(self, memory_id: str, context: Context) -> MemoryNode:
        return await runtime.run_async(self._get_op(memory_id, context), self.config.read_timeout)

    def _update_op(
        self, memory_id: str, context: Context, expected_version: int, changes: dict[str, Any], op_id: str | None
    ) -> Op[MemoryNode]:
        op = new_op(op_id)
        if isinstance(expected_version, bool) or not isinstance(expected_version, int):
            raise InvalidRequest("expected_version", "must be an int")
        if not changes:
            raise InvalidRequest("changes", "nothing to update")
        changes = dict(changes)
        for name in ("kind", "status"):
            if name in changes:
                enum = MemoryKind if name == "kind" else MemoryStatus
                try:
                    changes[name] = enum(changes[name])
                except ValueError:
                    raise InvalidMemory(name, f"unknown {name} {changes[name]!r}") from None
        vector = None
        if "content" in changes:
            content = changes["content"]
            probe = MemoryNode(content=content, scope=context.scope)
            probe.validate(max_content_chars=self.config.max_content_chars)
            vector = self._embedder().encode.remote([content])
        shards = self._fanout_op("update", context, memory_id, expected_version, changes, vector, op)
        node = yield from tag_op(op, shards)
        return node

    def update(
        self, memory_id: str, context: Context, *, expected_version: int, op_id: str | None = None, **changes: Any
    ) -> MemoryNode:
        """Compare-and-set: change fields if the stored version is ``expected_version``.

        Raises VersionConflict (with the actual version) otherwise: one winner per
        version, even between two callers making the same change. ``op_id`` as for
        :meth:`remember`: a retry with the same id answers the first outcome.
        """
        op = self._update_op(memory_id, context, expected_version, changes, op_id)
        return runtime.run_sync(op, self.config.write_timeout)

    async def update_async(
        self, memory_id: str, context: Context, *, expected_version: int, op_id: str | None = None, **changes: Any
    ) -> MemoryNode:
        op = self._update_op(memory_id, context, expected_version, changes, op_id)
        return await runtime.run_async(op, self.config.write_timeout)

    def _forget_op(
        self, memory_id: str, context: Context, expected_version: int | None, op_id: str | None
    ) -> Op[bool]:
        op = new_op(op_id)
        done = yield from tag_op(op, self._forget_shards_op(memory_id, context, expected_version, op))
        return done

    def _forget_shards_op(
        self, memory_id: str, context: Context, expected_version: int | None, op: str
    ) -> Op[bool]:
        if expected_version is not None and (
            isinstance(expected_version, bool) or not isinstance(expected_version, int)
        ):
            raise InvalidRequest("expected_version", "must be an int or None")
        deleted = yield from self._fanout_op("delete", context, memory_id, expected_version, op)
        if not deleted:
            raise MemoryNotFound(memory_id)
        return True

    def forget(
        self, memory_id: str, context: Context, *, expected_version: int | None = None, op_id: str | None = None
    ) -> bool:
        """Delete a memory from store and index. Raises MemoryNotFound if absent.
        ``op_id`` as for :meth:`remember`: a retry of a forget that succeeded answers True."""
        return runtime.run_sync(self._forget_op(memory_id, context, expected_version, op_id), self.config.write_timeout)

    async def forget_async(
        self, memory_id: str, context: Context, *, expected_version: int | None = None, op_id: str | None = None
    ) -> bool:
        op = self._forget_op(memory_id, context, expected_version, op_id)
        return await runtime.run_async(op, self.config.write_timeout)

    # ----------------------------------------------------------------- upkeep
    def flush(self) -> None:
        """Write pending access statistics of every shard to its store."""
        runtime.wait_ready([h.flush.remote() for h in self._shard_handles()], timeout=60)

    def count(self) -> int:
        refs = [h.count.remote() for h in self._shard_handles()]
        return sum(runtime.run_sync(runtime.iter_refs(refs), 60))

    def embed(self, texts: Sequence[str] | str) -> np.ndarray:
        """Embed texts with the bus's model (through the batching embedder): one row per
        text; a single string is one text (one row), never its characters."""
        items = [texts] if isinstance(texts, str) else texts
        if isinstance(items, bytes | dict) or not isinstance(items, Iterable):
            raise InvalidRequest("texts", "must be a string or a list of strings")
        items = list(items)
        for t in items:
            check_text("texts", t, InvalidRequest)
        return runtime.run_sync(runtime.iter_refs([self._embedder().encode.remote(items)]), self.config.read_timeout)[0]

    def with_timeout(self, seconds: float | None) -> MemoryBus:
        """A handle on the same bus whose calls (reads and writes) give up after
        ``seconds`` with OperationTimeout (None: wait as long as it takes)."""
        other = MemoryBus(self.config.with_(read_timeout=seconds, write_timeout=seconds))
        other._shards, other._embedders, other._hubs = self._shards, self._embedders, self._hubs
        return other


def _check_context(context: object) -> None:
    if not isinstance(context, Context):
        raise InvalidRequest("context", f"must be a Context, got {type(context).__name__}")


def _check_memory_id(memory_id: object) -> str:
    """A memory id: a non-empty string; one that is no UUID names no memory."""
    if not isinstance(memory_id, str) or not memory_id:
        raise InvalidRequest("memory_id", "must be a non-empty string")
    check_text("memory_id", memory_id, InvalidRequest)
    try:
        uuid.UUID(memory_id)
    except ValueError:
        raise MemoryNotFound(memory_id) from None
    return memory_id


def _enums(enum: Any, values: Sequence[Any] | None, name: str) -> list[Any]:
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    try:
        return [enum(v) for v in values]
    except ValueError:
        raise InvalidRequest(name, f"unknown value in {list(values)!r}") from None


def connect(config: Config | None = None, **ray_init_kwargs: Any) -> MemoryBus:
    """Start (or join) Ray, create or join the bus's actors, and return a client.

    ``ray_init_kwargs`` go to ``ray.init`` when Ray is not yet running (where it is
    started or joined: ``Config.ray_address``, see ``runtime.choose_address``).
    Raises ``ConfigError`` when a bus of the same namespace already runs on other
    storage. Progress (Ray, actors, model) is logged on the ``memorybus`` logger.
    Use the returned bus as a context manager, or call ``close()``.
    """
    return open_bus(MemoryBus, config, ray_init_kwargs)


__all__ = ["Level", "MemoryBus", "MemoryBusError", "connect"]
