"""MemoryBusStore (LangGraph BaseStore) on a real bus: cases ported from LangGraph's own
store tests (in-memory, SQLite, Postgres), rewritten for the bus, plus visibility, TTL,
a StateGraph and LangMem's memory tools."""

import asyncio
import time
import uuid

import pytest

pytest.importorskip("langgraph")

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

import memorybus as mb
from memorybus.integrations.langgraph import MemoryBusStore

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def bus(ray_local, tmp_path_factory):
    cfg = mb.Config.embedded(tmp_path_factory.mktemp("lgbus"), num_shards=2, namespace="lgstore_t")
    b = mb.connect(cfg)
    yield b
    b.shutdown()


@pytest.fixture
def store(bus):
    """A store of a fresh org and user (tests do not see each other's items)."""
    return MemoryBusStore(bus, mb.Context(f"org{uuid.uuid4().hex[:8]}", "alice", "assistant"))


def keys(items):
    return sorted(i.key for i in items)


def test_batch_results_align_and_reads_see_the_state_before_the_batch(store):
    store.put(("test", "foo"), "key1", {"data": "value1"})
    store.put(("test", "bar"), "key2", {"data": "value2"})
    ops = [
        GetOp(("test", "foo"), "key1"),
        PutOp(("test", "bar"), "key2", {"data": "value2b"}),
        SearchOp(("test",), {"data": "value1"}, 10, 0),
        ListNamespacesOp(None, None, 10, 0),
        GetOp(("test",), "key3"),
        PutOp(("test",), "key3", {"data": "first"}),
        GetOp(("test",), "key3"),  # the put above is not visible inside its own batch
        PutOp(("test",), "key3", {"data": "last"}),  # same (namespace, key): the last wins
        GetOp(("test", "bar"), "key2"),
    ]
    results = store.batch(ops)
    assert len(results) == len(ops)
    assert isinstance(results[0], Item) and results[0].value == {"data": "value1"}
    assert results[0].namespace == ("test", "foo") and results[0].key == "key1"
    assert results[1] is None and results[5] is None and results[7] is None
    assert [i.key for i in results[2]] == ["key1"]
    assert {("test", "foo"), ("test", "bar")} <= set(results[3])
    assert results[4] is None and results[6] is None
    assert results[8].value == {"data": "value2"}  # before the batch's put
    assert store.get(("test",), "key3").value == {"data": "last"}
    assert store.get(("test", "bar"), "key2").value == {"data": "value2b"}
    store.batch([PutOp(("test",), "key3", {"data": "x"}), PutOp(("test",), "key3", None)])
    assert store.get(("test",), "key3") is None  # value=None deletes, and it came last


def test_get_put_update_delete(store):
    ns = ("test", "documents")
    store.put(ns, "doc1", {"title": "Test Document", "content": "Hello, World!"})
    item = store.get(ns, "doc1")
    assert item.namespace == ns and item.value == {"title": "Test Document", "content": "Hello, World!"}
    time.sleep(0.01)
    store.put(ns, "doc1", {"title": "Updated", "content": "Hello again"})
    updated = store.get(ns, "doc1")
    assert updated.value == {"title": "Updated", "content": "Hello again"}
    assert updated.created_at == item.created_at and updated.updated_at > item.updated_at
    assert store.get(("test", "other_documents"), "doc1") is None
    store.delete(ns, "doc1")
    assert store.get(ns, "doc1") is None
    store.delete(ns, "doc1")  # deleting what is gone is not an error
    store.put(ns, "doc1", {"title": "again"})  # a deleted key can be written again
    assert store.get(ns, "doc1").value == {"title": "again"}


def test_search_without_query_filters_and_pages(store):
    data = [
        (("test", "docs"), "doc1", {"title": "First", "author": "Alice", "tags": ["important"], "score": 4.5}),
        (("test", "docs"), "doc2", {"title": "Second", "author": "Bob", "tags": ["draft"], "score": 3.0}),
        (("test", "images"), "img1", {"title": "Image", "author": "Alice", "tags": ["final"], "score": 4.0}),
        (("test", "flags"), "f1", {"active": True, "user": {"access-level": "nested"}, "123abc": "ok"}),
        (("test", "flags"), "f2", {"active": False, "price": -10}),
    ]
    for ns, key, value in data:
        store.put(ns, key, value)
    assert len(store.search(("test",))) == 5
    assert keys(store.search(("test", "docs"))) == ["doc1", "doc2"]
    assert keys(store.search(("test",), filter={"author": "Alice"})) == ["doc1", "img1"]
    assert keys(store.search(("test",), filter={"score": {"$gt": 3.2}})) == ["doc1", "img1"]
    assert keys(store.search(("test",), filter={"score": {"$gte": 4.0, "$lt": 4.5}})) == ["img1"]
    assert keys(store.search(("test",), filter={"score": {"$lte": 3.0}})) == ["doc2"]
    assert keys(store.search(("test", "docs"), filter={"author": {"$ne": "Alice"}})) == ["doc2"]
    assert keys(store.search(("test",), filter={"author": {"$eq": "Bob"}})) == ["doc2"]
    assert keys(store.search(("test",), filter={"tags": ["draft"]})) == ["doc2"]
    assert keys(store.search(("test",), filter={"active": True})) == ["f1"]
    assert keys(store.search(("test",), filter={"active": False})) == ["f2"]
    assert keys(store.search(("test",), filter={"user.access-level": "nested"})) == ["f1"]
    assert keys(store.search(("test",), filter={"user": {"access-level": "nested"}})) == ["f1"]
    assert keys(store.search(("test",), filter={"123abc": "ok"})) == ["f1"]
    assert keys(store.search(("test",), filter={"price": {"$lt": 0}})) == ["f2"]
    assert keys(store.search(("test",), filter={"score": {"$lt": float("inf")}})) == ["doc1", "doc2", "img1"]
    assert store.search(("test",), filter={"score": {"$eq": float("nan")}}) == []
    assert store.search(("test",), filter={"author": "public' OR '1'='1"}) == []
    with pytest.raises(ValueError, match="operator"):
        store.search(("test",), filter={"score": {"$regex": ".*"}})
    first, rest = store.search(("test",), limit=2), store.search(("test",), offset=2)
    assert len(first) == 2 and len(rest) == 3
    assert {i.key for i in first} | {i.key for i in rest} == {"doc1", "doc2", "img1", "f1", "f2"}


def test_query_search_ranks_within_the_prefix(store):
    docs = [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
        ("doc2", {"text": "red sports car", "color": "red", "score": 3.0}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
    ]
    for key, value in docs:
        store.put(("fruit",), key, value, index=["text"])
    store.put(("fruitless",), "doc5", {"text": "apple pie"}, index=["text"])  # a sibling namespace
    results = store.search(("fruit",), query="apple", filter={"color": "red"})
    assert [r.key for r in results] == ["doc1", "doc2"]  # a query ranks, the filter selects
    assert store.search(("fruit",), query="car", filter={"color": "red"})[0].key == "doc2"
    results = store.search(("fruit",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"})
    assert [r.key for r in results] == ["doc3"]
    assert next(r.key for r in store.search(("fruit",), query="blue", filter={"score": {"$gt": 3.2}})) == "doc4"
    ranked = store.search(("fruit",), query="apple fruit", limit=10)
    assert {r.key for r in ranked} == {"doc1", "doc2", "doc3", "doc4"}  # never the sibling's doc5
    assert {r.key for r in ranked[:2]} == {"doc1", "doc3"}
    assert all(isinstance(r.score, float) and r.score > 0 for r in ranked)
    assert [r.score for r in ranked] == sorted((r.score for r in ranked), reverse=True)
    page1 = store.search(("fruit",), query="apple fruit", limit=2)
    page2 = store.search(("fruit",), query="apple fruit", limit=2, offset=2)
    assert [r.key for r in page1 + page2] == [r.key for r in ranked]
    assert len(store.search(("fruit",), query="")) == 4  # no query: a listing
    assert len(store.search(("fruit",), query="test!@#$%^&*() " * 30)) == 4


def test_index_false_skips_embedding_and_index_paths_choose_the_text(store, bus):
    store.put(("kb",), "secret", {"text": "the launch code is tulip"}, index=False)
    store.put(("kb",), "recipe", {"title": "tomato soup", "body": "the launch code is tulip"}, index=["title"])
    node = bus.current_fact("lgstore/kb//secret", store.context, scope=store.scope_for(("kb",)))
    assert "tulip" not in node.content  # nothing of the value was embedded
    hits = store.search(("kb",), query="what is the launch code?")
    assert [h.key for h in hits] == ["recipe"]  # ranked by its title only; the unindexed item never ranks
    assert hits[0].score < store.search(("kb",), query="tomato soup")[0].score
    assert keys(store.search(("kb",))) == ["recipe", "secret"]  # a listing finds both
    store.put(("kb",), "secret", {"text": "now indexed: the launch code is tulip"})
    assert "secret" in [h.key for h in store.search(("kb",), query="launch code tulip")]


def test_namespaces_match_at_segment_boundaries(store):
    for ns in [("foo",), ("foo", "child"), ("foo", "child", "deep"), ("foobar",), ("foobar", "baz"), ("foo2",),
               ("user_1",), ("user_1", "child"), ("userX1",), ("a%b",), ("axxb",), ("a/b",), ("Foo",),
               ("uid", "users", "alice"), ("uid", "users", "malice"), ("uid", "a", "b", "alice"),
               ("users", "alice\n")]:  # fmt: skip
        store.put(ns, "k", {"v": 1})

    def under(prefix):
        return {i.namespace for i in store.search(prefix, limit=100)}

    assert under(("foo",)) == {("foo",), ("foo", "child"), ("foo", "child", "deep")}
    assert under(("foobar",)) == {("foobar",), ("foobar", "baz")}
    assert under(("foo", "child")) == {("foo", "child"), ("foo", "child", "deep")}
    assert under(("foo2",)) == {("foo2",)}
    assert under(("fo",)) == set()
    assert under(("user_1",)) == {("user_1",), ("user_1", "child")}
    assert under(("a%b",)) == {("a%b",)} and under(("a",)) == set()
    assert under(("foo", "*")) == set()  # search prefixes are literal: no wildcard
    assert under(("Foo",)) == {("Foo",)}
    assert len(under(())) == 17
    ls = store.list_namespaces
    assert set(ls(prefix=["foo"], limit=100)) == {("foo",), ("foo", "child"), ("foo", "child", "deep")}
    assert set(ls(suffix=["alice"], limit=100)) == {("uid", "users", "alice"), ("uid", "a", "b", "alice")}
    assert set(ls(prefix=["uid", "*", "alice"], limit=100)) == {("uid", "users", "alice")}
    assert set(ls(prefix=["uid"], suffix=["alice"], limit=100)) == {("uid", "users", "alice"), ("uid", "a", "b", "alice")}
    assert set(ls(prefix=["uid"], limit=100)) == {("uid", "users", "alice"), ("uid", "users", "malice"),
                                                   ("uid", "a", "b", "alice")}  # fmt: skip
    assert set(ls(prefix=["users", "alice"], limit=100)) == set()  # "alice\n" is another label
    assert set(ls(prefix=["foo"], max_depth=1, limit=100)) == {("foo",)}
    assert set(ls(prefix=["uid"], max_depth=2, limit=100)) == {("uid", "users"), ("uid", "a")}
    everything = ls(limit=100)
    assert len(everything) == 17 and everything == sorted(everything)
    assert ls(limit=5) + ls(limit=100, offset=5) == everything
    assert ls(prefix=["nonexistent"]) == []


def test_list_namespaces_like_upstream_examples(store):
    for i, ns in enumerate([("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"),
                            ("a", "c", "f"), ("b", "a", "f"), ("users", "123"), ("users", "456", "settings"),
                            ("admin", "users", "789")]):  # fmt: skip
        store.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(suffix=("*", "f")) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == [("a", "b", "d", "i"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
    assert store.list_namespaces(prefix=("users", "*")) == [("users", "123"), ("users", "456", "settings")]
    assert store.list_namespaces(max_depth=2)[:3] == [("a", "b"), ("a", "c"), ("admin", "users")]


def test_labels_are_validated_and_reads_create_nothing(store):
    doc = {"foo": "bar"}
    for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("x", 3), ("nul\x00",)]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "foo", doc)
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph", "foo"), "bar", doc)  # the root label upstream reserves
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp((), "k", doc)])
    with pytest.raises(InvalidNamespaceError):
        store.get(("a.b",), "k")
    with pytest.raises(InvalidNamespaceError):
        store.search(("a", "b.c"))
    with pytest.raises(InvalidNamespaceError):
        store.list_namespaces(prefix=("a.b",))
    with pytest.raises(InvalidNamespaceError):
        store.batch([ListNamespacesOp((MatchCondition("prefix", ("",)),))])
    assert store.get(("ghost", "ns"), "k") is None
    assert store.search(("ghost",), query="anything") == [] and store.search(("ghost",)) == []
    store.delete(("ghost", "ns"), "k")
    assert store.list_namespaces() == []  # reads and deletes created nothing
    store.batch([PutOp(("langgraph", "foo"), "bar", doc)])  # allowed below the public put, as upstream
    assert store.get(("langgraph", "foo"), "bar").value == doc


def test_non_ascii_labels_values_and_queries(store):
    ns = ("用户_123", "mémoires")
    texts = {"1": "这是中文", "2": "これは日本語です", "3": "이건 한국어야", "4": "Это русский", "5": "यह रूसी है"}
    for key, text in texts.items():
        store.put(ns, key, {"text": text})
    for key, text in texts.items():
        assert store.get(ns, key).value == {"text": text}
        assert store.search(ns, query=text)[0].key == key
    assert store.list_namespaces(prefix=("用户_123",)) == [ns]


def test_a_store_reaches_only_what_its_context_may_see(bus):
    org = f"org{uuid.uuid4().hex[:8]}"
    alice = MemoryBusStore(bus, mb.Context(org, "alice", "assistant"), template=("*", "user"))
    bob = MemoryBusStore(bus, mb.Context(org, "bob", "assistant"), template=("*", "user"))
    shared = MemoryBusStore(bus, mb.Context(org, "alice", "assistant"), level="org")
    alice.put(("memories", "alice"), "m1", {"text": "alice is allergic to peanuts"})
    bob.put(("memories", "bob"), "m1", {"text": "bob is allergic to shellfish"})
    shared.put(("policies",), "p1", {"text": "the office is closed on Fridays"})
    assert alice.scope_for(("memories", "alice")) == mb.Scope(org, "alice")
    with pytest.raises(mb.ScopeViolation):
        alice.put(("memories", "bob"), "m2", {"text": "planted by alice"})
    with pytest.raises(mb.ScopeViolation):
        alice.get(("memories", "bob"), "m1")
    with pytest.raises(mb.ScopeViolation):
        alice.delete(("memories", "bob"), "m1")
    assert alice.search(("memories", "bob")) == []
    assert alice.search(("memories", "bob"), query="allergic") == []
    assert [i.value["text"] for i in alice.search(("memories",), query="allergy")] == ["alice is allergic to peanuts"]
    assert alice.list_namespaces() == [("memories", "alice"), ("policies",)]
    assert bob.list_namespaces() == [("memories", "bob"), ("policies",)]  # org level: both see it
    assert bob.get(("memories", "bob"), "m1").value == {"text": "bob is allergic to shellfish"}
    assert bob.get(("policies",), "p1") is None  # items live where the store's template and level put them
    assert bob.search(("policies",))[0].value == {"text": "the office is closed on Fridays"}
    hits = bus.recall("allergies", mb.Context(org, "alice", "other-agent"), k=5)
    assert any("alice is allergic to peanuts" in h.node.content for h in hits)  # the store's items are memories


def test_ttl_is_memory_expiry_refreshed_on_read(store, bus):
    assert store.supports_ttl
    ns = ("ttl",)
    scope = store.scope_for(ns)

    def expiry(key):
        return bus.current_fact(f"lgstore/ttl//{key}", store.context, scope=scope).expires_at

    store.put(ns, "long", {"v": 1}, ttl=10.0)
    first = expiry("long")
    assert first == pytest.approx(time.time() + 600, abs=30)
    time.sleep(0.05)
    store.get(ns, "long", refresh_ttl=False)
    assert expiry("long") == first
    store.get(ns, "long")  # refresh_on_read by default
    second = expiry("long")
    assert second > first
    store.search(ns, refresh_ttl=True)
    assert expiry("long") > second
    store.put(ns, "long", {"v": 2}, ttl=None)
    assert expiry("long") is None
    store.put(ns, "short", {"v": 1}, ttl=0.01)  # 0.6 s
    assert store.get(ns, "short", refresh_ttl=False).value == {"v": 1}
    time.sleep(1.0)
    assert store.get(ns, "short") is None
    assert keys(store.search(ns)) == ["long"] and store.list_namespaces() == [ns]


def test_async_twins(store):
    asyncio.run(_async_twins(store))


async def _async_twins(store):
    ns = ("async", "docs")
    await store.aput(ns, "a", {"text": "the cat sat on the mat"})
    await store.aput(ns, "b", {"text": "quarterly revenue grew"})
    assert (await store.aget(ns, "a")).value == {"text": "the cat sat on the mat"}
    assert (await store.asearch(("async",), query="feline on a rug"))[0].key == "a"
    assert await store.alist_namespaces(prefix=("async",)) == [ns]
    results = await store.abatch([GetOp(ns, "b"), PutOp(ns, "b", None), GetOp(ns, "b")])
    assert results[0].key == "b" and results[2].key == "b"
    await store.adelete(ns, "a")
    assert await store.aget(ns, "a") is None and await store.aget(ns, "b") is None


def test_a_state_graph_reads_and_writes_memories_from_its_nodes(store):
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime

    class State(TypedDict):
        user: str
        said: str
        recalled: list[str]

    def remember(state: State, runtime: Runtime) -> dict:
        if state["said"]:
            runtime.store.put(("memories", state["user"]), uuid.uuid4().hex, {"text": state["said"]})
        return {}

    def recall(state: State, runtime: Runtime) -> dict:
        hits = runtime.store.search(("memories", state["user"]), query="what food does the user like?", limit=2)
        return {"recalled": [h.value["text"] for h in hits]}

    graph = StateGraph(State)
    graph.add_node("remember", remember)
    graph.add_node("recall", recall)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    app = graph.compile(store=store)
    app.invoke({"user": "alice", "said": "I love spicy Thai food", "recalled": []})
    app.invoke({"user": "alice", "said": "My car is a blue hatchback", "recalled": []})
    out = app.invoke({"user": "alice", "said": "", "recalled": []})  # a later run, nothing new said
    assert out["recalled"][0] == "I love spicy Thai food"
    assert store.list_namespaces() == [("memories", "alice")]


def test_langmem_memory_tools_work_over_the_store(bus):
    from langmem import create_manage_memory_tool, create_search_memory_tool

    org = f"org{uuid.uuid4().hex[:8]}"
    store = MemoryBusStore(bus, mb.Context(org, "alice", "assistant"), template=("*", "user"))
    manage = create_manage_memory_tool(namespace=("memories", "{langgraph_user_id}"), store=store)
    search = create_search_memory_tool(namespace=("memories", "{langgraph_user_id}"), store=store)
    as_alice = {"configurable": {"langgraph_user_id": "alice"}}
    # the agent loop, without an LLM: the calls a model would make, in order
    created = manage.invoke({"content": "Alice prefers window seats on flights"}, config=as_alice)
    manage.invoke({"content": "Alice is vegetarian"}, config=as_alice)
    memory_id = created.split()[-1]
    found = search.invoke({"query": "seat preference when flying"}, config=as_alice)
    assert "window seats" in found and found.index("window seats") < found.index("vegetarian")
    manage.invoke({"action": "update", "id": memory_id, "content": "Alice prefers aisle seats now"}, config=as_alice)
    found = search.invoke({"query": "seat preference when flying"}, config=as_alice)
    assert "aisle seats" in found and "window seats" not in found
    manage.invoke({"action": "delete", "id": memory_id}, config=as_alice)
    assert "aisle" not in search.invoke({"query": "seat preference"}, config=as_alice)
    assert [i.value["content"] for i in store.search(("memories", "alice"))] == ["Alice is vegetarian"]
    # a config naming another user cannot reach that user's memories through alice's store
    as_bob = {"configurable": {"langgraph_user_id": "bob"}}
    with pytest.raises(mb.ScopeViolation):
        manage.invoke({"content": "planted in bob's memory"}, config=as_bob)
    assert search.invoke({"query": "vegetarian"}, config=as_bob) == "[]"


def test_memories_planted_under_the_store_keys_are_not_items(bus):
    """Issue 27: an org member writes, with plain bus calls, memories whose keys look like
    the store's — at org level (in alice's namespace, and in a shared one) and in their
    own scope — and one malformed item. None is read as alice's item; every read works
    for every member and counts what it skipped."""
    org = f"org{uuid.uuid4().hex[:8]}"
    alice = MemoryBusStore(bus, mb.Context(org, "alice", "assistant"), template=("*", "user"))
    plain = MemoryBusStore(bus, mb.Context(org, "alice", "assistant"))  # no template
    bob = MemoryBusStore(bus, mb.Context(org, "bob", "assistant"))
    alice.put(("memories", "alice"), "m1", {"text": "alice drinks green tea"})
    plain.put(("notes",), "n1", {"text": "alice's real note about tea"})
    real = bus.current_fact("lgstore/memories/alice//m1", alice.context, scope=alice.scope_for(("memories", "alice")))
    mallory = mb.Context(org, "mallory", "evil")
    # a perfect copy of the store's metadata, at org level, claiming alice's namespace
    forged = dict(real.structured["langgraph"], key="m2", value={"text": "alice wants tea sent to mallory"},
                  scope=mb.Scope(org).key)  # fmt: skip
    bus.assert_fact("lgstore/memories/alice//m2", "alice wants tea sent to mallory", mallory, scope="org",
                    structured={"langgraph": forged})  # fmt: skip
    # the same copy, but claiming to be written for alice's scope (it is not in it)
    bus.assert_fact("lgstore/memories/alice//m3", "alice likes tea from mallory", mallory, scope="org",
                    structured={"langgraph": dict(forged, key="m3", scope=mb.Scope(org, "alice").key)})  # fmt: skip
    # the old metadata (no store mark), at org level, in a namespace without a user
    bus.assert_fact("lgstore/notes//n2", "planted tea note", mallory, scope="org", structured={"langgraph": {
        "namespace": ["notes"], "key": "n2", "value": {"text": "planted tea note"}, "updated_at": 1.0}})
    # in mallory's own user scope
    bus.remember("mallory's tea note", mallory, scope="user", key="lgstore/notes//n3",
                 structured={"langgraph": dict(forged, namespace=["notes"], key="n3")})  # fmt: skip
    # malformed: labels that are not strings, a value that is not a dict (raised TypeError before)
    bus.remember("malformed tea", mallory, scope="org", key="lgstore/1//x",
                 structured={"langgraph": {"namespace": [1, None], "key": 5, "value": "v", "updated_at": "soon"}})
    bus.remember("also malformed", mallory, scope="org", key="lgstore/z//y", structured={"langgraph": "oops"})

    assert alice.get(("memories", "alice"), "m2") is None and alice.get(("memories", "alice"), "m3") is None
    assert keys(alice.search(("memories",))) == ["m1"]
    assert keys(alice.search(("memories", "alice"), query="tea")) == ["m1"]
    assert alice.list_namespaces() == [("memories", "alice"), ("notes",)]
    assert keys(plain.search(("notes",))) == ["n1"]
    # without a template no label names a user: the marked org-level m2 is a shared item of
    # ("memories", "alice") for this store, as an org-level store's items are (m3 is not:
    # written for alice's scope, found in the org's)
    assert keys(plain.search((), query="tea")) == ["m1", "m2", "n1"]
    assert plain.list_namespaces() == [("memories", "alice"), ("notes",)]
    # bob's store (no template): only the marked org-level item, shared; nothing unmarked, malformed or foreign
    assert bob.list_namespaces() == [("memories", "alice")] and keys(bob.search(())) == ["m2"]
    assert keys(bob.search((), query="tea")) == ["m2"]
    assert alice.skipped["malformed"] > 0 and alice.skipped["foreign"] > 0
    assert bob.skipped["malformed"] >= 3 and bob.skipped["foreign"] >= 2  # counted, never raised
