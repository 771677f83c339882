"""The direct channel's frames and errors (see :mod:`memorybus.actors.direct`).

- A **frame** is its length (4 bytes, little-endian) and its bytes.
  :func:`read_frame` reads one within bounds: a length over ``cap`` is refused
  before anything of it is read (no buffer larger than ``cap`` is ever made), the
  first byte must come within ``wait`` seconds and the whole frame within
  ``within`` seconds of that byte (so a frame trickled in a byte at a time is
  cut off too), else :class:`FrameError`.
- The **hello** (a connection's first frame) is ``mbd1`` and the caller's
  credential (ASCII).
- An **error** travels as a msgpack map ``{"type": name, "args": [...]}`` and is
  raised on the caller's side as that class of :mod:`memorybus.errors`, made from
  those plain arguments; any other name, or arguments that do not fit the class,
  become a plain :class:`~memorybus.errors.MemoryBusError` with the text. No class
  the sender names is ever imported or unpickled.
"""

from __future__ import annotations

import socket
import struct
import time

import msgpack

from memorybus import errors
from memorybus.auth.credential import MAX_CREDENTIAL
from memorybus.errors import MemoryBusError, NotAuthenticated

HEAD = struct.Struct("<I")
HELLO = b"mbd1"
#: the largest hello frame (its prefix and a credential)
MAX_HELLO = len(HELLO) + MAX_CREDENTIAL
#: memorybus's own error classes: the only ones an error frame can name
ERRORS: dict[str, type[MemoryBusError]] = {
    name: cls for name, cls in vars(errors).items() if isinstance(cls, type) and issubclass(cls, MemoryBusError)
}


class FrameError(Exception):
    """A frame that cannot be read: the peer hung up, sent too much, or too slowly."""


def _read_by(sock: socket.socket, n: int, end: float) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        left = end - time.monotonic()
        if left <= 0:
            raise FrameError("too slow")
        sock.settimeout(left)
        try:
            k = sock.recv_into(view[got:], min(n - got, 1 << 16))
        except TimeoutError:
            raise FrameError("too slow") from None
        if not k:
            raise FrameError("closed")
        got += k
    return bytes(buf)


def read_frame(sock: socket.socket, cap: int, wait: float, within: float, by: float | None = None) -> bytes:
    """One frame of at most ``cap`` bytes (see the module docstring); ``by``: an
    absolute ``time.monotonic()`` deadline for the whole frame as well."""
    sock.settimeout(wait if by is None else max(1e-3, min(wait, by - time.monotonic())))
    try:
        first = sock.recv(HEAD.size)
    except TimeoutError:
        raise FrameError("idle") from None
    if not first:
        raise FrameError("closed")
    end = time.monotonic() + within if by is None else min(by, time.monotonic() + within)
    (size,) = HEAD.unpack(first + _read_by(sock, HEAD.size - len(first), end))
    if size > cap:
        raise FrameError(f"a frame of {size} bytes (at most {cap})")
    return _read_by(sock, size, end)


def frame(body: bytes) -> bytes:
    return HEAD.pack(len(body)) + body


def hello(credential: str) -> bytes:
    return frame(HELLO + credential.encode("ascii"))


def hello_credential(body: bytes) -> str:
    """The credential a hello frame carries; NotAuthenticated when it is not one."""
    if not body.startswith(HELLO):
        raise NotAuthenticated("the connection did not start with a memorybus hello")
    try:
        return body[len(HELLO):].decode("ascii")
    except UnicodeDecodeError:
        raise NotAuthenticated("malformed credential") from None


def pack_error(exc: BaseException) -> bytes:
    """``exc`` as an error frame's body (its class when it is memorybus's own)."""
    name = type(exc).__name__
    if ERRORS.get(name) is type(exc):
        try:
            return msgpack.packb({"type": name, "args": list(exc.args)}, use_bin_type=True)
        except (TypeError, ValueError, OverflowError):  # arguments that are not plain values: the text
            pass
    return msgpack.packb({"type": "MemoryBusError", "args": [f"{name}: {exc}"]}, use_bin_type=True)


def unpack_error(body: bytes) -> MemoryBusError:
    """The error an error frame names (see the module docstring)."""
    try:
        got = msgpack.unpackb(body, raw=False, strict_map_key=True, max_ext_len=0)
    except (ValueError, TypeError, msgpack.UnpackException):
        return MemoryBusError("the shard answered an error that does not decode")
    if not isinstance(got, dict) or not isinstance(got.get("args"), list):
        return MemoryBusError("the shard answered an error that does not decode")
    cls, args = ERRORS.get(str(got.get("type"))), got["args"]
    if cls is not None:
        try:
            return cls(*args)
        except (TypeError, ValueError):  # arguments that do not fit the class
            pass
    return MemoryBusError(f"{got.get('type')}: {args}")
