"""Where connect finds Ray: never another job's instance by accident (issue 14)."""

import pytest

from memorybus import ConfigError
from memorybus.actors.runtime import choose_address


def test_none_starts_a_private_local_ray_even_when_others_run():
    assert choose_address(None, None, ["10.0.0.1:6379", "127.0.0.1:6400"]) == "local"
    assert choose_address(None, None, []) == "local"


def test_ray_address_from_the_environment_wins_for_none_and_auto():
    # a Ray Job's driver: Ray sets RAY_ADDRESS for it
    assert choose_address(None, "10.0.0.1:6379", []) == "10.0.0.1:6379"
    assert choose_address("auto", "10.0.0.1:6379", ["127.0.0.1:6400", "127.0.0.1:6500"]) == "10.0.0.1:6379"


def test_auto_attaches_only_to_the_single_ray_on_the_machine():
    assert choose_address("auto", None, ["127.0.0.1:6379"]) == "127.0.0.1:6379"
    with pytest.raises(ConfigError, match="ambiguous: 2 Ray instances"):
        choose_address("auto", None, ["127.0.0.1:6379", "127.0.0.1:6400"])
    with pytest.raises(ConfigError, match="found no running Ray"):
        choose_address("auto", None, [])


def test_an_explicit_address_is_used_as_given():
    assert choose_address("10.0.0.5:6379", "10.0.0.1:6379", []) == "10.0.0.5:6379"


def test_the_embedder_pool_spreads_a_call_over_every_replica():
    from memorybus.actors.embedder import spread

    texts = [f"t{i}" for i in range(7)]
    shares = spread(texts, 3)
    assert shares == [["t0", "t1", "t2"], ["t3", "t4", "t5"], ["t6"]]  # in order: rows match texts
    assert spread(texts[:2], 4) == [["t0"], ["t1"]] and spread([], 2) == []
    assert spread(texts, 1) == [texts]


def test_asking_whether_this_is_a_worker_before_ray_starts_starts_nothing():
    """connect loads the query model while Ray starts (client.life.open_bus): the check it
    makes first must not start a Ray of its own (Ray's runtime context would)."""
    import subprocess
    import sys

    script = ("import ray\nfrom memorybus.actors import runtime\n"
              "print(runtime.in_ray_worker(), ray.is_initialized())")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.split() == ["False", "False"], done.stderr
