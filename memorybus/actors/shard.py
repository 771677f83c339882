"""ShardActor: a thin Ray wrapper over :class:`memorybus.shard.Shard`."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import ray

from memorybus.actors import direct, runtime
from memorybus.actors.collector import collect_less
from memorybus.actors.gauges import ShardMetrics, actor_restarts
from memorybus.actors.hub import HubPush
from memorybus.actors.ingest import Ingest
from memorybus.actors.shard_admin import OperatorCalls
from memorybus.auth import gatekeeper_for
from memorybus.auth.keyring import derived_key
from memorybus.config import Config
from memorybus.errors import InvalidRequest, NotAuthorized, StoreUnavailable
from memorybus.memory.events import Event, EventFilter
from memorybus.memory.model import MemoryNode
from memorybus.retrieval.wire import RecallRequest, pack_hits, query_vector, unpack_request
from memorybus.scopes import Context, Scope
from memorybus.shard import FactResult, Shard
from memorybus.shard.build import open_shard
from memorybus.storage import dirlock

T = TypeVar("T")

#: seconds without a write after which the timer checkpoints the vector index (a
#: restart after a crash then trusts it instead of rebuilding it)
_CHECKPOINT_IDLE = 10.0


class ShardActor(OperatorCalls):
    """Owns the scopes routed to shard ``name``.

    Writes commit one at a time; reads run on a thread of their own (the ``reads``
    concurrency group), so a write waiting for its store (a lock another process
    holds, a hung server) never holds up a read (see :mod:`memorybus.shard.gate`).
    Writes that store vectors wait for the embedder on threads of their own (the
    ``ingest`` group), holding no lock meanwhile (see :mod:`memorybus.actors.ingest`).

    Every mutating method takes the caller's operation id ``op`` (the client makes
    one per call): Ray re-runs a call with the same arguments after the actor died,
    and the shard answers such a re-run from the operation's record.

    Every committed event is pushed, fire-and-forget, to the hub actor of its
    org; the durable event log is the fallback when a push is lost.
    """

    def __init__(self, config: Config, name: str) -> None:
        self.name = name
        self.config = config
        self._gate = gatekeeper_for(config)
        self._push = HubPush(config, self._gate.service_token)
        self._shard: Shard | None = None
        self._open_lock = threading.Lock()
        self._dir_lock: dirlock.DirLock | None = None  # one bus per data directory
        self._ingest = Ingest(config)
        collect_less()
        self._metrics = ShardMetrics(config, name, restarted=actor_restarts() > 0)
        self._metrics.start(lambda: self._shard)
        self._start_touch_timer()
        on = config.direct_reads and direct.supported()
        self._direct = (direct.ChannelServer(f"{config.namespace}-{name}", self._direct_recall, self._channel_peer)
                        if on else None)  # fmt: skip

    def _s(self) -> Shard:
        """The open shard; opened on first use, after a failed open, and after
        :meth:`close`. The constructor opens nothing, so a shard restarted while its
        store is unreachable stays alive and serves again once the store is back."""
        shard = self._shard
        if shard is None:
            with self._open_lock:
                if self._shard is None:
                    with self._metrics.counting("open"):
                        self._shard = self._open()
                shard = self._shard
        return shard

    def _open(self) -> Shard:
        """Open store and index. Never fatal to the actor: a store that cannot be reached
        now (or refuses to serve) raises to this call, and the next call tries again."""
        try:
            if self.config.backend == "embedded" and self._dir_lock is None:
                self._dir_lock = dirlock.acquire(
                    os.path.abspath(self.config.shard_dir(self.name)), f"namespace={self.config.namespace}"
                )  # DataDirInUse while another bus serves these files
            shard = open_shard(self.config, self.name, on_events=self._publish,
                               audit_key=derived_key(self.config, "audit checkpoint"))
        except OSError as exc:  # its directory: a disk that is full, gone or read-only
            raise StoreUnavailable("shard", f"{self.name} could not open: {exc!r}") from exc
        # the timer writes access statistics (flush_touches): a recall never waits for that write
        shard.core.records.flush_inline = self.config.touch_flush_seconds <= 0
        # what the rebuild loaded lives as long as the shard: the collector need not scan it
        # again (collected first: garbage left by a closed shard or a failed open is not kept)
        gc.collect()
        gc.freeze()
        return shard

    def close(self, auth: str = "") -> None:
        """Flush and close the store and index cleanly (SQLite: WAL checkpointed into
        the main file). A later call opens them again (operator only)."""
        self._gate.operator(auth, "close")
        with self._open_lock:
            shard, self._shard = self._shard, None
            if shard is not None:
                with shard.gate.write():
                    shard.close()
                gc.unfreeze()
            if self._dir_lock is not None:  # the files are closed: another bus may open them
                self._dir_lock.release()
                self._dir_lock = None  # the closed shard's objects may be collected; the next open freezes again

    def _read(self, call: Callable[[Shard], T]) -> T:
        """A read: on the reads thread, under the shard's state lock only (never behind
        a write waiting for its store)."""
        shard = self._s()
        with self._metrics.counting("read"), shard.gate.read():
            return call(shard)

    def _write(self, call: Callable[[Shard], T]) -> T:
        """A write: one at a time, letting reads in while its store commit runs."""
        shard = self._s()
        with self._metrics.counting("write"), shard.gate.write():
            return call(shard)

    def _embedded(
        self,
        texts: Callable[[Shard], list[str]],
        write: Callable[[Shard, np.ndarray], T],
        held: Sequence[MemoryNode] = (),
        order: tuple[Context, str | None, str | None] | None = None,
    ) -> T:
        """A write that stores vectors (see :class:`~memorybus.actors.ingest.Ingest`)."""
        return self._ingest.run(self._s(), texts, lambda vectors: self._write(lambda s: write(s, vectors)),
                                held, order)  # fmt: skip

    def _start_touch_timer(self) -> None:
        """Access statistics reach the store within ``touch_flush_seconds`` even when no
        further recall comes: a timer thread checks at a quarter of that period and, when
        a write is due, queues a ``flush`` call on this actor (so it runs between calls,
        never beside one: the shard is single-threaded). A closed shard is left closed."""
        period = self.config.touch_flush_seconds
        if period <= 0:
            return
        import ray

        me = ray.get_runtime_context().current_actor

        def tick() -> None:
            queued: Any = None
            while True:
                time.sleep(period / 4)
                if queued is not None:
                    ready, _ = ray.wait([queued], timeout=0)
                    if not ready:
                        continue  # the last flush has not run yet
                    queued = None
                try:
                    shard = self._shard
                    if shard is not None and (shard.touches_due() or shard.index.stale
                                              or shard.index.checkpoint_due(_CHECKPOINT_IDLE)):
                        queued = me.flush_touches.remote()
                except ray.exceptions.RayError:  # the actor is going away: the next tick retries
                    queued = None

        threading.Thread(target=tick, name="touch-flush", daemon=True).start()

    def _publish(self, events: list[Event]) -> None:
        self._metrics.wrote(len(events))  # memories: the metrics timer sets that gauge
        self._push(events)

    @ray.method(concurrency_group="ingest")
    def assert_fact(
        self, context: Context, node: MemoryNode, strategy: str | None, op: str | None = None
    ) -> FactResult:
        """One assertion, embedded and group-committed with the ones other callers make
        meanwhile (see :mod:`memorybus.shard.factgroup`): one Ray call to the embedder
        and one store commit serve every call that meets."""
        context = self._gate.admit(context, "assert_fact", write=True)
        shard = self._s()
        with shard.gate.read():
            texts = shard.embedding_texts(context, [node])
        vectors = self._ingest.embed(texts)  # asked for with the texts of calls beside it
        with self._metrics.counting("write"):  # the group takes the write lock itself
            return shard.assert_fact_grouped(context, node, _row(vectors), strategy, op=op)

    @ray.method(concurrency_group="ingest")
    def assert_facts(
        self, context: Context, nodes: list[MemoryNode], strategy: str | None, op: str | None = None
    ) -> list[FactResult]:
        context = self._gate.admit(context, "assert_facts", write=True)
        return self._embedded(
            lambda shard: shard.embedding_texts(context, nodes),
            lambda shard, vectors: shard.assert_facts(context, nodes, vectors, strategy, op=op),
        )

    @ray.method(concurrency_group="reads")
    def current_fact(self, context: Context, key: str, scope: Scope) -> MemoryNode | None:
        context = self._gate.admit(context, "current_fact", write=False)
        return self._read(lambda shard: shard.current_fact(context, key, scope))

    @ray.method(concurrency_group="reads")
    def history(self, context: Context, key: str, scope: Scope) -> list[Event]:
        context = self._gate.admit(context, "history", write=False)
        return self._read(lambda shard: shard.history(context, key, scope))

    @ray.method(concurrency_group="reads")
    def source_reliability(self, context: Context) -> dict[str, dict[str, Any]]:
        context = self._gate.admit(context, "source_reliability", write=False)
        return self._read(lambda shard: shard.source_reliability(context))

    @ray.method(concurrency_group="reads")
    def broadcast_source(self, context: Context, memory_id: str, to: str) -> MemoryNode:
        context = self._gate.admit(context, "broadcast", write=True)
        return self._read(lambda shard: shard.broadcast_source(context, memory_id, to))

    def put_broadcast(self, context: Context, copy: MemoryNode, op: str | None = None) -> MemoryNode:
        context = self._gate.admit(context, "broadcast", write=True)
        return self._write(lambda shard: shard.put_broadcast(context, copy, op=op))

    @ray.method(concurrency_group="reads")
    def read_events(
        self, context: Context, cursors: dict[str, int], flt: EventFilter | None, limit: int
    ) -> tuple[list[Event], dict[str, int], bool]:
        context = self._gate.admit(context, "read_events", write=False)
        return self._read(lambda shard: shard.read_events_page(context, cursors, flt, limit))

    @ray.method(concurrency_group="reads")
    def last_seqs(self, context: Context) -> dict[str, int]:
        context = self._gate.admit(context, "read_events", write=False)
        return self._read(lambda shard: shard.last_seqs(context))

    @ray.method(concurrency_group="ingest")
    def put_many(
        self, context: Context, nodes: Sequence[MemoryNode], op: str | None = None, after: str | None = None
    ) -> list[MemoryNode]:
        """Store new memories (see :meth:`memorybus.shard.Shard.put_many`); the shard
        decides their texts and embeds them. ``after``: the operation id of the call the
        caller sent this shard just before, which commits first (see :meth:`_embedded`)."""
        context = self._gate.admit(context, "remember", write=True)
        return self._embedded(
            lambda shard: shard.embedding_texts(context, nodes),
            lambda shard, vectors: shard.put_many(context, nodes, vectors, op=op),
            held=nodes,
            order=(context, op, after),
        )

    @ray.method(concurrency_group="reads")
    def check_puts(self, context: Context, nodes: list[MemoryNode]) -> int:
        context = self._gate.admit(context, "remember", write=True)
        return self._read(lambda shard: shard.check_puts(context, nodes))

    @ray.method(concurrency_group="ingest")
    def update(
        self, context: Context, memory_id: str, expected_version: int, changes: dict[str, Any], op: str | None = None
    ) -> MemoryNode:
        context = self._gate.admit(context, "update", write=True)
        return self._embedded(
            lambda shard: shard.update_texts(context, memory_id, changes),
            lambda shard, vectors: shard.update(context, memory_id, expected_version, changes, _row(vectors), op=op),
        )

    def delete(
        self, context: Context, memory_id: str, expected_version: int | None = None, op: str | None = None
    ) -> bool:
        context = self._gate.admit(context, "forget", write=True)
        return self._write(lambda shard: shard.delete(context, memory_id, expected_version, op=op))

    @ray.method(concurrency_group="reads")
    def get(self, context: Context, memory_id: str, with_embedding: bool = False) -> MemoryNode:
        context = self._gate.admit(context, "get", write=False)
        return self._read(lambda shard: shard.get(context, memory_id, with_embedding=with_embedding))

    @ray.method(concurrency_group="reads")
    def recall(self, request: bytes, vector: Any = None) -> bytes:
        """Hybrid recall (see :meth:`memorybus.shard.Shard.search`): ``request`` is a
        packed :class:`~memorybus.retrieval.wire.RecallRequest` (msgpack data, validated
        field by field: InvalidRequest otherwise; never unpickled), admitted by its
        context's credential like every call; the answer the packed hits (see
        :mod:`memorybus.retrieval.wire`). Also served on the direct channel.

        The query vector is in the request when the caller embedded the query; else
        the client passes the embedder's ObjectRef as ``vector`` (the rows of
        :func:`~memorybus.retrieval.query.query_texts`), and Ray
        calls this method once the query is embedded, with the vector inlined
        (planning first and fetching the vector after measured 0.4-0.7 ms slower).
        """
        return self._recall(unpack_request(request), vector)

    def _recall(self, req: RecallRequest, vector: Any, connection: str | None = None) -> bytes:
        if req.query is not None and len(req.query) > self.config.max_content_chars:
            raise InvalidRequest("query", "is longer than max_content_chars")
        context = self._gate.admit(req.context, "recall", write=False)
        if connection is not None and not self._gate.trusted and req.context.credential != connection:
            raise NotAuthorized("recall", "the request carries another credential than its connection's")
        vec = query_vector(req, vector)
        started = time.perf_counter()
        hits = self._read(lambda shard: shard.search(
            context, vec, req.k, kinds=req.kinds, statuses=req.statuses, query=req.query, options=req.options
        ))
        self._metrics.recalled(time.perf_counter() - started)
        return pack_hits(hits)

    def _channel_peer(self, credential: str) -> None:
        """The direct channel's hello: a valid credential (any), else NotAuthenticated."""
        if not self._gate.trusted:
            self._gate.grant(credential)

    def _direct_recall(self, request: bytes, credential: str) -> bytes:
        """A recall over the direct channel: :meth:`recall`, admitted the same way, for a
        request whose context carries the credential its connection said hello with
        (NotAuthorized otherwise)."""
        return self._recall(unpack_request(request), None, credential)

    @ray.method(concurrency_group="reads")
    def list_memories(self, context: Context | None, filters: dict[str, Any], auth: str = "") -> list[MemoryNode]:
        """:meth:`memorybus.shard.Shard.list_memories`; ``filters`` are its keyword arguments.
        Without a context (every scope) an operator call."""
        if context is None:
            self._gate.operator(auth, "list_memories")
        else:
            context = self._gate.admit(context, "list_memories", write=False)
        return self._read(lambda shard: shard.list_memories(context, **filters))

    @ray.method(concurrency_group="reads")
    def direct_channel(self, auth: str = "") -> direct.ChannelInfo | None:
        """Where a caller on this node sends :meth:`recall` requests without Ray (see
        :mod:`memorybus.actors.direct`); None when this actor has no channel."""
        if not self._gate.trusted:
            self._gate.grant(auth)  # any valid credential
        if self._direct is None:
            return None
        return direct.ChannelInfo(runtime.node_id(), self._direct.address)

    @ray.method(concurrency_group="reads")
    def pinned(self, context: Context) -> list[MemoryNode]:
        context = self._gate.admit(context, "context_for", write=False)
        return self._read(lambda shard: shard.pinned(context))

    def flush(self, auth: str = "") -> int:
        """Write pending access statistics now (any valid credential)."""
        if not self._gate.trusted:
            self._gate.grant(auth)
        return self._write(lambda shard: shard.flush())

    def flush_touches(self) -> int:
        """The timer's flush: writes pending access statistics of an open shard (a
        closed one has flushed them and stays closed). It never waits for the store:
        statistics another write holds up stay pending for the next tick. A stale vector
        index is rebuilt here too, and an index idle since its last change checkpointed."""
        shard = self._shard
        if shard is None:
            return 0
        with shard.gate.write():
            shard.repair_index()
            shard.checkpoint_index(idle=_CHECKPOINT_IDLE)
            return shard.flush(wait=False, outside=shard.gate.committing)  # recalls go on meanwhile

    @ray.method(concurrency_group="reads")
    def pid(self) -> int:
        return os.getpid()

    @ray.method(concurrency_group="reads")
    def node_id(self) -> str:
        return runtime.node_id()


def _row(vectors: np.ndarray) -> np.ndarray | None:
    """The vector of a write that embeds at most one text (None: it embeds none)."""
    return vectors[0] if len(vectors) else None
