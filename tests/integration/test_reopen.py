"""A bus reopened on its data directory in a NEW Ray cluster (issue 32, items 1 and 4).

Cycle 1 runs as a user's script does: a process of its own whose ``connect`` starts a
local Ray and whose ``close`` stops it. It subscribes three actors (a named one that
comes back, a named one that never does, an unnamed one) and closes. Cycle 2 connects
the same config here, on the tests' shared Ray (``ray_local``): a Ray cycle 1's bus
never ran on, so nothing of cycle 1 but its data directory is there. The second
cycle's bus is then shared by the tests below.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

import memorybus as mb
from memorybus import Config, Context, actors

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]

USERS = "reopen_users"  # the subscribers' own Ray namespace
OWNER = Context("acme", "alice", "planner")
WRITER = Context("acme", "bob", "writer")


@ray.remote(num_cpus=0)
class Worker:
    def __init__(self) -> None:
        self.got: list[str] = []

    def on_events(self, batch: list[Any]) -> None:
        self.got.extend(e.node.content for e in batch if e.node is not None)

    def received(self) -> list[str]:
        return list(self.got)


def _wait(cond: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError("timed out")


def _config(data: str, namespace: str) -> Config:
    """Both cycles' config (queries embedded by the embedder: no query model in either process)."""
    return Config.embedded(data, num_shards=2, namespace=namespace, query_encoder="embedder")


def _connect(cfg: Config) -> mb.MemoryBus:
    return mb.connect(cfg, num_cpus=2, log_to_driver=False, configure_logging=False)


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def cycle_one(data: str, namespace: str) -> None:
    """Cycle 1, in a process of its own (see the module's docstring)."""
    cfg = _config(data, namespace)
    bus = _connect(cfg)
    assert bus._owns_ray, "cycle 1 runs on a Ray of its own"
    feed = Worker.options(name="feed-worker", namespace=USERS).remote()
    ghost = Worker.options(name="ghost-worker", namespace=USERS).remote()
    loose = Worker.remote()  # unnamed: valid in this cluster only
    bus.subscribe(OWNER, target=feed, name="feed")
    bus.subscribe(OWNER, target=ghost, name="ghost")
    bus.subscribe(OWNER, target=loose, name="loose")
    for i in range(3):
        bus.remember(f"delivered live {i}", WRITER, scope="org")
    _wait(lambda: len(ray.get(feed.received.remote(), timeout=10)) == 3)
    assert ray.get(feed.received.remote(), timeout=10) == [f"delivered live {i}" for i in range(3)]
    ray.kill(feed)  # the subscriber stops; the bus goes on
    for i in range(2):
        bus.remember(f"missed in cycle 1 #{i}", WRITER, scope="org")
    _wait(lambda: "feed" in bus.bus_stats(OWNER)["parked"], 30)  # its delivery found it gone
    bus.close()  # stops the Ray it started
    assert not ray.is_initialized()
    print("CYCLE 1 DONE", flush=True)


@pytest.fixture(scope="module")
def reopened(ray_local: Any, short_tmp: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data = tmp_path_factory.mktemp("reopen")
    cfg = _config(str(data), f"reopen_{uuid.uuid4().hex[:6]}")
    # ---- cycle 1: a script with a Ray of its own (a short private RAY_TMPDIR; no RAY_ADDRESS)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(PYTHONPATH=str(ROOT), RAY_TMPDIR=short_tmp("mbreo"))
    script = "import sys\nfrom tests.integration.test_reopen import cycle_one\ncycle_one(*sys.argv[1:])\n"
    done = subprocess.run([sys.executable, "-c", script, str(data), cfg.namespace], env=env, cwd=str(ROOT),
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0 and "CYCLE 1 DONE" in done.stdout, done.stdout[-2000:] + done.stderr[-4000:]
    # ---- cycle 2: the same config, here, on a Ray cycle 1 never ran on
    lines = Lines()
    logger = logging.getLogger("memorybus")
    logger.addHandler(lines)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        started = time.monotonic()
        bus = _connect(cfg)
        took = time.monotonic() - started
    finally:
        logger.removeHandler(lines)
        logger.setLevel(old_level)
    assert not bus._owns_ray
    yield {"bus": bus, "cfg": cfg, "lines": lines.lines, "took": took}
    bus.shutdown()  # the actors; the shared Ray goes on, with none of this module's actors left
    for name in ("feed-worker", "ghost-worker"):
        with contextlib.suppress(ValueError):
            ray.kill(ray.get_actor(name, namespace=USERS))


def test_connect_reopens_and_says_in_one_line_what_is_parked(reopened: dict[str, Any]) -> None:
    parked = [line for line in reopened["lines"] if "parked" in line]
    assert len(parked) == 1, reopened["lines"]
    assert "3 subscription(s)" in parked[0]
    for name in ("'feed'", "'ghost'", "'loose'", "feed-worker", "ghost-worker"):
        assert name in parked[0]
    stats = reopened["bus"].bus_stats(OWNER)
    assert stats["parked"] == ["feed", "ghost", "loose"]
    assert "unnamed" in stats["subscriptions"]["loose"]["parked"]


def test_a_named_target_that_reappears_gets_every_event_it_missed(reopened: dict[str, Any]) -> None:
    bus = reopened["bus"]
    for i in range(2):
        bus.remember(f"missed in cycle 2 #{i}", WRITER, scope="org")
    feed = Worker.options(name="feed-worker", namespace=USERS).remote()  # the subscriber runs again
    expected = [f"missed in cycle 1 #{i}" for i in range(2)] + [f"missed in cycle 2 #{i}" for i in range(2)]
    _wait(lambda: len(ray.get(feed.received.remote(), timeout=10)) >= 4)
    assert ray.get(feed.received.remote(), timeout=10) == expected  # nothing lost, nothing twice
    bus.remember("live again", WRITER, scope="org")
    _wait(lambda: ray.get(feed.received.remote(), timeout=10)[-1:] == ["live again"])
    stats = bus.bus_stats(OWNER)
    assert "feed" not in stats["parked"] and stats["subscriptions"]["feed"]["replays"] >= 1
    assert {e.org for e in bus.subscription_cursors("feed", OWNER)} == {"acme"}  # Scope keys


def test_a_target_that_never_comes_back_stays_parked_and_is_removable(reopened: dict[str, Any]) -> None:
    bus = reopened["bus"]
    assert "ghost" in bus.bus_stats(OWNER)["parked"]
    assert bus.unsubscribe("ghost", OWNER) is True
    assert bus.unsubscribe("loose", OWNER) is True
    stats = bus.bus_stats(OWNER)
    assert "ghost" not in stats["subscriptions"] and "loose" not in stats["subscriptions"]
    assert "ghost" not in stats["parked"] and "loose" not in stats["parked"]


def test_a_second_bus_on_the_same_directory_is_refused_fast(reopened: dict[str, Any]) -> None:
    bus, cfg = reopened["bus"], reopened["cfg"]
    other = cfg.with_(namespace=f"intruder_{uuid.uuid4().hex[:6]}")
    started = time.monotonic()
    with pytest.raises(mb.DataDirInUse) as err:
        mb.connect(other)
    assert time.monotonic() - started < 10
    assert str(cfg.data_dir) in str(err.value) and cfg.namespace in str(err.value) and "pid=" in str(err.value)
    assert not [n for n in ray.util.list_named_actors(all_namespaces=True) if n["namespace"] == other.namespace]
    # the actors refuse too, whoever starts them (the driver's check above is only a fast path)
    shard, hub = actors.create_shard(other, 0), actors.create_hub(other, 0)
    try:
        for call in (shard.identity.remote(bus._credential or ""), hub.ready.remote()):
            with pytest.raises(ray.exceptions.RayTaskError) as refused:
                ray.get(call, timeout=60)
            assert isinstance(refused.value.cause, mb.DataDirInUse), refused.value
            assert f"namespace={cfg.namespace}" in str(refused.value.cause)
    finally:
        ray.kill(shard)
        ray.kill(hub)
    node = bus.remember("the first bus still works", WRITER, scope="org")  # untouched
    assert bus.get(node.id, WRITER).content == "the first bus still works"


def test_a_shard_killed_hard_takes_its_lock_back_when_ray_restarts_it(reopened: dict[str, Any]) -> None:
    bus, cfg = reopened["bus"], reopened["cfg"]
    shard = actors.lookup(actors.shard_actor_name(cfg, 0), cfg.namespace)
    old = ray.get(shard.pid.remote(), timeout=30)
    os.kill(old, signal.SIGKILL)  # no cleanup runs: the kernel drops its lock
    _wait(lambda: _pid(shard) not in (None, old), 60)
    for i in range(4):  # writes to both shards' scopes succeed: the restarted one holds the lock again
        ctx = Context(f"org{i}", "u")
        node = bus.remember(f"after the crash {i}", ctx)
        assert bus.get(node.id, ctx).content == f"after the crash {i}"


def _pid(shard: Any) -> int | None:
    try:
        return int(ray.get(shard.pid.remote(), timeout=5))
    except ray.exceptions.RayError:
        return None
