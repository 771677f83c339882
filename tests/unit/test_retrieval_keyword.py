"""The incremental BM25 index, tokens and dates (pure, no model)."""

import math
from datetime import UTC, datetime

import pytest

from memorybus.retrieval.keyword import KeywordIndex
from memorybus.retrieval.text import names, split_time_prefix, stem, tokens
from memorybus.retrieval.timeparse import parse_datetime, query_times, time_match


def ts(y, m, d, hh=0, mm=0):
    return datetime(y, m, d, hh, mm, tzinfo=UTC).timestamp()


def test_tokens_stem_and_drop_stop_words():
    assert tokens("Melanie painted the sunsets; she loves painting!") == ["melani", "paint", "sunset", "lov", "paint"]
    assert stem("hiking") == stem("hikes") == stem("hiked")
    assert "what" not in tokens("What did Caroline research?")
    assert names("What did Caroline and Mel paint in July?") == {"caroline", "mel"}


def test_bm25_scores_match_the_formula():
    idx = KeywordIndex(k1=1.2, b=0.75)
    docs = {"a": ["apple", "pie"], "b": ["apple", "apple", "tart", "crust"], "c": ["banana"]}
    for i, terms in docs.items():
        idx.add(i, "s", terms)
    got = dict(idx.search(["apple"], ["s"], 10))
    n, df, avgdl = 3, 2, 7 / 3
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))

    def bm25(tf, dl):
        return idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl))

    assert got["a"] == pytest.approx(bm25(1, 2), rel=1e-5)
    assert got["b"] == pytest.approx(bm25(2, 4), rel=1e-5)
    assert "c" not in got


def test_partitions_are_the_visible_scopes_only():
    idx = KeywordIndex()
    idx.add("mine", "org/u1", ["salary", "review"])
    idx.add("theirs", "org/u2", ["salary", "secret"])
    assert [i for i, _ in idx.search(["salary"], ["org/u1"], 10)] == ["mine"]
    assert {i for i, _ in idx.search(["salary"], ["org/u1", "org/u2"], 10)} == {"mine", "theirs"}
    assert idx.search(["salary"], ["org/u3"], 10) == []


def test_updates_and_removals_are_incremental_and_compact():
    idx = KeywordIndex()
    idx.add("x", "s", ["rust", "service"])
    idx.add("x", "s", ["go", "service"])  # a new version replaces the old one
    assert idx.search(["rust"], ["s"], 10) == []
    assert [i for i, _ in idx.search(["go"], ["s"], 10)] == ["x"]
    for i in range(300):
        idx.add(f"d{i}", "s", ["common", f"w{i}"])
    for i in range(250):
        assert idx.remove(f"d{i}")
    assert not idx.remove("d0")
    hits = idx.search(["common"], ["s"], 1000)
    assert sorted(i for i, _ in hits) == sorted(f"d{i}" for i in range(250, 300))
    part = idx._parts["s"]
    assert part.dead < part.entries  # compacted: dead postings were dropped
    assert len(idx) == 51


def test_time_prefix_and_dates():
    when, rest = split_time_prefix('(1:56 pm on 8 May, 2023) Caroline said, "hi"')
    assert when == ts(2023, 5, 8, 13, 56) and rest == 'Caroline said, "hi"'
    assert split_time_prefix("(not a date) text") == (None, "(not a date) text")
    assert parse_datetime("2023/05/20 (Sat) 07:47") == ts(2023, 5, 20, 7, 47)


def test_query_time_windows():
    ref = ts(2023, 6, 15)
    (w,) = query_times("What did Maria do in December 2022?", ref)
    assert (w.start, w.end) == (ts(2022, 12, 1), ts(2023, 1, 1))
    (w,) = query_times("What did I buy last week?", ref)
    assert w.start == ts(2023, 6, 5) and w.end == ts(2023, 6, 12)
    (w,) = query_times("When did she go camping in June?", ref)
    assert w.month == 6 and time_match([w], ts(2021, 6, 3), 10) == 1.0
    assert time_match([w], ts(2021, 9, 3), 10) == 0.0
    assert query_times("What may I do?", ref) == []
    # relative expressions count from an explicit date in the query
    windows = query_times("What did Maria do last weekend before April 10, 2023?", ref)
    assert any(x.start == ts(2023, 4, 8) for x in windows)
