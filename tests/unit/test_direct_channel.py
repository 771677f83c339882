"""The direct channel's transport (memorybus.actors.direct) without Ray: a real
server thread and real Unix sockets; what a caller gets for every way it can fail,
and what a hostile process of the same user gets (no hello, a bad credential, a
pickle, floods of half-open connections, oversized and trickled frames)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from memorybus.actors import direct, frames
from memorybus.errors import InvalidRequest, MemoryBusError, NotAuthenticated, OperationTimeout
from memorybus.retrieval.wire import unpack_request

pytestmark = pytest.mark.skipif(not direct.supported(), reason="direct channels need Linux")


GOOD = "mbc1.good.credential"
handled: list[tuple[bytes, str]] = []


def authenticate(credential: str) -> None:
    if credential != GOOD:
        raise NotAuthenticated("bad signature")


def echo(request: bytes, credential: str = GOOD) -> bytes:
    handled.append((request[:16], credential))
    if request == b"bad":
        raise InvalidRequest("request", "is not a packed recall request")
    if request.startswith(b"sleep"):
        time.sleep(float(request[5:]))
    return request[::-1]


@pytest.fixture
def server():
    handled.clear()
    s = direct.ChannelServer("t", echo, authenticate)
    yield s
    s.close()


def channel(address: str) -> direct.Channel:
    return direct.Channel(address, GOOD)


def test_answers_come_back_on_a_reused_connection(server):
    ch = channel(server.address)
    for i in range(5):
        sock = ch.send(f"hello {i}".encode())
        assert ch.receive(sock, 5) == f"hello {i}".encode()[::-1]
    assert server.served == 5
    assert len(ch._idle) == 1  # one connection, reused
    big = os.urandom(direct.MAX_REQUEST)
    assert ch.receive(ch.send(big), 10) == big[::-1]
    with pytest.raises(direct.ChannelError, match="larger than the channel carries"):
        ch.send(big + b"x")  # through Ray instead
    assert not ch.broken


def test_the_handlers_error_is_raised_as_itself_and_the_channel_stays_usable(server):
    ch = channel(server.address)
    with pytest.raises(InvalidRequest, match="not a packed recall request") as info:
        ch.receive(ch.send(b"bad"), 5)
    assert (info.value.argument, type(info.value)) == ("request", InvalidRequest)
    assert not ch.broken
    assert ch.receive(ch.send(b"ok"), 5) == b"ko"


def test_past_the_deadline_operation_timeout_and_the_late_answer_is_never_read(server):
    ch = channel(server.address)
    sock = ch.send(b"sleep0.6")
    started = time.monotonic()
    with pytest.raises(OperationTimeout):
        ch.receive(sock, 0.2)
    assert time.monotonic() - started < 0.5
    assert not ch.broken and ch._idle == []  # that connection is closed, not kept
    assert ch.receive(ch.send(b"next"), 5) == b"txen"  # a new connection: not the late answer
    time.sleep(0.6)
    assert ch.receive(ch.send(b"again"), 5) == b"niaga"


def test_calls_from_many_threads_each_get_their_own_answer(server):
    ch = channel(server.address)
    wrong: list[str] = []

    def worker(n: int) -> None:
        for i in range(40):
            msg = f"{n}:{i}".encode()
            if ch.receive(ch.send(msg), 10) != msg[::-1]:
                wrong.append(msg.decode())

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == [] and server.served == 320


def test_a_channel_with_no_listener_fails_over_to_the_fallback():
    dead = direct.ChannelServer("gone", echo, authenticate)
    address = dead.address
    dead.close()
    ch = channel(address)
    called: list[bytes] = []

    def fallback(request: bytes) -> str:
        called.append(request)
        return "ref"

    calls = [direct.DirectCall(ch, b"abc", lambda: fallback(b"abc")),
             direct.DirectCall(None, b"def", lambda: fallback(b"def"))]
    got = direct.get_direct(direct.Direct(calls), lambda: 5.0, lambda refs, timeout: [f"ray:{refs[0]}"])
    assert got == ["ray:ref", "ray:ref"]
    assert called == [b"abc", b"def"] and ch.broken


def test_a_connection_that_breaks_mid_call_fails_over(server):
    ch = channel(server.address)
    calls = [direct.DirectCall(ch, b"sleep0.3", lambda: "ref")]

    def break_it() -> None:
        time.sleep(0.1)
        for sock in list(server_conns()):
            sock.shutdown(socket.SHUT_RDWR)

    # the server's side of the connection is shut from here: the caller sees EOF
    accepted: list[socket.socket] = []
    original = server._serve

    def recording(conn: socket.socket) -> None:
        accepted.append(conn)
        original(conn)

    server._serve = recording

    def server_conns() -> list[socket.socket]:
        return accepted

    threading.Thread(target=break_it).start()
    got = direct.get_direct(direct.Direct(calls), lambda: 5.0, lambda refs, timeout: ["through ray"])
    assert got == ["through ray"] and ch.broken


def test_a_frame_larger_than_the_limit_is_hung_up_on(server):
    sock = greeted(server)
    sock.sendall(direct._HEAD.pack(direct.MAX_REQUEST + 1))
    sock.settimeout(1)  # at once: not after the frame's 2 s
    assert sock.recv(16) == b""
    ch = channel(server.address)  # the server serves others on
    assert ch.receive(ch.send(b"x"), 5) == b"x"


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
def test_a_process_of_another_user_is_refused(server):
    code = (
        "import os, socket, struct, sys\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "s.connect(bytes.fromhex(sys.argv[1]).decode())\n"
        "s.settimeout(5)\n"
        "try:\n"
        "    s.sendall(struct.pack('<I', 24) + b'mbd1mbc1.good.credential')\n"
        "    print(repr(s.recv(16)))\n"
        "except OSError as e:\n"
        "    print('error', type(e).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, server.address.encode().hex()],
                         check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() in ("b''", "error ConnectionResetError", "error BrokenPipeError")
    assert server.served == 0 and server.refused == 1


def test_a_forked_child_never_reads_its_parents_answers(server):
    ch = channel(server.address)
    assert ch.receive(ch.send(b"parent"), 5) == b"tnerap"
    inherited = ch._idle[0][0]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a call of its own, on a connection of its own
        try:
            ok = ch.receive(ch.send(b"child"), 5) == b"dlihc" and inherited not in [c for c, _ in ch._idle]
            os.write(write_end, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write_end)
    for i in range(20):  # the parent's connection still answers the parent, and only it
        assert ch.receive(ch.send(f"p{i}".encode()), 5) == f"p{i}".encode()[::-1]
    assert [c for c, _ in ch._idle] == [inherited]
    assert os.read(read_end, 1) == b"1"
    os.waitpid(pid, 0)
    os.close(read_end)


def test_when_one_call_raises_the_unread_answers_connections_are_closed(server):
    ch = channel(server.address)
    calls = [direct.DirectCall(ch, b"bad", lambda: "ref"), direct.DirectCall(ch, b"sleep0.2", lambda: "ref")]
    with pytest.raises(InvalidRequest):
        direct.get_direct(direct.Direct(calls), lambda: 5.0, lambda refs, timeout: ["through ray"])
    assert len(ch._idle) == 1  # the first call's connection; the second's was closed, unread
    time.sleep(0.3)
    assert ch.receive(ch.send(b"after"), 5) == b"retfa"


# ------------------------------------------------------------ a hostile caller


def raw(server) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(server.address)
    sock.settimeout(10)
    return sock


def answer(sock: socket.socket) -> tuple[int, bytes]:
    status, size = direct._ANSWER.unpack(direct._read_exact(sock, direct._ANSWER.size))
    return status, direct._read_exact(sock, size)


def greeted(server) -> socket.socket:
    """A connection whose hello the server acknowledged."""
    sock = raw(server)
    sock.sendall(frames.hello(GOOD))
    assert answer(sock) == (direct._OK, b"")
    return sock


def closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1 << 16) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def feed(sock: socket.socket, chunks: list[bytes], pause: float = 0.0) -> None:
    for chunk in chunks:
        sock.sendall(chunk)
        time.sleep(pause)


def threads() -> int:
    with open(f"/proc/{os.getpid()}/status") as f:
        return int(next(line for line in f if line.startswith("Threads:")).split()[1])


class Plant:
    """A pickle whose unpickling would create ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_no_hello_within_the_deadline_the_connection_is_closed_and_nothing_is_handled():
    s = direct.ChannelServer("t", echo, authenticate, handshake_seconds=0.5)
    try:
        handled.clear()
        silent = raw(s)
        started = time.monotonic()
        assert closed_by_server(silent, 5)
        assert 0.4 < time.monotonic() - started < 2.0
        trickled = raw(s)  # a hello sent a byte at a time: the deadline is for the whole hello
        hello = frames.hello(GOOD)
        with pytest.raises(OSError):
            feed(trickled, [hello[i:i + 1] for i in range(len(hello))], 0.1)
        assert handled == [] and s.served == 0 and s.refused == 2 and s.connections == (0, 0)
    finally:
        s.close()


def test_a_request_instead_of_a_hello_is_never_read_as_a_request(server, tmp_path):
    import pickle

    planted = tmp_path / "planted"
    sock = raw(server)
    sock.sendall(frames.frame(pickle.dumps(Plant(str(planted)))))
    status, body = answer(sock)
    assert status == direct._REFUSED and "did not start with a memorybus hello" in str(frames.unpack_error(body))
    assert closed_by_server(sock, 5)
    assert handled == [] and not planted.exists() and server.refused == 1


def test_a_bad_or_missing_credential_is_refused_with_the_reason_and_nothing_is_handled(server):
    for credential in ("mbc1.forged.credential", ""):
        ch = direct.Channel(server.address, credential)
        with pytest.raises(direct.ChannelError, match="refused: not authenticated: bad signature"):
            ch.send(b"hello")  # the caller goes through Ray, which raises NotAuthenticated itself
        assert ch.broken and ch._idle == []
    sock = raw(server)
    sock.sendall(frames.hello("mbc1.forged.credential") + frames.frame(b"sneaked in behind the hello"))
    status, body = answer(sock)
    assert status == direct._REFUSED and isinstance(frames.unpack_error(body), NotAuthenticated)
    assert closed_by_server(sock, 5)
    deadline = time.monotonic() + 5  # the server counts a refusal after closing (a loaded machine: later)
    while server.refused < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert handled == [] and server.served == 0 and server.refused == 3


def test_a_pickled_request_after_a_good_hello_runs_no_code(tmp_path):
    import pickle

    planted = tmp_path / "planted"

    def like_the_shard(request: bytes, credential: str) -> bytes:
        unpack_request(request)  # what ShardActor.recall reads a request with
        return b"unreachable"

    s = direct.ChannelServer("t", like_the_shard, authenticate)
    try:
        ch = channel(s.address)
        with pytest.raises(InvalidRequest, match="not a packed recall request"):
            ch.receive(ch.send(pickle.dumps(Plant(str(planted)))), 5)
        assert not planted.exists() and s.served == 0
    finally:
        s.close()


def test_200_half_open_connections_keep_threads_bounded_and_a_caller_is_served_after(server):
    before = threads()
    opened = [raw(server) for _ in range(200)]
    time.sleep(0.3)
    during = threads()
    assert server.max_pending == 8  # the default
    assert during - before <= 8 + 1, (before, during)  # not one thread per connection
    assert server.connections[1] <= 8
    assert sum(closed_by_server(s, 0.05) for s in opened) >= 200 - 8  # refused at once
    deadline = time.monotonic() + 10
    while server.connections != (0, 0):  # the pending ones are let go at the hello deadline
        assert time.monotonic() < deadline
        time.sleep(0.1)
    for s in opened:
        s.close()
    ch = channel(server.address)
    assert ch.receive(ch.send(b"still here"), 5) == b"ereh llits"
    assert threads() - before <= 2


def test_connections_beyond_the_cap_are_refused_and_the_caller_goes_through_ray():
    s = direct.ChannelServer("t", echo, authenticate, max_connections=3, max_pending=3)
    try:
        held = [greeted(s) for _ in range(3)]
        ch = channel(s.address)
        got = direct.get_direct(direct.Direct([direct.DirectCall(ch, b"abc", lambda: "ref")]), lambda: 5.0,
                                lambda refs, timeout: ["through ray"])  # fmt: skip
        assert got == ["through ray"] and s.refused == 1
        held.pop().close()
        time.sleep(0.2)
        again = channel(s.address)
        assert again.receive(again.send(b"ok"), 5) == b"ko"
    finally:
        s.close()


def test_oversized_and_trickled_frames_are_closed_without_buffering_them(server):
    big = greeted(server)
    big.sendall(direct._HEAD.pack(48 << 20))  # 48 MiB announced: refused before a byte of it is read
    with pytest.raises(OSError):
        feed(big, [b"\0" * (1 << 20)] * 64)
    s = direct.ChannelServer("t", echo, authenticate, frame_seconds=0.6)
    try:
        slow = greeted(s)
        slow.sendall(direct._HEAD.pack(1000))
        started = time.monotonic()
        with pytest.raises(OSError):  # 10 bytes every 0.1 s: each recv is quick, the frame never ends
            feed(slow, [b"x" * 10] * 100, 0.1)
        assert time.monotonic() - started < 3
        assert s.served == 0
    finally:
        s.close()
    assert server.served == 0 and handled == []


def test_an_idle_connection_is_let_go_and_the_caller_reconnects(server):
    s = direct.ChannelServer("t", echo, authenticate, idle_seconds=0.3)
    try:
        ch = channel(s.address)
        assert ch.receive(ch.send(b"one"), 5) == b"eno"
        (kept, _), = ch._idle
        time.sleep(0.8)
        assert s.connections == (0, 0)
        assert ch.receive(ch.send(b"two"), 5) == b"owt"  # a new connection, not the dead one
        assert not ch.broken and ch._idle[0][0] is not kept
    finally:
        s.close()


class StrangeError(Exception):
    def __reduce__(self):
        return (os.system, ("true",))


def test_errors_come_back_as_memorybus_classes_made_from_plain_values():
    def raising(request: bytes, credential: str) -> bytes:
        if request == b"timeout":
            raise OperationTimeout(1.5, "op-1")
        raise StrangeError("not ours")

    s = direct.ChannelServer("t", raising, authenticate)
    try:
        ch = channel(s.address)
        with pytest.raises(OperationTimeout) as info:
            ch.receive(ch.send(b"timeout"), 5)
        assert (info.value.seconds, info.value.op_id) == (1.5, "op-1")
        with pytest.raises(MemoryBusError, match="StrangeError: not ours") as other:
            ch.receive(ch.send(b"other"), 5)
        assert type(other.value) is MemoryBusError
    finally:
        s.close()
    import msgpack

    named = frames.unpack_error(msgpack.packb({"type": "system", "args": ["touch /tmp/x"]}))
    assert type(named) is MemoryBusError
    assert type(frames.unpack_error(b"\x80\x05junk")) is MemoryBusError
    wrong = frames.unpack_error(msgpack.packb({"type": "InvalidRequest", "args": [1, 2, 3, 4]}))
    assert type(wrong) is MemoryBusError
