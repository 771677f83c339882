"""How a shard actor runs a write that stores vectors: the shard decides, then embeds.

The caller sends memories, never vectors. For each such write (new memories, keyed
facts, an update of content, a consolidation summary) the shard:

1. decides the texts to embed (:mod:`memorybus.shard.texts`), a read under the
   shard's state lock that also checks the input: bad input fails here, before any
   model work and before anything is written;
2. encodes them on the bus's embedder pool (:class:`EmbedderPool`), holding no lock:
   reads go on, and so do other calls' first steps. A caller's calls ask the pool in the
   order they decide, so they are normally embedded in the order they commit and none
   waits for vectors queued behind a later call's (Ray does not promise an async
   actor's call order; a call overtaken there only waits longer, its vectors are its
   own);
3. commits, as a write (one at a time).

These writes run on the actor's ``ingest`` threads, so a caller's next call is
embedded while this one commits (the client keeps a window of calls in flight).
A caller's calls to one shard still decide and commit in the order it sent them:
each names the one it sent before (:class:`~memorybus.shard.gate.CallOrder`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from memorybus.actors.embedder import EmbedderPool
from memorybus.config import Config
from memorybus.errors import ActorUnavailable
from memorybus.memory.model import MemoryNode
from memorybus.scopes import Context
from memorybus.shard import Shard
from memorybus.shard.gate import CallOrder
from memorybus.shard.grouping import Grouped, answer_of
from memorybus.shard.ops import OpCall, op_key

T = TypeVar("T")


class Ingest:
    """One shard actor's writes that embed: its embedder pool and its callers' order."""

    #: seconds a call waits for the caller's previous call to reach this actor at all
    ARRIVAL = 10.0

    def __init__(self, config: Config) -> None:
        self.config = config
        self.pool = EmbedderPool(config)
        self.order = CallOrder()
        self.together = Together(lambda texts: self.pool.encode(texts, self.config.write_timeout))

    def embed(self, texts: list[str]) -> np.ndarray:
        """The vectors of ``texts`` (none: no rows), asked for with the texts of the calls
        that wait meanwhile (see :class:`Together`)."""
        if not texts:
            return np.zeros((0, self.config.vector_dim()), dtype=np.float32)
        return self.together.encode(texts)

    def run(
        self,
        shard: Shard,
        texts: Callable[[Shard], list[str]],
        write: Callable[[np.ndarray], T],
        held: Sequence[MemoryNode] = (),
        order: tuple[Context, str | None, str | None] | None = None,
    ) -> T:
        """Decide ``texts(shard)``, embed them, then ``write(vectors)`` (one row per
        text; none when there is none; ``write`` takes the write lock itself).

        ``held``: new memories whose texts later calls' turns may take as context
        until this write is over. ``order``: ``(context, op, after)``: this call (the
        caller's operation ``op``) decides and commits after its call ``after`` did."""
        context, op, after = order or (None, None, None)
        self.order.reach(op, "arrived")
        try:
            try:
                self._wait_for(shard, context, after, "decided")
                with shard.gate.read():
                    decided = texts(shard)
                    shard.texts.hold(held)
                # asked for before the next call may decide: the embedder answers the calls in
                # the order they commit, so none waits on a later one's vectors
                try:
                    calls = self.pool.submit(decided) if decided else []
                except BaseException:
                    with shard.gate.read():
                        shard.texts.settle(held)
                    raise
            finally:
                self.order.reach(op, "decided")
            try:
                vectors = (self.pool.wait(calls, self.config.write_timeout) if calls
                           else np.zeros((0, self.config.vector_dim()), dtype=np.float32))
                self._wait_for(shard, context, after, "done")
                return write(vectors)
            finally:
                with shard.gate.read():
                    shard.texts.settle(held)
        finally:
            self.order.reach(op, "done")

    def _wait_for(self, shard: Shard, context: Context | None, after: str | None, step: str) -> None:
        """Wait until the caller's call ``after`` reached ``step`` here. One this actor
        has not seen arrive and whose write the store has recorded ran before the actor
        (re)started: it is over. One that has not arrived within :attr:`ARRIVAL` seconds
        either is not coming (it failed before this actor restarted, and a failed write
        leaves no record) or comes late: this call goes on rather than wait out the
        write timeout."""
        if after is None or self.order.wait(after, step, 0):
            return
        if not self.order.wait(after, "arrived", 0):
            if context is not None:
                with shard.gate.read():
                    if shard.core.recorded(OpCall(op_key("put_many", context, after), after))[0]:
                        return
            if not self.order.wait(after, "arrived", min(self.ARRIVAL, self.config.write_timeout or self.ARRIVAL)):
                return
        self.order.wait(after, step, self.config.write_timeout)


class _Texts:
    __slots__ = ("answer", "done", "error", "texts")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.done = False
        self.answer: np.ndarray | None = None
        self.error: BaseException | None = None


class Together:
    """Concurrent calls' embeddings asked for together: while ``REQUESTS_OUT`` requests
    are out, the texts of the calls that come meanwhile queue, and the next request takes
    them all (one Ray call to the embedder for the lot, each call getting its own rows). A
    failed request fails the calls it carried (the texts are checked before)."""

    #: requests out at once: with one, a call that came just after a request went out
    #: waited for its answer before asking (a whole embedding round trip added to its
    #: latency); the embedder merges concurrent requests into one model batch anyway
    REQUESTS_OUT = 4

    def __init__(self, encode: Callable[[list[str]], np.ndarray]) -> None:
        self._encode = encode
        self._groups: Grouped[_Texts] = Grouped(self._one_request, max_running=self.REQUESTS_OUT)

    def encode(self, texts: list[str]) -> np.ndarray:
        me = _Texts(texts)
        self._groups.wait(me)
        return answer_of(me, ActorUnavailable("embedder", "the request gave no vectors"))

    def _one_request(self, group: list[_Texts]) -> None:
        try:
            rows = self._encode([t for g in group for t in g.texts])
            start = 0
            for g in group:
                g.answer, start = rows[start : start + len(g.texts)], start + len(g.texts)
        except BaseException as exc:  # whatever the request raised is its waiting callers': each raises it
            for g in group:
                g.error = exc
