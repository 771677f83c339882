"""Same-node recalls without Ray's task path: a shard actor's direct channel.

A Ray actor call costs about 0.7 ms on an idle 2-core machine (submission,
scheduling on the actor's thread pool, the reply through the object store) and
1-2 ms while the embedder keeps the cores busy: a fifth of a recall's time at
100,000 memories. A recall whose caller runs on the shard actor's node therefore
sends the same packed request (:mod:`memorybus.retrieval.wire`) over a Unix
socket the actor listens on and reads the packed hits back: the actor answers
it with the same method as the Ray call (``ShardActor.recall``), under the same
gate, with the same visibility checks. Only the transport differs.

- **Who may connect.** The socket is in Linux's abstract namespace (no file to
  leave behind when the actor is killed) under a random name the actor hands out
  through Ray; the actor serves only peers of its own user (``SO_PEERCRED``),
  the trust Ray itself places in its peers. Elsewhere (not Linux) there is no
  channel and every recall goes through Ray.
- **Failures fall back.** A channel that cannot be reached, breaks or answers
  nonsense (the actor died, restarted, or is on another node) is dropped and the
  call made again through Ray, which knows how to wait for a restart and names
  the actor in its errors. Reads are safe to repeat. An error the shard raises is
  pickled back and raised as itself, as Ray would.
- **Time limits.** The caller's deadline bounds the wait for the answer; past it
  the connection is closed (its late answer is never read) and the call raises
  :class:`~memorybus.errors.OperationTimeout`.

Frames: a request is its length (4 bytes, little-endian) and the request; an
answer is a status byte (``0`` the result, ``1`` a pickled exception), its
length and its bytes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import secrets
import socket
import struct
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memorybus.errors import MemoryBusError, OperationTimeout

log = logging.getLogger("memorybus")

_HEAD = struct.Struct("<I")
_ANSWER = struct.Struct("<BI")
#: the largest request a channel reads (a packed recall request is a few KB)
MAX_REQUEST = 64 << 20
_OK, _RAISED = 0, 1


def supported() -> bool:
    """Whether this platform has abstract Unix sockets and peer credentials (Linux)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_PEERCRED")


class ChannelError(Exception):
    """The channel failed as a transport (not the shard's own error): call through Ray."""


def _read_exact(sock: socket.socket, n: int) -> bytes:
    chunks: list[bytes] = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class ChannelServer:
    """The actor's side: a listening socket and a thread per connected caller, each
    answering requests with ``handle`` (which raises what the caller should see)."""

    def __init__(self, label: str, handle: Callable[[bytes], bytes]) -> None:
        self.address = f"\0memorybus-{label}-{os.getpid()}-{secrets.token_hex(8)}"
        self._handle = handle
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(self.address)
        self._sock.listen(64)
        self.served = 0
        self.refused = 0
        self._count = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="direct-accept", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            if not self._same_user(conn):
                self.refused += 1
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn,), name="direct-read", daemon=True).start()

    @staticmethod
    def _same_user(conn: socket.socket) -> bool:
        try:
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        except OSError:
            return False
        _pid, uid, _gid = struct.unpack("3i", creds)
        return bool(uid == os.getuid())

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    (size,) = _HEAD.unpack(_read_exact(conn, _HEAD.size))
                    if size > MAX_REQUEST:
                        return  # not a caller of ours: hang up
                    request = _read_exact(conn, size)
                except (OSError, ConnectionError):
                    return
                status, body = self._answer(request)
                try:
                    conn.sendall(_ANSWER.pack(status, len(body)) + body)
                except OSError:
                    return

    def _answer(self, request: bytes) -> tuple[int, bytes]:
        try:
            result = self._handle(request)
            with self._count:
                self.served += 1
            return _OK, result
        except Exception as exc:  # broad on purpose: the caller raises it, as Ray would
            try:
                return _RAISED, pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL)
            except (pickle.PicklingError, TypeError, AttributeError):  # one that does not pickle: its text
                plain = MemoryBusError(f"{type(exc).__name__}: {exc}")
                return _RAISED, pickle.dumps(plain, protocol=pickle.HIGHEST_PROTOCOL)

    def close(self) -> None:
        """Stop listening (the address is free at once; connections open now are served
        until their callers hang up)."""
        self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        with contextlib.suppress(OSError):
            self._sock.close()


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """Where a shard actor listens: the node it runs on and its socket's address."""

    node_id: str
    address: str


class Channel:
    """The caller's side of one actor's channel: idle connections kept for reuse,
    one connection per call in flight (threads of one process share a channel)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.broken = False
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def send(self, request: bytes) -> socket.socket:
        """Send ``request`` on an idle (or new) connection; the connection to read the
        answer from. Raises :class:`ChannelError` when the channel fails."""
        with self._lock:
            if self._pid != os.getpid():  # a forked child: its parent's connections are not its own
                for inherited in self._idle:
                    inherited.close()  # this process's copy only: the parent's stays open
                self._idle, self._pid = [], os.getpid()
            sock = self._idle.pop() if self._idle else None
        try:
            if sock is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect(self.address)
            sock.settimeout(None)
            sock.sendall(_HEAD.pack(len(request)) + request)
        except OSError as exc:
            if sock is not None:
                sock.close()
            self.broken = True
            raise ChannelError(str(exc)) from exc
        return sock

    def receive(self, sock: socket.socket, timeout: float | None) -> bytes:
        """The answer on ``sock``: the result, or the shard's exception raised;
        :class:`OperationTimeout` past ``timeout``; :class:`ChannelError` when the
        connection fails."""
        try:
            sock.settimeout(timeout)
            status, size = _ANSWER.unpack(_read_exact(sock, _ANSWER.size))
            body = _read_exact(sock, size)
        except TimeoutError:
            sock.close()  # its late answer must not be read as the next call's
            raise OperationTimeout(timeout) from None
        except (OSError, ConnectionError) as exc:
            sock.close()
            self.broken = True
            raise ChannelError(str(exc)) from exc
        with self._lock:
            self._idle.append(sock)
        if status == _OK:
            return body
        try:
            error = pickle.loads(body)
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError, TypeError,
                ValueError) as exc:
            raise ChannelError(f"an answer that does not unpickle: {exc!r}") from None
        if isinstance(error, BaseException):
            raise error
        raise ChannelError("an answer that is not an exception")

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for sock in idle:
            sock.close()


@dataclass(slots=True)
class DirectCall:
    """One call to make over ``channel`` (None: no channel), or through Ray with
    ``fallback`` (returns the call's ObjectRef) when there is none or it fails."""

    channel: Channel | None
    request: bytes
    fallback: Callable[[], Any]


@dataclass(slots=True)
class Direct:
    """A wait (see :mod:`memorybus.actors.runtime`) for calls that go over their
    actors' direct channels when they can: all must succeed, like a list of refs."""

    calls: list[DirectCall]

    def refs(self) -> list[Any]:
        """Every call through Ray (how an async driver waits for them)."""
        return [call.fallback() for call in self.calls]


def get_direct(wanted: Direct, left: Callable[[], float | None], get: Callable[[list[Any], float | None], Any]
               ) -> list[Any]:
    """The results of ``wanted``'s calls, in order: every request sent first (the
    actors work side by side), then the answers read; a call whose channel fails
    goes through Ray (``get(refs, timeout)``, i.e. ``ray.get``). ``left()``: the
    seconds left to the caller's deadline (None: no limit)."""
    sent: list[socket.socket | Any] = []
    through_ray: list[bool] = []
    for call in wanted.calls:
        if call.channel is not None and not call.channel.broken:
            try:
                sent.append(call.channel.send(call.request))
                through_ray.append(False)
                continue
            except ChannelError as exc:
                log.debug("direct channel %s failed (%s): through Ray", call.channel.address[1:], exc)
        sent.append(call.fallback())
        through_ray.append(True)
    out: list[Any] = []
    try:
        for call, pending, ray_call in zip(wanted.calls, sent, through_ray, strict=True):
            ref = pending
            if not ray_call and call.channel is not None:
                try:
                    out.append(call.channel.receive(pending, left()))
                    continue
                except ChannelError as exc:
                    log.debug("direct channel %s failed (%s): through Ray", call.channel.address[1:], exc)
                    ref = call.fallback()
            out.append(get([ref], left())[0])
    except BaseException:
        for pending, ray_call in zip(sent[len(out) + 1:], through_ray[len(out) + 1:], strict=True):
            if not ray_call:
                pending.close()  # its answer is never read: the connection must not be reused
        raise
    return out
