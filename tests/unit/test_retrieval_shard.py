"""Hybrid recall in the plain Shard (real SQLite, Qdrant Edge and model; no Ray):
time filters, expansion, contextual embeddings, the keyword index following writes."""

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest

from memorybus import (
    Context,
    InvalidMemory,
    InvalidRequest,
    ManualClock,
    MemoryNode,
    MemoryStatus,
    RankingWeights,
    new_id,
)
from memorybus.retrieval import RecallOptions
from memorybus.retrieval.structure import index_text
from memorybus.retrieval.text import tokens
from memorybus.shard import Shard
from memorybus.shard.texts import embedding_texts
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

pytestmark = pytest.mark.model

CTX = Context("acme", "u1", "assistant")
DAY = 86_400.0


def ts(y, m, d):
    return datetime(y, m, d, tzinfo=UTC).timestamp()


#: two sessions of a small chat (tests/integration/test_recall_hybrid.py stores them too)
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


def make_shard(tmp_path, ranking=None, name="s"):
    return Shard(
        "shard-0",
        SqliteStore(tmp_path / f"{name}.sqlite"),
        EdgeVectorIndex(tmp_path / f"{name}-v", 384),
        dim=384,
        clock=ManualClock(ts(2024, 1, 1)),
        ranking=ranking,
    )


def conversation():
    """Two sessions of a small chat, declared as threads; content carries a leading date stamp."""
    nodes = []
    for (session, when), turns in SESSIONS.items():
        for i, (who, text) in enumerate(turns):
            day = datetime.fromtimestamp(when, UTC)
            nodes.append(
                MemoryNode(
                    content=f"[{day:%Y-%m-%d}] {who}: {text}",
                    scope=CTX.scope.widen("user"),
                    thread=session,
                    position=i,
                    speaker=who,
                    valid_from=when,
                    created_at=when,
                )
            )
    return nodes


@pytest.fixture
def filled(tmp_path, embedder):
    shard = make_shard(tmp_path)
    nodes = conversation()
    stored = shard.put_many(CTX, nodes, embedder.encode(embedding_texts(nodes)))
    yield shard, {n.content.split(": ", 1)[1]: n for n in stored}
    shard.close()


def search(shard, embedder, query, k=3, **opts):
    return shard.search(CTX, embedder.encode([query])[0], k, query=query, options=RecallOptions(touch=False, **opts))


def test_hybrid_recall_finds_the_reply_to_a_question(filled, embedder):
    shard, by_text = filled
    hits = search(shard, embedder, "What breed is Ana's dog?", k=3)
    assert by_text["A beagle mix, she is three years old."].id in [h.node.id for h in hits]
    assert all(h.via == "match" for h in hits)


def test_a_named_time_is_matched_against_event_times_not_words(tmp_path, embedder):
    """"A week ago" in a query is the time signal's: a memory that merely says "weeks ago"
    gets no keyword credit for it (``time_words=False``, the default); with
    ``time_words=True`` it does."""
    now = ts(2024, 1, 1)
    texts = [("I finished reading a novel about Greek myths.", now - 7 * DAY),
             ("We booked the cabin a few weeks ago, and the week before that the car.", now - 200 * DAY)]  # fmt: skip
    query = "which novel did I finish a week ago?"
    for time_words, credited in ((False, False), (True, True)):
        shard = make_shard(tmp_path, RankingWeights(time_words=time_words), name=f"tw{time_words}")
        nodes = [MemoryNode(content=t, scope=CTX.scope.widen("user"), valid_from=w, created_at=w) for t, w in texts]
        shard.put_many(CTX, nodes, embedder.encode([n.content for n in nodes]))
        hits = search(shard, embedder, query, k=5, min_relevance=0.0, reference_time=now)
        by_text = {h.node.content: h for h in hits}
        assert hits[0].node.content == texts[0][0] and by_text[texts[0][0]].signals.get("time") == 1.0
        assert (by_text[texts[1][0]].signals["bm25"] > 0) is credited
        shard.close()


def test_time_range_filter(filled, embedder):
    shard, _by_text = filled
    hits = search(shard, embedder, "dog", k=10, start=ts(2023, 6, 1), end=ts(2023, 8, 1))
    assert hits and all(h.node.valid_from == ts(2023, 7, 2) for h in hits)
    hits = search(shard, embedder, "dog", k=10, end=ts(2023, 6, 1))
    assert hits and all(h.node.valid_from == ts(2023, 5, 8) for h in hits)
    with pytest.raises(InvalidRequest):
        search(shard, embedder, "dog", start=ts(2023, 8, 1), end=ts(2023, 6, 1))


def test_as_of_sees_the_fact_valid_then(tmp_path, embedder):
    shard = make_shard(tmp_path, name="asof")
    old = MemoryNode(content="Ana lives in Lisbon", scope=CTX.scope, kind="semantic", valid_from=ts(2022, 1, 1))
    (old,) = shard.put_many(CTX, [old], embedder.encode([old.content]))
    shard.update(CTX, old.id, 1, {"valid_to": ts(2023, 1, 1), "status": MemoryStatus.DEPRECATED})
    new = MemoryNode(content="Ana lives in Porto", scope=CTX.scope, kind="semantic", valid_from=ts(2023, 1, 1))
    shard.put_many(CTX, [new], embedder.encode([new.content]))
    q = embedder.encode(["where does Ana live"])[0]
    now_hits = shard.search(CTX, q, 5, query="where does Ana live")
    assert [h.node.content for h in now_hits] == ["Ana lives in Porto"]
    then = shard.search(CTX, q, 5, query="where does Ana live", options=RecallOptions(as_of=ts(2022, 6, 1)))
    assert [h.node.content for h in then] == ["Ana lives in Lisbon"]
    shard.close()


def test_neighbour_and_relation_expansion_with_budgets(filled, embedder):
    shard, by_text = filled
    bowl = by_text["A lopsided bowl, my kids loved it."]
    query = "Ben's lopsided bowl"
    hits = search(shard, embedder, query, k=1, neighbors=1)
    assert hits[0].node.id == bowl.id
    assert [(h.via, h.node.content.split(": ", 1)[1]) for h in hits[1:]] == [
        ("neighbor", "Fun! Did you make anything yet?"),
        ("neighbor", "I took the beagle hiking in the hills."),
    ]
    assert all(h.expanded_from == bowl.id for h in hits[1:])
    hits = search(shard, embedder, query, k=1, neighbors=2, neighbor_budget=2)
    assert sum(h.via == "neighbor" for h in hits) == 2
    assert search(shard, embedder, query, k=1)[1:] == []
    # relations
    bike = by_text["Cute. I spent the weekend fixing my bike."]
    shard.update(CTX, bowl.id, 1, {"related": (bike.id,)})
    hits = search(shard, embedder, query, k=1, relations=1)
    assert hits[0].node.id == bowl.id
    assert [(h.via, h.node.id) for h in hits[1:]] == [("relation", bike.id)]
    assert [h.via for h in search(shard, embedder, query, k=1, relations=1, relation_budget=0)] == ["match"]


def test_contextual_embeddings_mix_the_predecessor_and_drop_the_date(tmp_path, embedder):
    nodes = conversation()[:2]
    texts = embedding_texts(nodes)
    assert texts == [index_text(n) for n in nodes] and texts[0] == "Ana: I finally adopted a dog from the shelter!"
    plain = embedder.encode(texts)
    shard = make_shard(tmp_path, RankingWeights(context_mix=0.35), name="mix")
    a, b = shard.put_many(CTX, nodes, plain)
    first = shard.store.get(a.id).embedding
    second = shard.store.get(b.id).embedding
    np.testing.assert_allclose(first, plain[0], atol=1e-6)
    want = plain[1] + 0.35 * plain[0]
    np.testing.assert_allclose(second, want / np.linalg.norm(want), atol=1e-5)
    # a later batch finds its predecessor in the store
    third_turn = conversation()[2]
    later = replace(third_turn, id=new_id(third_turn.scope))  # a fresh id of the memory's scope
    (c,) = shard.put_many(CTX, [later], embedder.encode(embedding_texts([later])))
    third = shard.store.get(c.id).embedding
    assert float(third @ second) > float(embedder.encode(embedding_texts([later]))[0] @ second)
    shard.close()
    off = make_shard(tmp_path, RankingWeights(context_mix=0.0), name="off")
    _, b2 = off.put_many(CTX, conversation()[:2], plain)
    np.testing.assert_allclose(off.store.get(b2.id).embedding, plain[1], atol=1e-6)
    off.close()
    # the quality option that spends model work: the predecessor's text is encoded too
    ctx_texts = embedding_texts(conversation()[:2], contextual_text=True)
    assert ctx_texts[1] == f"{texts[0]}\n{texts[1]}"


def test_the_shard_embeds_a_turn_after_the_one_before_it_wherever_that_is(tmp_path, embedder):
    """contextual_text: the shard decides what is embedded, and a turn's context is the
    turn before it in its thread, also when an earlier call stored it (the client, which
    only saw the turns of one call, could not know it) or is still writing it."""
    a, b, c = conversation()[:3]
    alone = [index_text(n) for n in (a, b, c)]
    shard = make_shard(tmp_path, RankingWeights(contextual_text=True, context_mix=0.0), name="ctx")
    assert shard.embedding_texts(CTX, [a, b]) == [alone[0], f"{alone[0]}\n{alone[1]}"]  # within one call
    shard.put_many(CTX, [a], embedder.encode(shard.embedding_texts(CTX, [a])))
    (text,) = shard.embedding_texts(CTX, [b])
    assert text == f"{alone[0]}\n{alone[1]}"  # from the store
    (b,) = shard.put_many(CTX, [b], embedder.encode([text]))
    np.testing.assert_allclose(shard.store.get(b.id).embedding, embedder.encode([text])[0], atol=1e-6)
    shard.delete(CTX, b.id)
    shard.texts.hold([b])  # its text is decided, its write not over: a later call's turn follows it
    assert shard.embedding_texts(CTX, [c]) == [f"{alone[1]}\n{alone[2]}"]
    shard.texts.settle([b])  # the write failed: back to the stored turn
    assert shard.embedding_texts(CTX, [c]) == [f"{alone[0]}\n{alone[2]}"]
    fact = MemoryNode(content=c.content, scope=c.scope, kind="semantic", thread=c.thread, position=c.position)
    assert shard.embedding_texts(CTX, [fact]) == [alone[2]]  # only episodic turns take context
    for bad in ("not a memory", replace(c, content="x" * 1_000_000), replace(c, valid_from="soon")):
        with pytest.raises(InvalidMemory):  # before any model work
            shard.embedding_texts(CTX, [bad])
    with pytest.raises(InvalidRequest):
        shard.embedding_texts("not a context", [c])
    shard.close()
    plain = make_shard(tmp_path, RankingWeights(context_mix=0.0), name="plain")
    plain.put_many(CTX, [a], embedder.encode([alone[0]]))
    assert plain.embedding_texts(CTX, [b, c]) == alone[1:]  # the option is off: each its own text
    plain.close()


def test_keyword_index_follows_writes_and_rebuilds(tmp_path, embedder):
    shard = make_shard(tmp_path, name="kw")
    n = MemoryNode(content="invoice ZX-4471 from Quarkcorp", scope=CTX.scope)
    (n,) = shard.put_many(CTX, [n], embedder.encode([n.content]))
    assert shard._recall.structure.keywords.search(tokens("quarkcorp"), [CTX.scope.key], 5)[0][0] == n.id
    shard.update(CTX, n.id, 1, {"content": "invoice ZX-9 from Helio"}, embedder.encode(["invoice ZX-9 from Helio"])[0])
    kw = shard._recall.structure.keywords
    assert kw.search(tokens("quarkcorp"), [CTX.scope.key], 5) == []
    assert kw.search(tokens("helio"), [CTX.scope.key], 5)[0][0] == n.id
    shard.close()
    reopened = make_shard(tmp_path, name="kw")
    assert reopened._recall.structure.keywords.search(tokens("helio"), [CTX.scope.key], 5)[0][0] == n.id
    reopened.delete(CTX, n.id)
    assert reopened._recall.structure.keywords.search(tokens("helio"), [CTX.scope.key], 5) == []
    reopened.close()
