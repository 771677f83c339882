"""The LangGraph store's pure rules: key encoding at label boundaries, namespace
conditions and filters (no LangGraph import, no Ray)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memorybus.errors import InvalidRequest
from memorybus.integrations import lgmatch

labels = st.text(min_size=1, max_size=6).filter(lambda s: "." not in s and "\x00" not in s)
namespaces = st.lists(labels, min_size=1, max_size=4).map(tuple)


@given(namespaces, st.text(max_size=6), namespaces, st.text(max_size=6))
def test_item_keys_are_injective(ns1, k1, ns2, k2):
    assert (lgmatch.item_key(ns1, k1) == lgmatch.item_key(ns2, k2)) == ((ns1, k1) == (ns2, k2))


@given(namespaces, st.text(max_size=6), st.lists(labels, max_size=4).map(tuple))
def test_a_prefix_key_matches_exactly_the_namespaces_below_it(ns, key, prefix):
    below = ns[: len(prefix)] == prefix
    assert lgmatch.item_key(ns, key).startswith(lgmatch.prefix_key(prefix)) == below


def test_conditions_match_label_by_label():
    assert lgmatch.matches(("a", "*", "f"), ("a", "b", "f", "g"), "prefix")
    assert not lgmatch.matches(("a", "*", "f"), ("a", "f"), "prefix")
    assert lgmatch.matches(("*", "f"), ("x", "y", "f"), "suffix")
    assert not lgmatch.matches(("alice",), ("u", "malice"), "suffix")
    assert not lgmatch.matches(("foo",), ("foobar",), "prefix")
    with pytest.raises(InvalidRequest):
        lgmatch.matches(("a",), ("a",), "infix")


def test_filters():
    value = {"n": 3, "s": "b", "flag": True, "tags": ["x"], "meta": {"a": 1, "b": 2}}
    assert lgmatch.passes(value, {"n": 3, "flag": True, "tags": ["x"]})
    assert not lgmatch.passes(value, {"flag": 1})  # a bool is not a number
    assert not lgmatch.passes(value, {"n": True})
    assert lgmatch.passes(value, {"n": {"$gt": 2, "$lte": 3}, "s": {"$ne": "a"}})
    assert not lgmatch.passes(value, {"n": {"$gt": float("nan")}})
    assert not lgmatch.passes(value, {"s": {"$gt": 1}})  # a string is not greater than a number
    assert lgmatch.passes(value, {"s": {"$gte": "a"}})
    assert lgmatch.passes(value, {"meta": {"a": 1}, "meta.b": 2})
    assert not lgmatch.passes(value, {"meta": {"a": {"$lt": 1}}})
    assert not lgmatch.passes(value, {"missing": 1}) and lgmatch.passes(value, {"missing": None})
    lgmatch.check_filter({"n": {"$gt": 1}})
    for bad in [{"n": {"$regex": "x"}}, {"": 1}, ["n"]]:
        with pytest.raises(InvalidRequest):
            lgmatch.check_filter(bad)


def _meta(**changes):
    meta = {"store": lgmatch.MARK, "scope": "acme\x1falice\x1f\x1f", "namespace": ["notes"], "key": "k",
            "value": {"a": 1}, "updated_at": 1.5, "ttl": None}  # fmt: skip
    return {"langgraph": {**meta, **changes}}


def test_parse_item_accepts_what_the_store_writes():
    item = lgmatch.parse_item(lgmatch.item_key(("notes",), "k"), _meta())
    assert isinstance(item, lgmatch.ParsedItem)
    assert (item.namespace, item.key, item.value, item.updated_at, item.ttl) == (("notes",), "k", {"a": 1}, 1.5, None)


@pytest.mark.parametrize("structured", [
    {}, {"langgraph": "oops"}, {"langgraph": None}, _meta(store=None), _meta(store="someone/1"),
    _meta(namespace=[1, None]), _meta(namespace=[]), _meta(namespace="notes"), _meta(namespace=["notes", ""]),
    _meta(key=5), _meta(value="v"), _meta(value={1: "x"}), _meta(updated_at="soon"), _meta(updated_at=float("nan")),
    _meta(updated_at=1e300), _meta(updated_at=-1), _meta(ttl=-5), _meta(ttl="1"), _meta(scope=None),
    _meta(namespace=["other"]), _meta(key="k2"),
])  # fmt: skip
def test_parse_item_gives_a_reason_never_an_exception(structured):
    assert isinstance(lgmatch.parse_item(lgmatch.item_key(("notes",), "k"), structured), str)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                    max_leaves=10))  # fmt: skip
def test_parse_item_never_raises_on_any_metadata(meta):
    result = lgmatch.parse_item("lgstore/notes//k", {"langgraph": meta})
    assert isinstance(result, str)  # nothing random carries the mark
