"""Conflict strategies and the default contradiction judge (pure functions)."""

import pytest

from memorybus import InvalidRequest, MemoryNode, Scope
from memorybus.bus.conflicts import AUTHORITY_TAG, Strategy, default_contradiction, is_contradiction, resolve

DAY = 86400.0
S = Scope("acme", "u1")


def fact(content, conf, day, tags=()):
    return MemoryNode(content=content, scope=S, key="k", confidence=conf, valid_from=day * DAY, tags=tags)


def test_first_value_always_wins():
    assert resolve(None, fact("a", 0.1, 1), Strategy.RECENCY).new_wins


def test_confidence_weighted_discounts_older_facts_by_time():
    old = fact("Python", 0.9, 0)
    assert resolve(old, fact("Rust", 0.9, 14), Strategy.CONFIDENCE_WEIGHTED).new_wins  # equal: newer wins
    assert not resolve(old, fact("Rust", 0.5, 1), Strategy.CONFIDENCE_WEIGHTED).new_wins  # much less sure
    assert resolve(old, fact("Rust", 0.5, 60), Strategy.CONFIDENCE_WEIGHTED).new_wins  # old fact has faded
    assert resolve(old, fact("Rust", 0.5, 60), Strategy.CONFIDENCE_WEIGHTED, half_life_days=1000).new_wins is False
    # a back-dated claim must beat the newer fact outright
    newer = fact("Go", 0.6, 30)
    assert not resolve(newer, fact("Java", 0.6, 10), Strategy.CONFIDENCE_WEIGHTED).new_wins
    assert resolve(newer, fact("Java", 1.0, 29), Strategy.CONFIDENCE_WEIGHTED).new_wins


def test_recency():
    old = fact("a", 1.0, 10)
    assert resolve(old, fact("b", 0.1, 11), Strategy.RECENCY).new_wins
    assert not resolve(old, fact("b", 1.0, 9), Strategy.RECENCY).new_wins


def test_authority_beats_confidence():
    cur = fact("a", 1.0, 10, tags=(AUTHORITY_TAG,))
    assert not resolve(cur, fact("b", 1.0, 20), Strategy.AUTHORITY).new_wins
    plain = fact("a", 1.0, 10)
    assert resolve(plain, fact("b", 0.2, 10, tags=(AUTHORITY_TAG,)), Strategy.AUTHORITY).new_wins
    # between equals, confidence decides
    assert not resolve(plain, fact("b", 0.2, 11), Strategy.AUTHORITY).new_wins


def test_strategy_parse():
    assert Strategy.parse("recency") is Strategy.RECENCY
    with pytest.raises(InvalidRequest):
        Strategy.parse("loudest")


def test_default_contradiction_rule_and_judge_override():
    a = MemoryNode(content="The standup is at 9:30", scope=S)
    b = MemoryNode(content="The standup is at 10:00", scope=S)
    c = MemoryNode(content="The standup is not at 9:30", scope=S)
    d = MemoryNode(content="The standup is at 9:30 in room B", scope=S)
    assert default_contradiction(a, b)
    assert default_contradiction(a, c)
    assert not default_contradiction(a, d)
    assert is_contradiction(a, d, judge=lambda x, y: True)
    assert not is_contradiction(a, b, judge=lambda x, y: False)
    assert is_contradiction(a, b, judge=lambda x, y: None)  # None defers to the default
