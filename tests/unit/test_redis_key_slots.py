"""Every Redis key of a shard hashes to one Redis Cluster slot (its hash tag), whatever
the scope, fact or operation names hold; the hub's state and the key ring are single
keys with tags of their own; the commit script is given exactly the keys it touches."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from redis.crc import key_slot

from memorybus.storage.redis_cluster import commit_keys
from memorybus.storage.redis_keys import RedisKeys

ODD = ["plain", "{tag}", "}{", "a}b{c}", "\x1f{x}\x1f", "ü{ß}", ""]


def slot(key: str) -> int:
    return key_slot(key.encode())


@pytest.mark.parametrize("name", ODD)
def test_every_key_a_shard_builds_is_in_the_shards_slot(name: str) -> None:
    keys = RedisKeys("acme-bus", "shard-3")
    home = slot(keys.all())
    built = []
    for method_name, method in inspect.getmembers(keys, inspect.ismethod):
        if method_name.startswith("_"):
            continue
        arity = len(inspect.signature(method).parameters)
        built.append(method(*[name] * arity))
    assert len(built) >= 12  # every builder was reached
    assert {slot(k) for k in built} == {home}
    assert slot(f"{keys.prefix}:erase") == home  # the erase job's record (redis_scrub)


def test_shards_of_one_bus_spread_over_slots() -> None:
    slots = {slot(RedisKeys("acme-bus", f"shard-{i}").all()) for i in range(64)}
    assert len(slots) > 60  # a hash tag per shard, not one per bus


def test_the_commit_script_is_given_every_key_it_writes_in_one_slot() -> None:
    keys = RedisKeys("acme-bus", "shard-0")
    ops = [["slot", "s{1}", "lang", 0, "id-1", 1],
           ["put", "id-1", b"blob", 1, "0", "1.0", "s{1}", "lang"],
           ["put", "id-2", b"blob", 1, "0", "1.0", "s}2", ""],
           ["cas", "id-3", b"blob", 4], ["del", "id-4", b"", -1],
           ["evt", "s{1}", b"e", "lang"], ["evt", "s}2", b"e", ""],
           ["aud", "org{a}", "", "1 h", b"entry"]]
    got = commit_keys(keys.prefix, ops, "op{9}")
    want = {keys.all(), keys.op("op{9}"), keys.slot("s{1}", "lang"), keys.node("id-1"), keys.scope("s{1}"),
            keys.fact("s{1}", "lang"), keys.node("id-2"), keys.scope("s}2"), keys.node("id-3"), keys.node("id-4"),
            keys.seq("s{1}"), keys.stream("s{1}"), keys.fact_events("s{1}", "lang"), keys.seq("s}2"),
            keys.stream("s}2"), keys.audit_head("org{a}"), keys.audit("org{a}")}
    assert got[0] == keys.all() and set(got) == want and len(got) == len(want)
    assert {slot(k) for k in got} == {slot(keys.all())}


def test_hub_state_and_key_ring_keys_carry_a_tag_of_their_own() -> None:
    root = Path(__file__).resolve().parents[2] / "memorybus"
    for path, key in (("actors/hub.py", 'f"mb:{{{config.namespace}:bus-{partition}}}:kv"'),
                      ("auth/keyring.py", 'f"mb:{{{config.namespace}:auth}}:keys"')):
        assert key in (root / path).read_text()  # one hash each (RedisKV), so one slot
    assert slot("mb:{acme:auth}:keys") != slot("mb:{acme:bus-0}:kv")
