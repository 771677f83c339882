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


class Gate:
    def __init__(self) -> None:
        self._writes = threading.Lock()
        self._state = threading.Lock()
        self._writer: int | None = None
        self._holder: int | None = None

    @contextmanager
    def write(self) -> Iterator[None]:
        me = threading.get_ident()
        if self._writer == me:
            yield
            return
        with self._writes:
            self._writer = me
            try:
                with self._hold():
                    yield
            finally:
                self._writer = None

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._hold():
            yield

    @contextmanager
    def _hold(self) -> Iterator[None]:
        me = threading.get_ident()
        if self._holder == me:
            yield
            return
        with self._state:
            self._holder = me
            try:
                yield
            finally:
                self._holder = None

    @contextmanager
    def committing(self) -> Iterator[None]:
        """Inside a write: let readers in while the store commits."""
        me = threading.get_ident()
        if self._holder != me or self._writer != me:
            yield
            return
        self._holder = None
        self._state.release()
        try:
            yield
        finally:
            self._state.acquire()
            self._holder = me
