"""The shard's Gate: a read waits while a write changes the in-memory state, never while
the write's store commit runs; a thread inside a write may enter again without deadlock."""

from __future__ import annotations

import threading

from memorybus.shard.gate import Gate


def test_a_read_waits_for_a_write_but_not_for_its_commit():
    gate, order = Gate(), []
    holding, committing, release = threading.Event(), threading.Event(), threading.Event()

    def write() -> None:
        with gate.write():
            holding.set()
            committing.wait(5)  # the reader is waiting now (checked below)
            order.append("applied before")
            with gate.committing():
                release.wait(5)
            order.append("applied after")

    def read() -> None:
        with gate.read():
            order.append("read")

    writer = threading.Thread(target=write)
    writer.start()
    assert holding.wait(5)
    reader = threading.Thread(target=read)
    reader.start()
    reader.join(0.3)
    assert reader.is_alive() and order == []  # the state is held: the read waits
    committing.set()
    reader.join(5)
    assert order == ["applied before", "read"]  # it ran while the write committed
    release.set()
    writer.join(5)
    assert order == ["applied before", "read", "applied after"]


def test_a_thread_inside_a_write_enters_again():
    gate, done = Gate(), []

    def nested() -> None:
        with gate.write(), gate.read(), gate.write():
            with gate.committing(), gate.write():  # a helper's write while the commit runs
                done.append("inner")
            done.append("outer")

    t = threading.Thread(target=nested, daemon=True)
    t.start()
    t.join(5)
    assert done == ["inner", "outer"]
    with gate.read():  # everything was let go
        done.append("free")
    assert done[-1] == "free"
