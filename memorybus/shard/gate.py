"""How threads share one shard: reads never wait for a store write.

The shard actor serves reads and writes on separate threads. The :class:`Gate`
orders them:

- writes run one at a time (``write``), in arrival order per thread pool;
- the shard's in-memory state (cache, indexes, graph) is read or changed only by
  the thread holding the state lock (``read``, ``write``);
- a write lets go of the state lock while its store commit runs (``committing``)
  and takes it back to apply the commit to the in-memory state. A commit that waits
  for a lock another process holds, or for a hung server, therefore blocks the next
  write, never a read: reads see the state as of the last applied commit.

Reentrant per thread: a write calling a helper that reads holds what it needs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Owned:
    """A lock that knows its holder; the holder entering again passes straight through."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holder: int | None = None

    def mine(self) -> bool:
        return self.holder == threading.get_ident()

    @contextmanager
    def held(self) -> Iterator[None]:
        if self.mine():
            yield
            return
        with self.lock:
            self.holder = threading.get_ident()
            try:
                yield
            finally:
                self.holder = None


class Gate:
    def __init__(self) -> None:
        self._writes = _Owned()
        self._state = _Owned()

    @contextmanager
    def write(self) -> Iterator[None]:
        if self._writes.mine():  # a write inside a write (even while it commits)
            yield
            return
        with self._writes.held(), self._state.held():
            yield

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._state.held():
            yield

    @contextmanager
    def committing(self) -> Iterator[None]:
        """Inside a write: let readers in while the store commits."""
        state = self._state
        if not (state.mine() and self._writes.mine()):
            yield
            return
        state.holder = None
        state.lock.release()
        try:
            yield
        finally:
            state.lock.acquire()
            state.holder = threading.get_ident()


class CallOrder:
    """A caller's pipelined calls to one shard keep the order it sent them in.

    Calls that embed run side by side (each waits for the embedder on a thread of its
    own), so two calls of one caller could otherwise commit in the order their
    embeddings come back. A call names the one its caller sent before it to this
    shard (``after``) and waits, before each of its steps (``"decided"``: its texts
    chosen; ``"done"``: its write over, committed or failed), until that call has
    reached the same step. Only the last ``remember`` steps are kept: a predecessor
    that is not among them is long over."""

    def __init__(self, remember: int = 4096) -> None:
        self._cond = threading.Condition()
        self._reached: dict[tuple[str, str], None] = {}
        self._remember = remember

    def reach(self, op: str | None, step: str) -> None:
        if op is None:
            return
        with self._cond:
            self._reached[(op, step)] = None
            while len(self._reached) > self._remember:
                del self._reached[next(iter(self._reached))]
            self._cond.notify_all()

    def wait(self, after: str | None, step: str, timeout: float | None) -> bool:
        """Wait until call ``after`` reached ``step``; False if ``timeout`` passed first."""
        if after is None:
            return True
        with self._cond:
            return self._cond.wait_for(lambda: (after, step) in self._reached, timeout)
