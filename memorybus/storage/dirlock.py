"""One bus per data directory: an exclusive lock on a file in each directory a bus serves.

The process that opens a directory's stores (a shard actor: ``<data_dir>/<shard>/``;
a hub actor: ``<data_dir>/bus-<n>/``) first takes an exclusive ``flock`` on
``LOCK`` there and holds it while it serves them. So:

- a second bus on the same files (another namespace, another Ray cluster, another
  machine sharing the disk with working ``flock``) is refused with
  :class:`~memorybus.errors.DataDirInUse`, naming the directory and the holder
  (its pid, host and bus namespace, which the holder writes into the file);
- the kernel releases the lock when its holder exits, however it exits (a crash,
  ``kill -9``, a node's actor restarted by Ray): a restarted actor of the same bus
  takes it again, nothing is left stuck;
- a holder that is going away (a bus being closed) is waited for ``wait`` seconds.

The lock is advisory: it binds the processes that take it (every actor of the bus),
not a tool that opens the SQLite files by hand.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time

from memorybus.errors import DataDirInUse

LOCK_FILE = "LOCK"


class DirLock:
    """An exclusive lock held on ``<directory>/LOCK`` until :meth:`release` (or exit)."""

    def __init__(self, directory: str, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def holder(directory: str) -> str:
    """What the lock file of ``directory`` says about its last holder ("" if nothing)."""
    try:
        with open(os.path.join(directory, LOCK_FILE), encoding="utf-8", errors="replace") as f:
            return f.read(512).strip()
    except OSError:
        return ""


def is_locked(directory: str) -> bool:
    """Whether a live process holds ``directory``'s lock now (a bus serves it)."""
    path = os.path.join(directory, LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the shared lock taken just now
    return False


def acquire(directory: str, owner: str, wait: float = 3.0) -> DirLock:
    """Take ``directory``'s lock (creating the directory and file) and write ``owner``
    (with this pid and host) into it; DataDirInUse if another process still holds it
    after ``wait`` seconds. OSError when the directory cannot be created or opened."""
    os.makedirs(directory, exist_ok=True)
    fd = os.open(os.path.join(directory, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise DataDirInUse(directory, holder(directory) or "another process") from None
            time.sleep(0.05)
        except OSError:
            os.close(fd)
            raise
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid={os.getpid()} host={socket.gethostname()} {owner}\n".encode(), 0)
    except OSError:
        pass  # the lock is what matters; the note is for people
    return DirLock(directory, fd)
