"""benchmarks/recall_at_size.py fills a data directory as the shard actors would: every
memory in its user's scope on the shard the router names, readable by a shard opened as
its actor opens it; a directory is reused only for the corpus it was filled with."""

import json

import pytest

from benchmarks import recall_at_size as ras
from memorybus.auth.keyring import derived_key
from memorybus.scopes import Context, Router, Scope, shard_name
from memorybus.shard.build import open_shard


def test_each_shard_holds_exactly_its_users_memories(tmp_path):
    n, users, shards = 230, 10, 4
    owners = [ras.users_of(s, users, shards) for s in range(shards)]
    assert sorted(u for us in owners for u in us) == list(range(users))  # every user on one shard
    router = Router(shards)
    for s, us in enumerate(owners):
        assert all(router.shard_for(Scope(ras.ORG, f"u{u}").key) == s for u in us)
    # each shard filled in this process (fill_shard makes the key ring on first use)
    (tmp_path / ras.DONE).write_text(json.dumps({"n": 1, "users": 1, "shards": 1}))
    with pytest.raises(SystemExit, match="another corpus"):  # a directory of another corpus is not reused
        ras.prefill(str(tmp_path), n, users, shards, jobs=1)
    (tmp_path / ras.DONE).unlink()
    filled = [ras.fill_shard(str(tmp_path), s, n, users, shards) for s in range(shards)]
    per_user = {u: len(range(u, n, users)) for u in range(users)}  # memory i belongs to user i % users
    assert [f["memories"] for f in filled] == [sum(per_user[u] for u in us) for us in owners]
    assert sum(f["memories"] for f in filled) == n

    cfg = ras._config(str(tmp_path), shards)
    key = derived_key(cfg, "audit checkpoint")
    texts = ras.make_texts(n)
    for s, us in enumerate(owners):
        shard = open_shard(cfg, shard_name(s), audit_key=key)  # as the shard's actor opens it
        try:
            assert shard.count() == filled[s]["memories"]
            for u in us:
                got = shard.list_memories(Context(ras.ORG, f"u{u}", "reader"), limit=1000)
                assert sorted(m.content for m in got) == sorted(texts[i] for i in range(u, n, users))
        finally:
            shard.close()
