"""A whole bus (Ray actors, the model) on Redis Sentinel loses no acknowledged write when
its master dies: writer threads call ``remember`` and ``assert_fact`` through the public
API while the replicas fall behind (SIGSTOP, link cut) and the master is killed (SIGKILL);
the sentinels promote a replica, the shards' and hubs' clients follow it, and the writers
go on. A call that raised is retried the way a user would, with the same ``op_id`` (the
``OutcomeUnknown`` contract), and only a call that returned counts as acknowledged. After
the failover every acknowledged memory and fact reads back exactly once, and the durable
subscription delivered an event for each."""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
import time
import uuid
from typing import Any

import pytest

import memorybus as mb
from memorybus import Config, Context
from tests.sentinel_set import SentinelSet

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.redis, pytest.mark.model, pytest.mark.timeout(300)]
WRITERS = 3
NAMES = ("Ada", "Bruno", "Chen", "Dara", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kofi", "Lena")
TOPICS = ("billing", "search", "payroll", "onboarding", "alerts", "backups", "mobile", "pricing", "audit")


def text(i: int, k: int) -> str:
    return (f"Writer {i} note {k}: {NAMES[k % len(NAMES)]} moved the {TOPICS[(k * 7 + i) % len(TOPICS)]} "
            f"review to room {100 + k * 3 + i}")


def settled(call: Any, deadline: float, errors: list[str]) -> Any:
    """What a user does: retry a call that raised, with the same op_id, until it returns
    (its outcome, never a second copy); None when the deadline passed first."""
    op_id = uuid.uuid4().hex
    while time.time() < deadline:
        try:
            return call(op_id)
        except mb.MemoryBusError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            time.sleep(0.1)
    return None


def test_bus_survives_a_master_killed_under_load_with_no_acknowledged_write_lost(ray_local, tmp_path):
    (tmp_path / "sentinel").mkdir()
    s = SentinelSet(tmp_path / "sentinel")
    s.start()
    org = f"ha{uuid.uuid4().hex[:6]}"
    cfg = Config.redis(s.url, data_dir=str(tmp_path / "data"), num_shards=2, namespace=org, store_timeout=2.0,
                       redis_wait_timeout=0.5, write_timeout=20.0, read_timeout=20.0)
    assert cfg.redis_replicas_to_wait() == 1  # a sentinel URL: acknowledged means a replica has it
    began = time.time()
    bus = mb.connect(cfg)
    connected = time.time() - began
    subs: list[Any] = []
    try:
        users = [Context(org, f"u{i}", "writer") for i in range(WRITERS)]
        got: dict[str, list[mb.Event]] = {u.user or "": [] for u in users}
        subs += [bus.subscribe(Context(org, u.user), callback=got[u.user or ""].extend, name="feed") for u in users]
        memories: dict[int, list[tuple[str, str]]] = {i: [] for i in range(WRITERS)}  # (id, content)
        facts: dict[int, list[tuple[str, str, str]]] = {i: [] for i in range(WRITERS)}  # (key, content, id)
        errors: list[str] = []
        outcomes: list[str] = []
        stop = threading.Event()
        deadline = time.time() + 150  # a loaded machine is slow; a healthy run needs about 10 s

        crashed: list[str] = []

        def writer(i: int) -> None:
            ctx, k = users[i], 0
            try:
                while not stop.is_set():
                    content = text(i, k)
                    if k % 2 == 0:
                        remember = functools.partial(bus.remember, content, ctx, scope="user")
                        node = settled(lambda op, call=remember: call(op_id=op), deadline, errors)
                        if node is None:
                            return
                        memories[i].append((node.id, content))
                    else:
                        key = f"user:u{i}/note_{k}"
                        assert_fact = functools.partial(bus.assert_fact, key, content, ctx, scope="user")
                        r = settled(lambda op, call=assert_fact: call(op_id=op), deadline, errors)
                        if r is None:
                            return
                        facts[i].append((key, content, r.node.id))
                        outcomes.append(r.outcome)
                    k += 1
            except BaseException as exc:  # reported by the test's own thread
                crashed.append(f"writer {i}: {type(exc).__name__}: {exc}")

        def acked() -> int:
            return sum(map(len, memories.values())) + sum(map(len, facts.values()))

        threads = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(WRITERS)]
        for t in threads:
            t.start()
        s.wait_until(lambda: acked() >= 30, 60, "the writers did not get going")
        old_master = s.nodes[0]
        # the replicas fall behind (paused, cut off), so the master holds writes no replica
        # has; then it dies mid-load: without WAIT those writes were acknowledged and are gone
        for replica in s.nodes[1:]:
            replica.kill(signal.SIGSTOP)
        old_master.admin().client_kill_filter(_type="replica")
        time.sleep(0.3)
        before = acked()
        killed_at = time.time()
        old_master.kill(signal.SIGKILL)
        for replica in s.nodes[1:]:
            replica.kill(signal.SIGCONT)
        s.wait_until(lambda: s.master_port_seen(s.sentinel_ports[0]) not in (None, old_master.port), 20,
                     "no replica was promoted")
        s.wait_until(lambda: any(s.replicas_online(n) >= 1 for n in s.nodes[1:]), 30,
                     "the other replica did not follow the new master")  # WAIT 1 can be met again
        at_switch = acked()
        s.wait_until(lambda: acked() >= at_switch + 20, 60, "writes did not go on after the failover")
        recovered = time.time() - killed_at
        stop.set()
        for t in threads:
            t.join(30)
        assert not any(t.is_alive() for t in threads) and crashed == []
        assert set(outcomes) == {"created"}  # a retried assertion answers its first outcome
        total = acked()
        assert before > 0 and total >= at_switch + 20
        assert errors, "the master died mid-load: some calls must have failed and been retried"

        # every acknowledged memory and fact reads back, exactly once, from the new master
        for i in range(WRITERS):
            for node_id, content in memories[i]:
                assert bus.get(node_id, users[i]).content == content
            for key, content, node_id in facts[i]:
                current = bus.current_fact(key, users[i], scope="user")
                assert current is not None and (current.id, current.content) == (node_id, content)
                assert len(bus.history(key, users[i], scope="user")) == 1  # a retry recorded nothing twice
            page = bus.list_memories(Context(org, f"u{i}"), scope="user", limit=1000)
            assert page.cursor is None  # one page holds them all
            listed = [n.content for n in page.memories]
            assert sorted(listed) == sorted([c for _, c in memories[i]] + [c for _, c, _ in facts[i]])
        assert bus.count() == total  # no copy anywhere
        def master() -> Any:  # a loaded machine may see a second failover: ask which node leads now
            for node in s.nodes[1:]:
                with contextlib.suppress(Exception):
                    if node.admin(socket_timeout=1.0).info("replication")["role"] == "master":
                        return node.admin()
            return None

        s.wait_until(lambda: master() is not None, 30, "no master after the failover")
        raw = master()
        hub_state = {k.decode() for k in raw.hkeys(f"mb:{{{org}:bus-0}}:kv")}  # written with WAIT too
        assert sum(1 for k in hub_state if k.startswith("sub:")) == WRITERS
        assert raw.hlen(f"mb:{{{org}:auth}}:keys") >= 1  # the key ring the credentials are checked with

        # the durable subscriptions delivered every acknowledged write
        def missing() -> list[str]:
            out = []
            for i in range(WRITERS):
                seen = {e.node.id for e in list(got[f"u{i}"])}
                out += [x for x, _ in memories[i] if x not in seen] + [x for _, _, x in facts[i] if x not in seen]
            return out

        wait_deadline = time.time() + 60
        while missing() and time.time() < wait_deadline:
            time.sleep(0.2)
        assert missing() == [], f"{len(missing())} acknowledged writes never reached their subscription"
        assert [sub.failed for sub in subs] == [None] * WRITERS
        print(f"\nbus failover: {before} calls acknowledged before the kill, {total} in all, 0 lost, 0 copies; "
              f"{len(errors)} failed calls retried; {at_switch - before} acknowledged while switching; writes "
              f"flowing again within {recovered:.1f} s of the kill; connect took {connected:.1f} s")
    finally:
        for sub in subs:
            sub.stop()
        bus.shutdown()
        s.stop()
