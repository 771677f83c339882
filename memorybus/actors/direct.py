"""Same-node recalls without Ray's task path: a shard actor's direct channel.

A Ray actor call costs about 0.7 ms on an idle 2-core machine (submission,
scheduling on the actor's thread pool, the reply through the object store) and
1-2 ms while the embedder keeps the cores busy. A recall whose caller runs on the
shard actor's node therefore sends the same packed request
(:mod:`memorybus.retrieval.wire`, msgpack data, never pickle) over a Unix socket
the actor listens on and reads the packed hits back: the actor answers it with
the same code as the Ray call (``ShardActor.recall``), under the same gate
(``Gatekeeper.admit`` on the request's credential), with the same visibility
checks. Only the transport differs.

- **Who may connect.** The socket is in Linux's abstract namespace (no file to
  leave behind when the actor is killed; its name is visible to every process in
  ``/proc/net/unix``). The actor serves only peers of its own user
  (``SO_PEERCRED``), and only after a **hello**: the connection's first frame
  carries the caller's credential, verified (``authenticate``, the actor's
  ``Gatekeeper.grant``) within ``handshake_seconds`` before anything else is read,
  and acknowledged; otherwise the refusal is answered and the connection closed
  (the caller then goes through Ray, which raises the same error). The caller
  sends requests only once its hello is acknowledged. Every request on the connection must carry
  that same credential in its context (checked by the shard). Elsewhere (not
  Linux) there is no channel and every recall goes through Ray.
- **Bounds.** At most ``max_connections`` connections are served at once (one
  thread each: the channel's threads are bounded by it), at most
  ``max_pending`` of them before their hello; more are closed at once. A frame
  is at most ``max_frame`` bytes (:data:`MAX_REQUEST`; larger ones are refused
  before any of it is read), must arrive whole within ``frame_seconds`` of its
  first byte, and a connection idle for ``idle_seconds`` is closed. So a caller
  without a credential holds at most ``max_pending`` threads for
  ``handshake_seconds``, and no connection holds a buffer over ``max_frame``.
- **Failures fall back.** A channel that cannot be reached, breaks or answers
  nonsense (the actor died, restarted, is on another node, or is full) is
  dropped and the call made again through Ray, which knows how to wait for a
  restart and names the actor in its errors. Reads are safe to repeat. An error
  the shard raises comes back as data (see :mod:`memorybus.actors.frames`) and is
  raised as the same memorybus error class, as Ray would.
- **Time limits.** The caller's deadline bounds the wait for the answer; past it
  the connection is closed (its late answer is never read) and the call raises
  :class:`~memorybus.errors.OperationTimeout`.

Frames (see :mod:`memorybus.actors.frames`): the hello and a request are their
length (4 bytes, little-endian) and their bytes; an answer is a status byte (``0``
the result or the hello's acknowledgement, ``1`` an error, ``2`` a refused hello,
after which the server hangs up), its length and its bytes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memorybus.actors.frames import MAX_HELLO, FrameError, frame, hello, hello_credential, pack_error, read_frame
from memorybus.actors.frames import unpack_error as _unpack_error
from memorybus.errors import MemoryBusError, OperationTimeout

log = logging.getLogger("memorybus")

_HEAD = struct.Struct("<I")
_ANSWER = struct.Struct("<BI")
#: the largest request a channel reads (a packed recall request is a few KB; a larger
#: one goes through Ray)
MAX_REQUEST = 256 << 10
_OK, _RAISED, _REFUSED = 0, 1, 2
#: seconds a connection may stay idle; callers drop theirs well before
IDLE_SECONDS = 30.0
#: seconds a caller waits for the answer to its hello
HELLO_WAIT = 5.0


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
    """The actor's side: a listening socket and a thread per connected caller (see the
    module docstring for the bounds). ``handle(request, credential)`` answers a
    request of a connection whose hello carried ``credential`` (it raises what the
    caller should see); ``authenticate(credential)`` raises a MemoryBusError for a
    credential that may not connect."""

    def __init__(self, label: str, handle: Callable[[bytes, str], bytes], authenticate: Callable[[str], object],
                 *, max_connections: int = 64, max_pending: int = 8, max_frame: int = MAX_REQUEST,
                 handshake_seconds: float = 2.0, frame_seconds: float = 2.0, idle_seconds: float = IDLE_SECONDS,
                 ) -> None:  # fmt: skip
        self.address = f"\0memorybus-{label}-{os.getpid()}-{secrets.token_hex(8)}"
        self._handle, self._authenticate = handle, authenticate
        self.max_connections, self.max_pending, self.max_frame = max_connections, max_pending, max_frame
        self.handshake_seconds, self.frame_seconds, self.idle_seconds = handshake_seconds, frame_seconds, idle_seconds
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(self.address)
        self._sock.listen(64)
        self.served = 0
        self.refused = 0
        self._open = self._pending = 0
        self._count = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="direct-accept", daemon=True).start()

    @property
    def connections(self) -> tuple[int, int]:
        """(connections served now, of which before their hello)."""
        return self._open, self._pending

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with self._count:
                room = self._open < self.max_connections and self._pending < self.max_pending
                if room:
                    self._open += 1
                    self._pending += 1
            if not room or not self._same_user(conn):
                with self._count:
                    self.refused += 1
                    if room:
                        self._open -= 1
                        self._pending -= 1
                conn.close()
                continue
            try:
                threading.Thread(target=self._serve, args=(conn,), name="direct-read", daemon=True).start()
            except RuntimeError:  # no thread to be had: refused like one over the cap
                with self._count:
                    self.refused, self._open, self._pending = self.refused + 1, self._open - 1, self._pending - 1
                conn.close()

    @staticmethod
    def _same_user(conn: socket.socket) -> bool:
        try:
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        except OSError:
            return False
        _pid, uid, _gid = struct.unpack("3i", creds)
        return bool(uid == os.getuid())

    def _greet(self, conn: socket.socket) -> str | None:
        """The credential of the connection's hello once it checks out (acknowledged);
        None (and the reason sent, when there is one to send) otherwise."""
        by = time.monotonic() + self.handshake_seconds
        try:
            credential = hello_credential(read_frame(conn, MAX_HELLO, self.handshake_seconds,
                                                     self.handshake_seconds, by))  # fmt: skip
            self._authenticate(credential)
            conn.settimeout(self.frame_seconds)
            conn.sendall(_ANSWER.pack(_OK, 0))
            return credential
        except MemoryBusError as exc:  # first: NotAuthenticated is a PermissionError, an OSError
            with contextlib.suppress(OSError):
                conn.settimeout(self.frame_seconds)
                body = pack_error(exc)
                conn.sendall(_ANSWER.pack(_REFUSED, len(body)) + body)
        except (FrameError, OSError):
            pass
        with self._count:
            self.refused += 1
        return None

    def _serve(self, conn: socket.socket) -> None:
        pending = True
        try:
            with conn:
                credential = self._greet(conn)
                with self._count:
                    self._pending -= 1
                    pending = False
                while credential is not None and not self._closed:
                    try:
                        request = read_frame(conn, self.max_frame, self.idle_seconds, self.frame_seconds)
                    except (FrameError, OSError):
                        return
                    status, body = self._answer(request, credential)
                    try:
                        conn.settimeout(self.idle_seconds)  # a caller that never reads its answer
                        conn.sendall(_ANSWER.pack(status, len(body)) + body)
                    except OSError:
                        return
        finally:
            with self._count:
                self._open -= 1
                self._pending -= pending

    def _answer(self, request: bytes, credential: str) -> tuple[int, bytes]:
        try:
            result = self._handle(request, credential)
            with self._count:
                self.served += 1
            return _OK, result
        except Exception as exc:  # broad on purpose: the caller raises it, as Ray would
            return _RAISED, pack_error(exc)

    def close(self) -> None:
        """Stop listening (the address is free at once; connections open now are served
        until their callers hang up or go idle)."""
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
    """The caller's side of one actor's channel, for callers holding ``credential``:
    idle connections kept for reuse (dropped well before the server's idle limit),
    one connection per call in flight (threads of one process share a channel)."""

    def __init__(self, address: str, credential: str = "") -> None:
        self.address = address
        self.broken = False
        self._credential = credential
        self._idle: list[tuple[socket.socket, float]] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def _reuse(self) -> socket.socket | None:
        with self._lock:
            if self._pid != os.getpid():  # a forked child: its parent's connections are not its own
                for inherited, _ in self._idle:
                    inherited.close()  # this process's copy only: the parent's stays open
                self._idle, self._pid = [], os.getpid()
            fresh = time.monotonic() - IDLE_SECONDS / 3
            while self._idle:
                sock, since = self._idle.pop()
                if since >= fresh:
                    return sock
                sock.close()
        return None

    def send(self, request: bytes) -> socket.socket:
        """Send ``request`` on an idle (or new) connection; the connection to read the
        answer from. Raises :class:`ChannelError` when the channel fails (or the
        request is larger than a channel carries)."""
        if len(request) > MAX_REQUEST:
            raise ChannelError("a request larger than the channel carries")
        sock = self._reuse()
        if sock is not None:
            try:
                sock.settimeout(None)
                sock.sendall(frame(request))
                return sock
            except OSError:  # the server let it go: a new connection
                sock.close()
        sock = None
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(self.address)
            sock.settimeout(HELLO_WAIT)
            sock.sendall(hello(self._credential))
            status, size = _ANSWER.unpack(_read_exact(sock, _ANSWER.size))
            if status != _OK:
                raise ChannelError(f"refused: {_unpack_error(_read_exact(sock, min(size, 1 << 16)))}")
            sock.settimeout(None)
            sock.sendall(frame(request))
        except (OSError, ConnectionError, UnicodeEncodeError, ChannelError) as exc:
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
        if status == _OK:
            with self._lock:
                self._idle.append((sock, time.monotonic()))
            return body
        if status == _RAISED:
            with self._lock:
                self._idle.append((sock, time.monotonic()))
        else:
            sock.close()  # refused: the server hung up
        if status not in (_RAISED, _REFUSED):
            raise ChannelError(f"an answer of unknown status {status}")
        raise _unpack_error(body)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for sock, _ in idle:
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
