"""The LangGraph store's path vectors (its index config with its own embedder): which
texts are embedded, how vectors are packed and vetted, and how items are scored and
ranked (max pooling over path vectors, unscored last). No Ray."""

import numpy as np
import pytest

pytest.importorskip("langgraph")

from memorybus.errors import InvalidRequest
from memorybus.integrations import lgmatch, lgvectors


def test_path_texts_follow_langgraph_paths_and_the_whole_value():
    value = {"title": "soup", "steps": [{"t": "boil"}, {"t": "  "}, {"t": "eat"}], "n": 3}
    assert lgvectors.path_texts(value, ["title", "missing"]) == ["soup"]
    assert lgvectors.path_texts(value, ["steps[*].t"]) == ["boil", "eat"]  # one text each, blanks left out
    assert lgvectors.path_texts(value, ["$"]) == ['{"n": 3, "steps": [{"t": "boil"}, {"t": "  "}, {"t": "eat"}], '
                                                  '"title": "soup"}']  # fmt: skip
    assert lgvectors.path_texts(value, ["n", "title"]) == ["3", "soup"]


def test_pack_round_trips_and_refuses_what_is_not_vectors():
    blob, dims = lgvectors.pack([[1.0, 0.0, 2.0], [0.5, 0.5, 0.5]], 3)
    assert dims == 3 and len(blob) == 2 * 3 * 4
    assert np.allclose(lgvectors.unpack(blob, dims), [[1.0, 0.0, 2.0], [0.5, 0.5, 0.5]])
    assert lgvectors.pack([[1.0, 2.0]], None)[1] == 2  # no dims configured: the embedder's
    for bad, dims in [([[1.0, 2.0]], 3), ([[1.0], [1.0, 2.0]], None), ([[float("nan"), 1.0]], 2), ([[]], None),
                      ([1.0, 2.0], 2), ("text", None)]:  # fmt: skip
        with pytest.raises(InvalidRequest):
            lgvectors.pack(bad, dims)


def test_the_best_path_vector_scores_an_item():
    query = np.array([1.0, 0.0])
    vectors = np.array([[0.0, 1.0], [2.0, 0.0], [1.0, 1.0]], dtype=np.float32)
    assert lgvectors.best_score(query, vectors) == pytest.approx(1.0)  # the second path matches exactly
    assert lgvectors.best_score(query, np.array([[0.0, 1.0]])) == pytest.approx(0.0)
    assert lgvectors.best_score(query, np.zeros((1, 2))) == 0.0  # a zero vector scores 0, never NaN
    assert lgvectors.best_score(query, np.ones((1, 3))) is None  # another embedder's width: no score
    with pytest.raises(InvalidRequest):
        lgvectors.query_vector([float("inf"), 1.0])


def test_rank_puts_scored_items_best_first_and_unscored_last_in_order():
    entries = [(None, "u1"), (0.2, "a"), (0.9, "b"), (None, "u2"), (0.9, "c"), (-0.5, "d")]
    assert [e for _, e in lgvectors.rank(entries)] == ["b", "c", "a", "d", "u1", "u2"]


def test_stored_vectors_are_vetted_before_an_item_is_read():
    meta = {"store": lgmatch.MARK, "namespace": ["kb"], "key": "k", "value": {"t": "x"}, "updated_at": 1.0,
            "ttl": None, "scope": "org:o"}  # fmt: skip
    key = lgmatch.item_key(("kb",), "k")
    blob, dims = lgvectors.pack([[1.0, 2.0]], 2)
    item = lgmatch.parse_item(key, {"langgraph": {**meta, "vectors": blob, "dims": dims}})
    assert not isinstance(item, str) and item.vectors == blob and item.dims == 2
    assert lgvectors.item_score(np.array([2.0, 4.0]), item) == pytest.approx(1.0)
    assert lgvectors.item_score(np.array([2.0, 4.0]), lgmatch.parse_item(key, {"langgraph": meta})) is None
    for vectors, dims in [(blob[:-1], 2), (blob, 3), (blob, 0), (blob, True), ([1.0, 2.0], 2), (b"", 2)]:
        assert lgmatch.parse_item(key, {"langgraph": {**meta, "vectors": vectors, "dims": dims}}) == "bad path vectors"
