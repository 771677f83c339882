"""Concurrent single assert_fact calls through a real ShardActor (embedded SQLite, the
real model): they share commits, and every acknowledged one survives the actor being
killed and restarted."""

import threading
import uuid

import pytest

import memorybus as mb
from memorybus import Config, Context, actors
from tests.actor_restart import restart_actor

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]
WRITERS, EACH = 16, 8


def test_concurrent_single_assertions_share_commits_and_survive_a_restart(ray_local, tmp_path):
    cfg = Config.embedded(tmp_path / "data", num_shards=1, namespace=f"facts_{uuid.uuid4().hex[:6]}")
    bus = mb.connect(cfg)
    try:
        ctx = Context("acme", "u1", "agent", "s1")
        bus.assert_fact("team/warm_up", "warm up", ctx, scope="org")
        acked: list[list[mb.FactResult]] = [[] for _ in range(WRITERS)]
        errors: list[BaseException] = []

        def writer(w: int) -> None:
            try:
                for i in range(EACH):
                    acked[w].append(bus.assert_fact(f"team/k{w % 4}", f"writer {w} says the value is {i}", ctx,
                                                    scope="org", confidence=0.5 + 0.05 * i))  # fmt: skip
            except Exception as exc:  # the test reports it
                errors.append(exc)

        before = bus.stats()["shards"][0]["process"]["fact_groups"]
        threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(240)
        assert not errors, errors
        after = bus.stats()["shards"][0]["process"]["fact_groups"]
        calls, commits = after["calls"] - before["calls"], after["commits"] - before["commits"]
        assert calls == WRITERS * EACH and commits < calls, (calls, commits)
        shard = actors.shard_handles(bus.config)[0]
        restart_actor(shard)
        for k in range(4):
            history = bus.history(f"team/k{k}", ctx, scope="org")
            mine = [r for rs in acked for r in rs if r.node.key == f"team/k{k}"]
            assert {e.data["write"] for e in history} == {r.write_id for r in mine}
            assert sorted(e.data["fact_seq"] for e in history) == list(range(1, len(mine) + 1))
            assert sorted(r.fact_seq for r in mine) == list(range(1, len(mine) + 1))  # each answer its own
            current = bus.current_fact(f"team/k{k}", ctx, scope="org")
            last = max((r for r in mine if r.current), key=lambda r: r.fact_seq)
            assert current is not None and current.id == last.node.id
    finally:
        bus.shutdown()
