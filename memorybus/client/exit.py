"""A script's bus closes when the script exits, SIGTERM included.

Measured with Ray 2.60: a driver that started its own local Ray and receives SIGTERM
is aborted by Ray's native failure-signal handler (exit status 134, a stack dump
on stderr): no ``finally``, no ``atexit``, so ``close()`` never runs. Ray's own
processes still go (they share the driver's fate), but the stores are not closed
cleanly: SQLite's WAL is left un-checkpointed, subscription cursors and access
statistics of the last moments are not written.

:func:`close_at_exit` (called by ``connect`` when it started Ray itself) makes that
exit graceful:

- SIGTERM (only from the main thread, where Python signal handlers live) raises
  ``SystemExit`` through the previous Python handler — Ray's (``sys.exit(15)``),
  or the script's own, which is called as it was — or ``SystemExit(143)`` when there
  was none; a previous ``SIG_IGN`` is kept (the signal stays ignored). ``with``
  blocks unwind, then
- an ``atexit`` hook closes the bus (registered after Ray's own, so it runs first,
  while Ray is still connected). It holds the handle weakly, and ``close()`` removes
  the hook and gives SIGTERM back to the previous handler.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import signal
import threading
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol, TypeVar

from memorybus.config import Config


class Closable(Protocol):
    """What the hooks read of a handle (a :class:`~memorybus.client.MemoryBus`)."""

    config: Config

    @property
    def closed(self) -> bool: ...


C = TypeVar("C", bound=Closable)

log = logging.getLogger("memorybus")


class ExitHook:
    """The installed hooks of one handle (see the module docstring)."""

    def __init__(self, bus: C, close: Callable[[C], None]) -> None:
        ref = weakref.ref(bus)
        self._previous: Any = None
        self._handler: Callable[[int, FrameType | None], Any] | None = None

        def at_exit() -> None:
            target = ref()
            if target is not None and not target.closed:
                log.info("closing memorybus %r at exit", target.config.namespace)
                with contextlib.suppress(Exception):  # exiting anyway: never mask the exit status
                    close(target)

        self._at_exit = at_exit
        atexit.register(at_exit)
        if threading.current_thread() is threading.main_thread():
            self._install_sigterm()

    def _install_sigterm(self) -> None:
        previous = signal.getsignal(signal.SIGTERM)
        if previous == signal.SIG_IGN:
            return  # the script chose to ignore SIGTERM

        def on_sigterm(signum: int, frame: FrameType | None) -> Any:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
            if callable(previous):
                return previous(signum, frame)  # Ray's: sys.exit(signum); a script's own: as it was
            raise SystemExit(128 + signum)

        self._previous = previous
        self._handler = on_sigterm
        signal.signal(signal.SIGTERM, on_sigterm)

    def remove(self) -> None:
        """Unregister the exit hook; give SIGTERM back if the handler is still ours."""
        atexit.unregister(self._at_exit)
        if self._handler is not None and threading.current_thread() is threading.main_thread():
            with contextlib.suppress(ValueError):
                if signal.getsignal(signal.SIGTERM) is self._handler:
                    signal.signal(signal.SIGTERM, self._previous if self._previous is not None else signal.SIG_DFL)
            self._handler = None


def close_at_exit(bus: C, close: Callable[[C], None]) -> ExitHook:
    """Hooks that call ``close(bus)`` at exit and on SIGTERM (while ``bus`` lives)."""
    return ExitHook(bus, close)
