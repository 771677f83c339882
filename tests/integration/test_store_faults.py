"""Store faults seen through the bus: a hung Redis (SIGSTOP), a Redis that is down
while a shard restarts (kill -9), a corrupt derived index. Real Redis servers, real
Ray actors, real files."""

import signal
import uuid

import pytest
import redis

import memorybus as mb
from memorybus import Config, Context

pytestmark = [pytest.mark.ray, pytest.mark.redis, pytest.mark.model, pytest.mark.timeout(300)]


def test_write_timed_out_on_a_hung_redis_is_adopted_never_hidden_nor_duplicated(ray_local, tmp_path, private_redis):
    """SIGSTOP: the commit times out and the caller is told the outcome is unknown; the
    script the paused server still holds runs on SIGCONT. The shard then settles the
    write by its operation id: what Redis holds is what the bus shows, and a retry with
    the operation id returns that memory instead of writing a copy."""
    ns = f"hung_{uuid.uuid4().hex[:6]}"
    cfg = Config.redis(private_redis.url, data_dir=str(tmp_path / "data"), num_shards=1, namespace=ns,
                       store_timeout=1.0)
    bus = mb.connect(cfg)
    try:
        ctx = Context("acme", "u1")
        bus.remember("The office opens at nine", ctx)
        private_redis.kill(signal.SIGSTOP)
        try:
            with pytest.raises(mb.StoreUnavailable) as exc:
                bus.remember("The launch code word is pineapple", ctx)
        finally:
            private_redis.kill(signal.SIGCONT)
        assert isinstance(exc.value, mb.OutcomeUnknown) and exc.value.op_id
        raw = redis.Redis.from_url(private_redis.url)
        in_redis = {m.decode() for m in raw.smembers(f"mb:{{{ns}:shard-0}}:all")}
        assert len(in_redis) == 2, "the paused server applies the queued commit when it resumes"
        hits = bus.recall("what is the launch code word?", ctx, k=5)
        assert {h.node.id for h in hits} == in_redis  # adopted: visible, not only in Redis
        assert bus.count() == 2
        again = bus.remember("The launch code word is pineapple", ctx, op_id=exc.value.op_id)
        assert again.id in in_redis and again.content == "The launch code word is pineapple"
        assert bus.count() == 2 and raw.scard(f"mb:{{{ns}:shard-0}}:all") == 2
    finally:
        bus.shutdown()
