"""RankingWeights: how recall weighs each signal, grouped by signal, each default with its provenance.

Part of the configuration (``Config.ranking``; :mod:`memorybus.config` exports it):
plain frozen data that checks itself when built. Nothing here is read at import time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from memorybus.errors import ConfigError
from memorybus.validation import is_int


def _w(default: Any, provenance: str) -> Any:
    """A ranking default and where its value comes from (``RankingWeights.provenance()``)."""
    return field(default=default, metadata={"provenance": provenance})


_TUNED = "tuned on the dev files (LoCoMo dev, structured mode) with benchmarks/tune_recall.py"


@dataclass(frozen=True, slots=True)
class RankingWeights:
    """How recall ranks (see :mod:`memorybus.retrieval.ranking`), grouped by signal.

    **Relevance** (0..1, the gate): how well a memory matches the query.
    ``dense = clip((cosine - dense_zero) / (dense_full - dense_zero))``;
    ``keyword_share`` = the share of the query's BM25 weight the memory matches
    (``bm25 / sum of the query terms' idf``, at most 1); ``content = 1 - (1 -
    dense) * (1 - keyword * keyword_share)``. A turn of a declared thread is read
    in its context: ``relevance = 1 - (1 - content) * (1 - neighbor * best
    content of its thread neighbours)``. A memory below ``min_relevance`` is not
    returned (``recall(min_relevance=...)`` changes that per call), and no
    other signal can lift it above a memory at or over it. With ``name_check``, when the
    best content match holds one name the query names and none of the words it asks with,
    each such memory keeps its content only when the query without its names still reaches
    ``min_relevance`` on it, or the whole query's cosine exceeds the names' alone by more
    than ``name_margin``; else its content is the relevance of the name-free cosine (a
    shared name is not an answer).

    **Structure and salience** reorder the relevant memories: the thread's own
    relevance (its best member, and its centroid), the speaker or source the
    query names, the time it names, links in the shard's knowledge graph, the
    form of answer it asks for (``answer``: a memory stating a time for a *when*
    question, a number for *how many*; ``named``: a memory naming a specific thing, a
    quoted title or a capitalised word fewer than ``named_share`` of the visible memories
    hold, for *which X* / *what X*), then
    salience, recency, importance, confidence and length (a document-length
    prior: ``n / (n + length_pivot)`` for a memory of ``n`` distinct keyword
    terms: a memory that says more is likelier to hold the answer). With
    ``lift = thread * thread_rel + speaker * named_speaker + time * time_match + graph * link
    + answer * answer_form + named * names_a_thing``::

        base = (relevance + lift) * (1 - salience + salience * salience_norm)
               + recency * recency_norm + importance * importance_norm + confidence * confidence
               + length * length_prior
        top = 1 + thread + speaker + time + graph + answer + named + recency + importance + confidence
              + length
        score = min_relevance + (1 - min_relevance) * base / top   (relevant)
        score = relevance                                          (below the floor)

    so every score is in 0..1 and a relevant memory always outranks an
    irrelevant one. ``RankingWeights.provenance()`` says where each default
    comes from; ``RankingWeights.GROUPS`` names the fields of each group
    (relevance, structure, rerank, candidates, index) and ``weights.group(name)``
    gives their values.
    """

    # -- relevance: the gate ---------------------------------------------------------
    dense_zero: float = _w(0.12, "measured: median cosine of a LoCoMo dev question with the turns of the other dev "
                           "conversations (0.118; tune_recall.py --calibrate): unrelated text sits at or below it")
    dense_full: float = _w(1.0, f"{_TUNED}: 0.75 saturated near-duplicates into ties; 1.0 keeps their order")
    keyword: float = _w(1.0, f"{_TUNED}: LoCoMo R@10 rose with it (0.6 -> 0.8 -> 1.0), the cap of the scale")
    neighbor: float = _w(0.7, "tune_recall.py locomo --grid neighbor=0.5,0.55,...,0.8 --by-conversation (with "
                         "thread_members=10): LoCoMo dev structured R@10/R@5 0.816/0.740 at 0.5, 0.818, 0.817, "
                         "0.818, 0.821/0.742, 0.819, 0.817 at 0.55..0.8 (temporal 0.916 -> 0.932, single-hop "
                         "0.908 -> 0.913, multi-hop 0.529 -> 0.524, open-domain 0.519 -> 0.508 at 0.7); per "
                         "conversation at 0.7 conv-26 0.822 -> 0.807, conv-30 0.784 -> 0.802, conv-41 0.870 -> "
                         "0.871, conv-42 0.764 -> 0.768, conv-43 0.838 -> 0.856. Chosen leave-one-conversation-"
                         "out: 0.7 in every fold, held-out R@10 0.816 -> 0.821. Plain unchanged (no threads); "
                         "LongMemEval dev48 0.951 at 0.5-0.8. The max of the two neighbours beats their "
                         "evidence together (0.810) and their mean (0.808)")
    min_relevance: float = _w(0.15, "measured: a cosine of 0.252 on the dense scale, between the 5th percentile of "
                              "dev question/gold-turn cosines (0.246) and the 90th of other-conversation pairs "
                              "(0.251); tune_recall.py --calibrate; costs <0.002 LoCoMo R@10")
    name_check: bool = _w(True, "measured on 26 hand-written dev pairs (a question naming a person, a company or a "
                          "project, and a memory of that name; not the held-back test set): the cosine of the query "
                          "with its names replaced by 'someone' is 0.28-0.50 for 11 of 14 answering memories and "
                          "<= 0.12 for all 12 non-answering ones; the whole query's cosine minus the names' alone is "
                          "> 0 for 13 of 14 answering and <= -0.008 for all non-answering ones (either test passes "
                          "13 of 14, neither passes a non-answering one). tune_recall.py locomo: LoCoMo dev R@10 "
                          "structured 0.821 -> 0.819, plain 0.742 -> 0.741 (R@5 0.742 -> 0.740, 0.644 -> 0.644); "
                          "LongMemEval dev48 0.951 / 0.927 unchanged; memorybus eval locomo (the real bus) R@10 "
                          "0.8207 -> 0.8187 structured, 0.7418 -> 0.7408 plain. Checking every name-only memory, "
                          "not only when the best match is one, cost 0.014 / 0.005 (every LoCoMo turn holds its "
                          "speaker's name)")
    name_margin: float = _w(0.0, "the dev pairs of name_check: the whole query's cosine with an answering memory "
                            "exceeds the names' alone by 0.03-0.29 (one of 14 by -0.04), a non-answering one's by "
                            "-0.20 to -0.008: 0 separates them")
    # -- structure: reorders relevant memories ----------------------------------------
    thread: float = _w(1.0, f"{_TUNED}: grid 0.35/0.5/0.7/1.0 (0.7 best without the length prior); with length="
                       "0.2, length_pivot=5: --grid thread=0.7,1.0 gives R@10/R@5 0.801/0.728 and 0.804/0.738 "
                       "(plain unchanged, LongMemEval dev48 0.951 both)")
    thread_centroid: float = _w(0.6, f"{_TUNED}: grid 0/0.3/0.5/0.6/1.0")
    #: sessions from time (memories without a declared thread, see memorybus.retrieval.sessions):
    #: the lift of a session that answers the query, and the share of its centroid in it
    session: float = _w(0.3, "tune_recall.py locomo --modes plain --grid session=0,0.15,0.3,0.5 --grid "
                        "session_centroid=0,0.3,0.6 (2026-12-07), docs/retrieval.md 'Sessions from time': the "
                        "lift and centroid alone; neighbour expansion, contextual vectors and thread members, "
                        "which declared threads get, cost multi-hop and open-domain 4-5 points on plain text")
    session_centroid: float = _w(0.3, "the session grid above")
    #: the pause, in seconds of event time, that ends a session (memories of one scope and
    #: source); an index setting: a shard groups its memories with its config's value
    session_gap: float = _w(1800.0, "design choice, not tuned: half an hour without a memory ends a session; the "
                            "dev files hold sessions days apart whose turns share one time, so any gap from 0 to "
                            "hours gives them the same sessions")
    speaker: float = _w(0.2, f"{_TUNED}: grid 0/0.1/0.15/0.2/0.35/0.5 (0 lost 0.02 R@10)")
    time: float = _w(0.4, f"{_TUNED}: grid 0.2/0.4/0.7")
    time_words: bool = _w(False, "tune_recall.py --weight time_words=true vs the default, with bm25_b=0: False (the "
                          "words of a time the query names, e.g. 'a week ago', are matched against event times by "
                          "the time signal, not as keywords) lifts LongMemEval dev48 structured 0.927 -> 0.951 and "
                          "moves LoCoMo dev structured R@10 0.799 -> 0.798; applies only with time > 0")
    time_slack_days: float = _w(10.0, "design choice, not tuned: a memory ten days off a named time no longer matches")
    graph: float = _w(0.3, "design choice, not tuned: the dev files hold conversation turns, which the graph "
                      "signal leaves to the thread structure; with turns let in, tune_recall.py locomo --grid "
                      "graph=0,0.05,0.1,0.3 gives the same R@10 to the third decimal in both modes "
                      "(2026-12-08, docs/retrieval.md)")
    answer: float = _w(0.04, "tune_recall.py --grid answer=0,0.04,0.08,0.12 --by-conversation (locomo) and "
                       "--grid answer=0,0.02,...,0.12 (longmemeval): LoCoMo dev structured R@10/R@5 0.805/0.737 at 0, "
                       "0.807/0.737 at 0.04, 0.807/0.736 at 0.08 and 0.12, 0.805 at 0.16; plain R@10 0.735 -> 0.739, "
                       "0.741, 0.743; at 0.04 no conversation loses (conv-41 0.864 -> 0.857 from 0.08); LongMemEval "
                       "dev48 structured 0.951 at every value, plain 0.927 up to 0.04, 0.902 from 0.06. The weight "
                       "chosen leave-one-conversation-out from 0/0.02/0.04/0.08/0.12: held-out R@10 structured "
                       "0.805 -> 0.806, plain 0.735 -> 0.743")
    named: float = _w(0.08, "tune_recall.py locomo --grid named=0,0.04,0.08,0.12,0.16,0.24 --grid named_share="
                      "0.005,0.01,0.02 --by-conversation: LoCoMo dev structured R@10/R@5 0.807/0.737 at 0; at share "
                      "0.01 0.812/0.738, 0.814/0.740, 0.815/0.745, 0.814/0.744, 0.813/0.743 (0.04..0.24; multi-hop "
                      "0.519 -> 0.529, single-hop 0.898 -> 0.906 at 0.08); plain R@10 0.739 -> 0.738, 0.740, 0.740, "
                      "0.739, 0.734; at "
                      "0.08 every conversation gains or stays within 0.001 in both modes. Chosen leave-one-"
                      "conversation-out: held-out structured 0.807 -> 0.812, plain 0.739 -> 0.737. LongMemEval dev48 "
                      "0.951 / 0.927 at 0, 0.08, 0.12, 0.16. 'where' asks for a named thing too (a place): plain "
                      "0.740 -> 0.742 (conv-41 0.790 -> 0.796), structured unchanged; 'who' moved nothing")
    named_share: float = _w(0.01, "the named grid above: 0.005 / 0.01 / 0.02 give structured R@10 0.811 / 0.814 / "
                            "0.813 at named=0.08 (plain 0.743 / 0.740 / 0.741); a capitalised word in at most 1 in "
                            "100 visible memories names something specific")
    # -- salience and the rest of the rerank -------------------------------------------
    salience: float = _w(0.15, "design choice, not tuned: the dev files carry no access history")
    recency: float = _w(0.05, "design choice, not tuned: the dev files give no signal on write age")
    recency_half_life_days: float = _w(30.0, "design choice: a month")
    importance: float = _w(0.05, "design choice, not tuned: the dev files carry no importance")
    confidence: float = _w(0.05, "design choice, not tuned: the dev files carry no confidence")
    length: float = _w(0.2, "tune_recall.py --grid length=0,0.2,0.3 --grid length_pivot=5,10,20 (thread=0.7): "
                       "LoCoMo dev structured R@10/R@5 0.798/0.727 at 0; 0.801/0.728, 0.803/0.725, 0.803/0.727 at "
                       "0.2 (pivot 5/10/20); 0.804/0.724, 0.802/0.726, 0.801/0.728 at 0.3; plain R@10 0.720 -> "
                       "0.732/0.730/0.732 at 0.2. A document-length prior: the dev files' evidence turns hold "
                       "more distinct terms (median 17-19) than the turns ranked above them (13-14)")
    length_pivot: float = _w(5.0, "tune_recall.py, the length grid: 5 keeps LongMemEval dev48 plain at 0.927 "
                             "(0.902 at 10 and 20); structured is 0.951 at every pivot")
    # -- candidates ---------------------------------------------------------------------
    hybrid: bool = _w(True, "design choice: dense + keyword + structure; False = calibrated cosine only")
    candidate_multiplier: int = _w(4, "design choice: at least 4 x k dense candidates")
    dense_candidates: int = _w(50, "tune_recall.py --grid dense_candidates=50,100 (2026-12-01): LoCoMo dev structured "
                               "R@10/R@5 0.804/0.738 at both, plain R@10 0.734 / 0.732; LongMemEval dev48 0.951 at "
                               "40, 50, 100 (200 did not change R@10 earlier). 50 costs ~0.12 ms less per search")
    keyword_candidates: int = _w(75, "tune_recall.py --grid keyword_candidates=30,50,75,100 (2026-12-02): LoCoMo "
                                 "dev structured R@10/R@5 0.819/0.739, 0.820/0.740, 0.821/0.742, 0.821/0.742, plain "
                                 "R@10 0.738, 0.740, 0.742, 0.742; LongMemEval dev48 0.951 / 0.927 at each (200 did "
                                 "not change R@10 earlier). 75 costs ~0.2 ms less per search than 100 at 10K visible "
                                 "memories (benchmarks/eval_speed.py corpus)")
    neighbor_candidates: int = _w(30, "design choice: the thread neighbours of the best 30 join the candidates")
    thread_members: int = _w(10, "tune_recall.py locomo --grid thread_members=0,6,8,10,14,20,40 --grid "
                             "neighbor=0.5,0.7 --by-conversation: the members of the best thread (that of the "
                             "best candidate) nearest its best candidate join the candidates. LoCoMo dev "
                             "structured R@10/R@5 0.814/0.740 at 0, 0.815 at 6, 0.816/0.740 at 8-40 (neighbor="
                             "0.5; 0.818 -> 0.821 at neighbor=0.7); no conversation loses (conv-41 0.863 -> "
                             "0.870, conv-43 0.833 -> 0.838); plain unchanged (no threads); LongMemEval dev48 "
                             "0.951 / 0.927 unchanged")
    time_candidates: int = _w(50, f"{_TUNED}: 0 -> 50 added 0.003 R@10; a named time holding more is too broad")
    exact_dense_limit: int = _w(15000, "benchmarks/dense_search.py (one 2-core machine): exact search in the "
                                "cached vectors against a Qdrant Edge search filtered to the visible scope, p50 "
                                "0.10/0.45 ms at 2K, 0.28/0.78 at 5K, 0.76/0.96 at 10K, 1.57/1.16 at 20K "
                                "visible vectors; the limit sits near the crossing. Exact also finds every "
                                "true nearest neighbour, the index does not")
    # -- the keyword index and the vectors ----------------------------------------------
    bm25_k1: float = _w(1.2, "the Okapi BM25 standard value")
    bm25_b: float = _w(0.0, "tune_recall.py --grid bm25_b=0,0.3,0.5,0.75 (time_words=False): LoCoMo dev structured "
                       "R@10/R@5 0.798/0.727, 0.794/0.720, 0.788/0.711, 0.789/0.709, plain R@10 0.720, 0.711, "
                       "0.706, 0.700; LongMemEval dev48 structured 0.951 (0.927 at 0.3). With 0 a long memory is "
                       "not pushed down for its length, nor a short one lifted for a common word")
    context_mix: float = _w(0.35, f"{_TUNED}: grid 0/0.2/0.35/0.5/0.7")
    contextual_text: bool = _w(False, "design choice: no extra model work by default")

    #: the fields by the signal or stage they weigh (the sections above, as data)
    GROUPS: ClassVar[dict[str, tuple[str, ...]]] = {
        "relevance": ("dense_zero", "dense_full", "keyword", "neighbor", "min_relevance", "name_check",
                      "name_margin"),
        "structure": ("thread", "thread_centroid", "session", "session_centroid", "speaker", "time", "time_words",
                      "time_slack_days", "graph", "answer", "named", "named_share"),
        "rerank": ("salience", "recency", "recency_half_life_days", "importance", "confidence", "length",
                   "length_pivot"),
        "candidates": ("hybrid", "candidate_multiplier", "dense_candidates", "keyword_candidates",
                       "neighbor_candidates", "thread_members", "time_candidates", "exact_dense_limit"),
        "index": ("bm25_k1", "bm25_b", "context_mix", "contextual_text", "session_gap"),
    }  # fmt: skip

    def __post_init__(self) -> None:
        if not 0.0 <= self.dense_zero < self.dense_full <= 1.0:
            raise ConfigError("ranking.dense_zero", "must satisfy 0 <= dense_zero < dense_full <= 1")
        if not 0.0 <= self.min_relevance < 1.0:
            raise ConfigError("ranking.min_relevance", "must be in [0, 1)")
        if not self.length_pivot > 0:
            raise ConfigError("ranking.length_pivot", "must be > 0 (the distinct terms at which the prior is 0.5)")
        if not 0.0 < self.session_gap < math.inf:
            raise ConfigError("ranking.session_gap", "must be a number of seconds > 0")
        for name in ("keyword", "neighbor", "thread_centroid", "session_centroid", "named_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"ranking.{name}", "is a share on the 0..1 scale: must be in [0, 1]")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and (math.isnan(value) or value < 0):
                raise ConfigError(f"ranking.{f.name}", "must be a number >= 0")
            if isinstance(f.default, int) and not isinstance(f.default, bool) and not is_int(value, 0):
                raise ConfigError(f"ranking.{f.name}", "must be a whole number >= 0 (a count)")

    @classmethod
    def provenance(cls) -> dict[str, str]:
        """Where each default comes from."""
        return {f.name: f.metadata["provenance"] for f in fields(cls)}

    def group(self, name: str) -> dict[str, Any]:
        """The weights of one group of :attr:`GROUPS` (e.g. ``"structure"``) and their values."""
        if name not in self.GROUPS:
            raise ConfigError("ranking group", f"{name!r} is not one of {sorted(self.GROUPS)}")
        return {f: getattr(self, f) for f in self.GROUPS[name]}
