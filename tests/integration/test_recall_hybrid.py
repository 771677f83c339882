"""Hybrid recall and prompt context through the bus (real Ray actors, model and files)."""

import asyncio
import uuid
from datetime import UTC, datetime

import pytest

import memorybus as mb
from memorybus import Config, Context
from memorybus.retrieval import RecallOptions

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]


def ts(y, m, d):
    return datetime(y, m, d, tzinfo=UTC).timestamp()


@pytest.fixture(scope="module")
def bus(ray_local, tmp_path_factory):
    cfg = Config.embedded(tmp_path_factory.mktemp("recall"), num_shards=2, namespace="recall_t")
    b = mb.connect(cfg)
    yield b
    b.shutdown()


SESSIONS = {
    ("s1", ts(2023, 5, 8)): [
        ("Ana", "I finally adopted a dog from the shelter!"),
        ("Ben", "No way, what breed is it?"),
        ("Ana", "A beagle mix, she is three years old."),
        ("Ben", "Cute. I spent the weekend fixing my bike."),
    ],
    ("s2", ts(2023, 7, 2)): [
        ("Ben", "I started a pottery class on Tuesdays."),
        ("Ana", "Fun! Did you make anything yet?"),
        ("Ben", "A lopsided bowl, my kids loved it."),
        ("Ana", "I took the beagle hiking in the hills."),
    ],
}


@pytest.fixture(scope="module")
def chat(bus):
    ctx = Context(f"org{uuid.uuid4().hex[:8]}", "u1", "assistant")
    items = []
    for (session, when), turns in SESSIONS.items():
        day = datetime.fromtimestamp(when, UTC)
        for i, (who, text) in enumerate(turns):
            items.append(
                {
                    "content": f'({day.day} {day:%B %Y}) {who} said, "{text}"',
                    "scope": "user",
                    "valid_from": when,
                    "created_at": when,
                    "source": who,
                    "structured": {"session": session, "turn": i},
                }
            )
    stored = bus.remember_many(items, ctx)
    bus.remember("Ana is vegetarian", ctx, scope="user", kind="semantic", tags=["pinned"], importance=9)
    return ctx, {n.content.split('"')[1]: n for n in stored}


def test_recall_is_hybrid_and_structure_aware(bus, chat):
    ctx, by_text = chat
    hits = bus.recall("What breed is Ana's dog?", ctx, k=3, options=RecallOptions(touch=False))
    assert by_text["A beagle mix, she is three years old."].id in [h.node.id for h in hits]
    assert all({"dense", "keyword"} <= set(h.signals) for h in hits)
    assert any("source" in h.signals for h in hits)  # Ana is named in the query


def test_time_filters_through_the_bus(bus, chat):
    ctx, _ = chat
    hits = bus.recall("dog", ctx, k=10, start=ts(2023, 6, 1), end=ts(2023, 8, 1))
    assert hits and all(h.node.valid_from == ts(2023, 7, 2) for h in hits)
    hits = asyncio.run(bus.recall_async("dog", ctx, k=10, end=ts(2023, 6, 1)))
    assert hits and all(h.node.valid_from == ts(2023, 5, 8) for h in hits)


def test_neighbour_expansion_through_the_bus(bus, chat):
    ctx, by_text = chat
    bowl = by_text["A lopsided bowl, my kids loved it."]
    hits = bus.recall("Ben's lopsided bowl", ctx, k=1, options=RecallOptions(neighbors=1, touch=False))
    assert hits[0].node.id == bowl.id
    assert [h.via for h in hits] == ["match", "neighbor", "neighbor"]


def test_context_for_core_then_recalled_within_budget(bus, chat, embedder):
    ctx, _ = chat
    block = bus.context_for("What did Ben make?", ctx, token_budget=400)
    lines = block.text.splitlines()
    assert lines[:2] == ["## Core memory", "- Ana is vegetarian"]
    assert "## Recalled memories" in lines and any(line.startswith("### 2 July 2023") for line in lines)
    assert embedder.tokenizer_count(block.text) == block.tokens <= 400
    small = bus.context_for("What did Ben make?", ctx, token_budget=30)
    assert embedder.tokenizer_count(small.text) <= 30
    assert small.dropped and all(d.reason == "budget" for d in small.dropped)
