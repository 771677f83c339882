"""Merging per-shard recall results onto one scale."""

from memorybus import MemoryNode, RankingWeights, Scope
from memorybus.retrieval import RecallHit, merge_hits


def hit(content, score, dense, keyword=0.0):
    return RecallHit(MemoryNode(content=content, scope=Scope("o")), score, score, "match", None,
                     {"dense": dense, "keyword": keyword})


def test_a_shard_of_weak_matches_does_not_outrank_an_exact_match():
    w = RankingWeights()
    strong = [hit("exact answer", 1.40, 0.98, 6.0), hit("close", 1.10, 0.80, 2.0)]
    # this shard's best is only a weak match, but its own normalisation scored it alike
    weak = [hit("unrelated best of its shard", 1.42, 0.45, 1.0), hit("worse", 1.0, 0.30)]
    merged = merge_hits([strong, weak], 3, w)
    assert [h.node.content for h in merged][:2] == ["exact answer", "close"]
    # without the weights (raw scores) the weak shard would win: the fix is what orders them
    assert merge_hits([strong, weak], 1)[0].node.content == "unrelated best of its shard"


def test_single_shard_order_is_unchanged():
    w = RankingWeights()
    only = [hit("a", 1.4, 0.9), hit("b", 1.2, 0.7), hit("c", 0.9, 0.5)]
    assert [h.node.content for h in merge_hits([only, []], 3, w)] == ["a", "b", "c"]
