"""Hooks that fail: a contradiction judge that raises or returns garbage is reported as
HookFailed naming the hook, and the write that ran it stores nothing (plain shard,
real SQLite, fixed 4-dimensional vectors: no model)."""

from __future__ import annotations

import numpy as np
import pytest

from memorybus import Config, Context, HookFailed, MemoryNode
from memorybus.config import BusPolicy
from memorybus.hooks import call_hook, text_result
from memorybus.shard.build import open_shard

CTX = Context("acme", "u1")
V = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
W = (np.array([0.95, 0.05, 0.0, 0.0]) / np.linalg.norm([0.95, 0.05, 0.0, 0.0])).astype(np.float32)


def raises_type_error(new, old):
    return new.content + 3  # a bug in the user's judge


def returns_garbage(new, old):
    return "maybe"


def returns_array(new, old):
    return np.array([True, False])  # truthiness undefined


@pytest.mark.parametrize("judge", [raises_type_error, returns_garbage, returns_array])
def test_a_failing_judge_is_hook_failed_and_nothing_is_written(tmp_path, judge):
    cfg = Config.embedded(tmp_path, num_shards=1, embedding_dim=4, bus=BusPolicy(judge=judge))
    shard = open_shard(cfg, "shard-0")
    try:
        (first,) = shard.put_many(CTX, [MemoryNode(content="The office opens at nine", scope=CTX.scope,
                                                   kind="semantic")], [V])  # fmt: skip
        before = (shard.store.count(), shard.store.last_seq(CTX.scope.key), sorted(shard.core.nodes))
        similar = MemoryNode(content="The office opens early", scope=CTX.scope, kind="semantic")
        with pytest.raises(HookFailed) as caught:
            shard.put_many(CTX, [similar], [W])  # similar enough to ask the judge
        assert caught.value.hook == "bus.judge" and "nothing was written" in str(caught.value)
        assert ("TypeError" in caught.value.detail) if judge is raises_type_error else ("returned" in caught.value.detail)
        assert (shard.store.count(), shard.store.last_seq(CTX.scope.key), sorted(shard.core.nodes)) == before
        assert shard.get(CTX, first.id).contradicts == ()  # the old side was not linked either
    finally:
        shard.close()


def test_a_judge_may_return_a_numpy_bool(tmp_path):
    cfg = Config.embedded(tmp_path, num_shards=1, embedding_dim=4, bus=BusPolicy(judge=lambda a, b: np.bool_(True)))
    shard = open_shard(cfg, "shard-0")
    try:
        (a,) = shard.put_many(CTX, [MemoryNode(content="The office opens at nine", scope=CTX.scope, kind="semantic")],
                              [V])  # fmt: skip
        (b,) = shard.put_many(CTX, [MemoryNode(content="The office opens early", scope=CTX.scope, kind="semantic")],
                              [W])  # fmt: skip
        assert a.id in b.contradicts  # numpy's True counts as True
    finally:
        shard.close()


def test_call_hook_wraps_exceptions_and_refused_results():
    with pytest.raises(HookFailed, match=r"consolidation\.summarizer failed: raised ZeroDivisionError"):
        call_hook("consolidation.summarizer", lambda ms: 1 / 0, [], check=text_result)
    with pytest.raises(HookFailed, match="expected non-empty text"):
        call_hook("consolidation.summarizer", lambda ms: "   ", [], check=text_result)
    with pytest.raises(HookFailed, match="expected non-empty text"):
        call_hook("consolidation.summarizer", lambda ms: None, [], check=text_result)
    assert call_hook("consolidation.summarizer", lambda ms: "a summary", [], check=text_result) == "a summary"
