"""This process's query model, loaded in a thread beside ``connect``.

With ``query_encoder="local"`` ``connect`` waits for it; with ``"auto"`` it loads
after the actors answer, and recalls use the embedder actor until it is loaded. A
process that exits while a load runs waits for it first (see :class:`Loader`).
"""

from __future__ import annotations

import atexit
import logging
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memorybus.client.handle import BusHandle

log = logging.getLogger("memorybus")


def preload_encoder(bus: BusHandle) -> Loader | None:
    """Start loading this process's query encoder when ``connect`` must wait for it
    (``query_encoder="local"``); ``start`` joins it."""
    if bus.config.query_encoder != "local":
        return None
    loader = Loader(bus._local_encoder)
    loader.start()
    return loader


def load_encoder_behind(bus: BusHandle) -> None:
    """After the actors answer (``query_encoder="auto"``, a driver): load this
    process's query encoder in the background; recalls use the embedder actor until
    it is loaded (``BusHandle._encodes_queries_here``). Measured 2026-12-05 on 2
    cores: loading it while the actors start cost ``connect`` about 1 s of CPU."""
    if bus.config.query_encoder != "auto" or not bus._encodes_queries_here(blocking=True):
        return
    log.info("loading the query model in this process (in the background; the embedder actor embeds queries meanwhile)")
    loader = Loader(bus._local_encoder)
    bus._query_loader = loader
    loader.start()


class Loader(threading.Thread):
    """Runs ``load`` in the background; keeps its error for the joiner. A process that
    exits while one runs waits for it first (at most :data:`_EXIT_WAIT` seconds): a
    daemon thread stopped in the middle of importing torch makes the interpreter print
    torch's failed finalizers at exit (seen on 2026-12-05 with a script that recalled
    once and ended)."""

    def __init__(self, load: Any) -> None:
        super().__init__(name="memorybus-model-load", daemon=True)
        self._load = load
        self.error: BaseException | None = None

    def start(self) -> None:
        global _exit_wait_registered
        with _loading_lock:
            _loading.add(self)
            if not _exit_wait_registered:
                # before the atexit callbacks: torch registers its own exit work while it
                # imports, and what is registered while they run is never run
                register = getattr(threading, "_register_atexit", atexit.register)
                register(_wait_for_loaders)
                _exit_wait_registered = True
        super().start()

    def run(self) -> None:
        try:
            self._load()
        # Deliberately broad: nothing is swallowed. Whatever loading raised is kept and
        # raised again by the thread that joins this one (``start``).
        except BaseException as exc:  # broad on purpose, see above
            self.error = exc
        finally:
            with _loading_lock:
                _loading.discard(self)


#: seconds an exiting process waits for a model load still running (see Loader)
_EXIT_WAIT = 60.0
_loading: set[Loader] = set()
_loading_lock = threading.Lock()
_exit_wait_registered = False


def _wait_for_loaders() -> None:
    with _loading_lock:
        running = list(_loading)
    for loader in running:
        loader.join(_EXIT_WAIT)
