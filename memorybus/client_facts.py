"""The bus half of the client: keyed facts, broadcast, subscriptions.

Mixed into :class:`memorybus.client.MemoryBus`; same conventions: every call has a
sync and an ``*_async`` form over one operation generator.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from memorybus.actors import runtime
from memorybus.actors.runtime import Op
from memorybus.conflicts import Strategy
from memorybus.errors import InvalidMemory, InvalidRequest, ScopeViolation
from memorybus.events import Event
from memorybus.model import MemoryKind, MemoryNode
from memorybus.pubsub.routing import partition_of
from memorybus.scopes import Context, Level, Scope
from memorybus.shard import FactResult
from memorybus.shard.ops import new_op, tag_op
from memorybus.validation import check_text, check_time

if TYPE_CHECKING:
    from memorybus.config import Config
    from memorybus.scopes import Router


def _check_context(context: object) -> Context:
    if not isinstance(context, Context):
        raise InvalidRequest("context", f"must be a Context, got {type(context).__name__}")
    return context


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key.strip() or len(key) > 512:
        raise InvalidMemory("key", "must be a non-empty string of at most 512 characters")
    return check_text("key", key, InvalidMemory)


class FactsClientMixin:
    """Keyed facts, broadcast and subscriptions for :class:`MemoryBus`."""

    config: Config
    router: Router
    _hubs: list[Any] | None

    # provided by MemoryBus
    def _embedder(self) -> Any:
        raise NotImplementedError

    def _check_open(self) -> None:
        raise NotImplementedError

    def _actor(self, name: str) -> Any:
        raise NotImplementedError

    def _shard_handles(self) -> list[Any]:
        raise NotImplementedError

    def _build(self, item: Any, context: Context, now: float) -> MemoryNode:
        raise NotImplementedError

    def _hub(self, partition: int) -> Any:
        self._check_open()
        if self._hubs is None:
            from memorybus import actors

            self._hubs = [self._actor(actors.hub_actor_name(self.config, i)) for i in range(self.config.bus.partitions)]
        return self._hubs[partition]

    def _hub_for(self, org: str) -> tuple[int, Any]:
        p = partition_of(org, self.config.bus.partitions)
        return p, self._hub(p)

    # ------------------------------------------------------------ keyed facts
    def _assert_fact_op(
        self,
        key: str,
        content: str,
        context: Context,
        strategy: Strategy | str | None,
        fields: dict[str, Any],
        op_id: str | None = None,
    ) -> Op[FactResult]:
        op = new_op(op_id)
        result = yield from tag_op(op, self._assert_one_op(key, content, context, strategy, fields, op))
        return result

    def _assert_one_op(
        self,
        key: str,
        content: str,
        context: Context,
        strategy: Strategy | str | None,
        fields: dict[str, Any],
        op: str,
    ) -> Op[FactResult]:
        _check_context(context)
        _check_key(key)
        if strategy is not None:
            strategy = Strategy.parse(strategy).value
        fields = dict(fields)
        fields.setdefault("kind", MemoryKind.SEMANTIC)
        node = self._build({"content": content, "key": key, **fields}, context, time.time())
        vector = self._embedder().encode.remote([content])
        shard = self._shard_handles()[self.router.shard_for(node.scope.key)]
        (result,) = yield [shard.assert_fact.remote(context, node, vector, strategy, op)]
        return result

    def assert_fact(
        self,
        key: str,
        content: str,
        context: Context,
        *,
        confidence: float = 1.0,
        strategy: Strategy | str | None = None,
        op_id: str | None = None,
        **fields: Any,
    ) -> FactResult:
        """Assert a value of the keyed fact ``key`` in ``scope`` (default: the context's).

        Resolution (``strategy``, default from config) decides whether it becomes
        current; either way it is recorded in the fact's history. ``fields`` are
        remember fields (``scope``, ``valid_from``, ``importance``, ``tags``, ...).
        ``op_id``: a retry with the same id answers the first outcome (``created``
        stays ``created``), recording nothing twice.
        """
        op = self._assert_fact_op(key, content, context, strategy, {"confidence": confidence, **fields}, op_id)
        return runtime.run_sync(op, self.config.write_timeout)

    async def assert_fact_async(
        self,
        key: str,
        content: str,
        context: Context,
        *,
        confidence: float = 1.0,
        strategy: Strategy | str | None = None,
        op_id: str | None = None,
        **fields: Any,
    ) -> FactResult:
        op = self._assert_fact_op(key, content, context, strategy, {"confidence": confidence, **fields}, op_id)
        return await runtime.run_async(op, self.config.write_timeout)

    def _assert_facts_op(
        self, items: list[dict[str, Any]], context: Context, strategy: Strategy | str | None, op_id: str | None
    ) -> Op[list[FactResult]]:
        op = new_op(op_id)
        results = yield from tag_op(op, self._assert_many_op(items, context, strategy, op))
        return results

    def _assert_many_op(
        self, items: list[dict[str, Any]], context: Context, strategy: Strategy | str | None, op: str
    ) -> Op[list[FactResult]]:
        _check_context(context)
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise InvalidRequest("items", "must be a list of dicts with key and content")
        if len(items) > self.config.max_batch:
            raise InvalidRequest("items", f"{len(items)} exceeds max_batch {self.config.max_batch}")
        if strategy is not None:
            strategy = Strategy.parse(strategy).value
        now = time.time()
        nodes = []
        for item in items:
            fields = dict(item)
            _check_key(fields.get("key"))
            fields.setdefault("kind", MemoryKind.SEMANTIC)
            nodes.append(self._build(fields, context, now))
        if not nodes:
            return []
        vectors = self._embedder().encode.remote([n.content for n in nodes])
        groups: dict[int, list[int]] = {}
        for i, n in enumerate(nodes):
            groups.setdefault(self.router.shard_for(n.scope.key), []).append(i)
        handles = self._shard_handles()
        order = list(groups)
        refs = [
            handles[s].assert_facts.remote(context, [nodes[i] for i in groups[s]], vectors, groups[s], strategy, op)
            for s in order
        ]
        parts = yield refs
        out: list[FactResult | None] = [None] * len(nodes)
        for s, part in zip(order, parts, strict=True):
            for i, r in zip(groups[s], part, strict=True):
                out[i] = r
        return [r for r in out if r is not None]

    def assert_facts(
        self,
        items: list[dict[str, Any]],
        context: Context,
        *,
        strategy: Strategy | str | None = None,
        op_id: str | None = None,
    ) -> list[FactResult]:
        """Many assertions (dicts with ``key``, ``content`` and remember fields) in one call:
        resolved in order and group-committed per shard, all or none per shard.
        ``op_id`` as for :meth:`assert_fact`."""
        return runtime.run_sync(self._assert_facts_op(items, context, strategy, op_id), self.config.write_timeout)

    async def assert_facts_async(
        self,
        items: list[dict[str, Any]],
        context: Context,
        *,
        strategy: Strategy | str | None = None,
        op_id: str | None = None,
    ) -> list[FactResult]:
        op = self._assert_facts_op(items, context, strategy, op_id)
        return await runtime.run_async(op, self.config.write_timeout)

    def remember_fact(
        self, subject: str, predicate: str, obj: str, context: Context, *, confidence: float = 1.0, **fields: Any
    ) -> FactResult:
        """Assert a knowledge-graph triple ``(subject, predicate, obj)`` as a keyed fact.

        For a functional predicate (``works_at``, ``lives_in``, ``is``, ...) the key
        is ``subject/predicate``, so a new object supersedes the old one: the old
        memory is deprecated and its graph edge's ``valid_to`` closed, not deleted.
        """
        from memorybus.graph import DEFAULT_FUNCTIONAL, canonical_predicate, entity_key

        for name, value in (("subject", subject), ("predicate", predicate), ("object", obj)):
            if not isinstance(value, str) or not value.strip():
                raise InvalidMemory(name, "must be a non-empty string")
        pred = canonical_predicate(predicate)
        key = f"kg:{entity_key(subject)}/{pred}"
        if pred not in DEFAULT_FUNCTIONAL:
            key += f"/{entity_key(obj)}"
        structured = dict(fields.pop("structured", None) or {})
        structured["triples"] = [[subject, pred, obj]]
        content = f"{subject} {pred.replace('_', ' ')} {obj}"
        return self.assert_fact(key, content, context, confidence=confidence, structured=structured, **fields)

    def _fact_scope(self, context: Context, scope: Scope | Level | str | None) -> Scope:
        """The scope a fact is read from: the one ``assert_fact`` writes to by default."""
        _check_context(context)
        return context.default_scope("semantic") if scope is None else context.resolve_scope(scope)

    def _current_fact_op(self, key: str, context: Context, scope: Any) -> Op[MemoryNode | None]:
        target = self._fact_scope(context, scope)
        shard = self._shard_handles()[self.router.shard_for(target.key)]
        (node,) = yield [shard.current_fact.remote(context, _check_key(key), target)]
        return node

    def current_fact(self, key: str, context: Context, *, scope: Any = None) -> MemoryNode | None:
        """The current value of a keyed fact, or None."""
        return runtime.run_sync(self._current_fact_op(key, context, scope), self.config.read_timeout)

    async def current_fact_async(self, key: str, context: Context, *, scope: Any = None) -> MemoryNode | None:
        return await runtime.run_async(self._current_fact_op(key, context, scope), self.config.read_timeout)

    def _history_op(self, key: str, context: Context, scope: Any) -> Op[list[Event]]:
        target = self._fact_scope(context, scope)
        shard = self._shard_handles()[self.router.shard_for(target.key)]
        (events,) = yield [shard.history.remote(context, _check_key(key), target)]
        return events

    def history(self, key: str, context: Context, *, scope: Any = None) -> list[Event]:
        """Every assertion of a keyed fact in commit order: ``event.data["outcome"]`` is
        ``created``, ``superseded``, ``rejected`` or ``reinforced``; ``event.node`` the value."""
        return runtime.run_sync(self._history_op(key, context, scope), self.config.read_timeout)

    async def history_async(self, key: str, context: Context, *, scope: Any = None) -> list[Event]:
        return await runtime.run_async(self._history_op(key, context, scope), self.config.read_timeout)

    # -------------------------------------------------------------- broadcast
    def _broadcast_op(
        self, memory_id: str, to: Level | str, context: Context, op_id: str | None = None
    ) -> Op[MemoryNode]:
        op = new_op(op_id)
        _check_context(context)
        if not isinstance(memory_id, str) or not memory_id:
            raise InvalidRequest("memory_id", "must be a non-empty string")
        try:
            level = Level(to)
        except ValueError:
            raise InvalidRequest("to", f"unknown scope level {to!r}") from None
        _, hub = self._hub_for(context.org)
        copy = yield from tag_op(op, runtime.iter_one(hub.broadcast.remote(context, memory_id, level.value, op)))
        return copy

    def broadcast(
        self, memory_id: str, to: Level | str, context: Context, *, op_id: str | None = None
    ) -> MemoryNode:
        """Share a memory with a wider scope (``"user"`` or ``"org"``): a copy with
        ``confidence x 0.9``, ``parents=[original]``. Only the owner (or an authority)
        may widen; broadcasting twice yields one copy. ``op_id`` as for ``remember``."""
        return runtime.run_sync(self._broadcast_op(memory_id, to, context, op_id), self.config.write_timeout)

    async def broadcast_async(
        self, memory_id: str, to: Level | str, context: Context, *, op_id: str | None = None
    ) -> MemoryNode:
        return await runtime.run_async(self._broadcast_op(memory_id, to, context, op_id), self.config.write_timeout)


class MaintenanceClientMixin:
    """Run or schedule decay and consolidation (see :mod:`memorybus.actors.maintenance`)."""

    config: Config
    _maintenance: dict[str, Any]

    def _check_open(self) -> None:
        raise NotImplementedError

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

    def _check_now(self, now: object) -> float | None:
        when = check_time("now", now, InvalidRequest, optional=True)
        limit = self.config.maintenance_max_future_seconds
        if when is not None and when > time.time() + limit:
            raise InvalidRequest("now", f"is more than {limit:.0f} s in the future "
                                        "(Config.maintenance_max_future_seconds)")
        return when

    def run_decay(self, context: Context, now: float | None = None) -> dict[str, Any]:
        """One decay sweep, over every shard, of the memories whose scope ``context``
        manages (an org context: its whole org; a user context: that user's scopes; see
        :meth:`~memorybus.scopes.Context.manages`), now or at ``now`` (epoch seconds, at
        most ``Config.maintenance_max_future_seconds`` ahead). Returns this run's counts."""
        _check_context(context)
        when = self._check_now(now)
        actor = self._maintenance_actor("decay")
        return dict(runtime.run_sync(runtime.iter_refs([actor.run_once.remote(when, context)]), 600)[0])

    def run_consolidation(
        self,
        context: Context,
        now: float | None = None,
        *,
        scopes: list[str] | None = None,
        due_only: bool = False,
        pause_before_apply: float = 0.0,
    ) -> dict[str, Any]:
        """One consolidation run, over every shard, of the scopes ``context`` manages
        (``scopes``: only these scope keys, each one ``context`` manages; ``due_only``:
        only scopes whose new episodic importance passed the reflection threshold)."""
        _check_context(context)
        when = self._check_now(now)
        if scopes is not None:
            if isinstance(scopes, str) or not all(isinstance(k, str) for k in scopes):
                raise InvalidRequest("scopes", "must be a list of scope keys")
            if not all(context.manages(Scope.from_key(k)) for k in scopes):
                raise ScopeViolation("consolidate")
            scopes = list(scopes)
        if isinstance(pause_before_apply, bool) or not isinstance(pause_before_apply, int | float) \
                or not 0 <= pause_before_apply <= 600:
            raise InvalidRequest("pause_before_apply", "must be between 0 and 600 seconds")
        actor = self._maintenance_actor("consolidation")
        ref = actor.run_once.remote(when, context, scopes=scopes, due_only=bool(due_only),
                                    pause_before_apply=pause_before_apply)
        return dict(runtime.run_sync(runtime.iter_refs([ref]), 600)[0])

    def schedule_maintenance(
        self, decay_interval: float | None = None, consolidation_interval: float | None = None
    ) -> None:
        """Start the periodic decay and consolidation runs (intervals from config by default).

        The schedule is the operator's: its runs cover every scope, at the actors' own
        clock (no injected time)."""
        refs = [
            self._maintenance_actor("decay").start.remote(decay_interval),
            self._maintenance_actor("consolidation").start.remote(consolidation_interval),
        ]
        runtime.run_sync(runtime.iter_refs(refs), 60)

    def maintenance_status(self) -> dict[str, Any]:
        refs = [self._maintenance_actor(k).status.remote() for k in ("decay", "consolidation")]
        decay, consolidation = runtime.run_sync(runtime.iter_refs(refs), 60)
        return {"decay": decay, "consolidation": consolidation}
