"""The direct channel's transport (memorybus.actors.direct) without Ray: a real
server thread and real Unix sockets; what a caller gets for every way it can fail."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from memorybus.actors import direct
from memorybus.errors import InvalidRequest, OperationTimeout

pytestmark = pytest.mark.skipif(not direct.supported(), reason="direct channels need Linux")


def echo(request: bytes) -> bytes:
    if request == b"bad":
        raise InvalidRequest("request", "is not a packed recall request")
    if request.startswith(b"sleep"):
        time.sleep(float(request[5:]))
    return request[::-1]


@pytest.fixture
def server():
    s = direct.ChannelServer("t", echo)
    yield s
    s.close()


def test_answers_come_back_on_a_reused_connection(server):
    ch = direct.Channel(server.address)
    for i in range(5):
        sock = ch.send(f"hello {i}".encode())
        assert ch.receive(sock, 5) == f"hello {i}".encode()[::-1]
    assert server.served == 5
    assert len(ch._idle) == 1  # one connection, reused
    big = os.urandom(3 << 20)
    assert ch.receive(ch.send(big), 10) == big[::-1]


def test_the_handlers_error_is_raised_as_itself_and_the_channel_stays_usable(server):
    ch = direct.Channel(server.address)
    with pytest.raises(InvalidRequest, match="not a packed recall request") as info:
        ch.receive(ch.send(b"bad"), 5)
    assert (info.value.argument, type(info.value)) == ("request", InvalidRequest)
    assert not ch.broken
    assert ch.receive(ch.send(b"ok"), 5) == b"ko"


def test_past_the_deadline_operation_timeout_and_the_late_answer_is_never_read(server):
    ch = direct.Channel(server.address)
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
    ch = direct.Channel(server.address)
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
    dead = direct.ChannelServer("gone", echo)
    address = dead.address
    dead.close()
    ch = direct.Channel(address)
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
    ch = direct.Channel(server.address)
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
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(server.address)
    sock.sendall(direct._HEAD.pack(direct.MAX_REQUEST + 1))
    sock.settimeout(5)
    assert sock.recv(16) == b""
    ch = direct.Channel(server.address)  # the server serves others on
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
        "    s.sendall(struct.pack('<I', 2) + b'hi')\n"
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
    ch = direct.Channel(server.address)
    assert ch.receive(ch.send(b"parent"), 5) == b"tnerap"
    inherited = ch._idle[0]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a call of its own, on a connection of its own
        try:
            ok = ch.receive(ch.send(b"child"), 5) == b"dlihc" and inherited not in ch._idle
            os.write(write_end, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write_end)
    for i in range(20):  # the parent's connection still answers the parent, and only it
        assert ch.receive(ch.send(f"p{i}".encode()), 5) == f"p{i}".encode()[::-1]
    assert ch._idle == [inherited]
    assert os.read(read_end, 1) == b"1"
    os.waitpid(pid, 0)
    os.close(read_end)


def test_when_one_call_raises_the_unread_answers_connections_are_closed(server):
    ch = direct.Channel(server.address)
    calls = [direct.DirectCall(ch, b"bad", lambda: "ref"), direct.DirectCall(ch, b"sleep0.2", lambda: "ref")]
    with pytest.raises(InvalidRequest):
        direct.get_direct(direct.Direct(calls), lambda: 5.0, lambda refs, timeout: ["through ray"])
    assert len(ch._idle) == 1  # the first call's connection; the second's was closed, unread
    time.sleep(0.3)
    assert ch.receive(ch.send(b"after"), 5) == b"retfa"
