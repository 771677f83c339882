"""The incremental BM25 index, tokens and leading date stamps (pure, no model); the time
parser has its own spec tests (test_timeparse.py)."""

import math
from datetime import UTC, datetime

import pytest

from memorybus.retrieval.keyword import KeywordIndex
from memorybus.retrieval.text import speaker_terms, split_time_prefix, tokens


def ts(y, m, d, hh=0, mm=0):
    return datetime(y, m, d, hh, mm, tzinfo=UTC).timestamp()


def test_tokens_stem_and_drop_stop_words():
    # Snowball stems: inflections meet; stop words (NLTK's English list) are dropped
    assert tokens("painting") == tokens("painted") == tokens("paints") == tokens("paint")
    assert tokens("agree") == tokens("agreed") == tokens("agreeing")  # a light stemmer got these wrong
    assert tokens("hiking") == tokens("hikes") == tokens("hiked")
    assert tokens("What did the") == [] and tokens("") == []
    assert tokens("Caroline") == tokens("caroline") and tokens("a dog, a dog") == tokens("dog") * 2
    # words that carry meaning in a memory are not stop words
    assert tokens("said") and tokens("like") and tokens("yeah")


def test_speaker_terms_name_people_and_agents():
    assert speaker_terms("agent:planner") == tokens("planner")
    assert speaker_terms("Ann Lee") == tokens("Ann Lee") and len(speaker_terms("Ann Lee")) == 2
    assert speaker_terms(None) == [] and speaker_terms("") == []


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


def test_leading_date_stamps_are_split_off():
    when, rest = split_time_prefix("[2024-05-08 10:30] Deployed v2 to staging")
    assert when == ts(2024, 5, 8, 10, 30) and rest == "Deployed v2 to staging"
    when, rest = split_time_prefix("(8 May 2024) standup notes")
    assert when == ts(2024, 5, 8) and rest == "standup notes"
    assert split_time_prefix("(not a date) text") == (None, "(not a date) text")
    assert split_time_prefix("no stamp 2024-05-08") == (None, "no stamp 2024-05-08")
