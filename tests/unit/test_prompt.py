"""Prompt context assembly: core first, grouped and dated, never over the token budget."""

from datetime import UTC, datetime

import pytest

from memorybus import InvalidRequest, MemoryNode, Scope
from memorybus.prompt import CORE_HEADER, RECALLED_HEADER, build_context
from memorybus.retrieval import RecallHit

pytestmark = pytest.mark.model

SCOPE = Scope("acme", "u1")


def ts(y, m, d):
    return datetime(y, m, d, tzinfo=UTC).timestamp()


def memories():
    core = [
        MemoryNode(content="The user is allergic to peanuts", scope=SCOPE, tags=("pinned",), importance=9),
        MemoryNode(content="The user's name is Ana", scope=SCOPE, tags=("core",), importance=10),
    ]
    hits = []
    for i in range(12):
        session, when = ("s1", ts(2023, 5, 8)) if i % 2 else ("s2", ts(2023, 7, 2))
        node = MemoryNode(
            content=f"[2023-05-08] Ana: turn number {i} about dogs, hikes and a long walk by the river",
            scope=SCOPE, thread=session, position=i, valid_from=when, created_at=when,
        )  # fmt: skip
        hits.append(RecallHit(node, 1.0 - i / 100, 1.0))
    return core, hits


def counter(embedder):
    return lambda texts: [embedder.tokenizer_count(t) for t in texts]


def test_block_is_core_first_then_grouped_and_dated(embedder):
    core, hits = memories()
    block = build_context(core, hits, 10_000, counter(embedder))
    lines = block.text.splitlines()
    assert lines[0] == CORE_HEADER
    assert lines[1] == "- The user's name is Ana" and lines[2] == "- The user is allergic to peanuts"
    assert lines[3] == RECALLED_HEADER
    assert lines[4] == "### 8 May 2023 (s1)"  # groups in time order, the date at the head
    assert "### 2 July 2023 (s2)" in lines
    s1 = list(lines[5:12])
    assert s1 == [
        f"- Ana: turn number {i} about dogs, hikes and a long walk by the river" for i in (1, 3, 5, 7, 9, 11)
    ] + ["### 2 July 2023 (s2)"]
    assert not block.dropped and block.tokens == embedder.tokenizer_count(block.text)


@pytest.mark.parametrize("budget", [5, 12, 40, 77, 150, 260])
def test_never_exceeds_the_budget_and_reports_what_it_dropped(embedder, budget):
    core, hits = memories()
    block = build_context(core, hits, budget, counter(embedder))
    assert embedder.tokenizer_count(block.text) <= budget
    assert block.tokens == embedder.tokenizer_count(block.text)
    kept = {n.id for n in block.core} | {h.node.id for h in block.memories}
    dropped = {d.id for d in block.dropped}
    assert kept.isdisjoint(dropped)
    assert kept | dropped == {n.id for n in core} | {h.node.id for h in hits}
    # priority: a recalled memory is only kept when every core memory was; better hits first
    if block.memories:
        assert len(block.core) == len(core)
        best = [h.node.id for h in hits[: len(block.memories)]]
        assert {h.node.id for h in block.memories} == set(best)
    assert all(d.reason == "budget" and d.tokens > 0 for d in block.dropped)


def test_budget_must_be_positive(embedder):
    with pytest.raises(InvalidRequest):
        build_context([], [], 0, counter(embedder))
