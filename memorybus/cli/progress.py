"""What the command line shows while memorybus starts: the ``memorybus`` logger's
progress messages (Ray, actors, model), as a spinner on a terminal and as plain
lines otherwise."""

from __future__ import annotations

import contextlib
import itertools
import logging
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

_FRAMES = "|/-\\"


class SpinnerHandler(logging.Handler):
    """Shows the latest ``memorybus`` message behind a spinner (a terminal) or
    prints each message on its own line (a pipe or a file)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(logging.INFO)
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self._message = ""
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if not self.tty:
            self.stream.write(f"memorybus: {message}\n")
            self.stream.flush()
            return
        with self._lock:
            self._message = message
        if self._thread is None:
            self._thread = threading.Thread(target=self._spin, name="memorybus-spinner", daemon=True)
            self._thread.start()

    def _spin(self) -> None:
        for frame in itertools.cycle(_FRAMES):
            if self._stop.wait(0.1):
                return
            with self._lock:
                line = f"{frame} {self._message} ({time.monotonic() - self._started:.0f}s)"
            self.stream.write("\r" + line[:150] + "\x1b[K")
            self.stream.flush()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
            self.stream.write("\r\x1b[K")
            self.stream.flush()
        super().close()


@contextlib.contextmanager
def progress(stream: TextIO | None = None) -> Iterator[None]:
    """Show startup progress while the block runs (on stderr by default)."""
    logger = logging.getLogger("memorybus")
    handler = SpinnerHandler(stream or sys.stderr)
    previous = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
        handler.close()
