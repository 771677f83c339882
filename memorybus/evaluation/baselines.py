"""The baselines measured in the same run as memorybus, on identical memories.

- ``bm25_en``: Okapi BM25 (k1=1.2, b=0.75) with an English analyzer — Qdrant's
  BM25 tokenizer for English (lower case, NLTK English stop words, Snowball
  stemmer), as a user of a search engine gets it, and the analyzer of recall's
  own keyword index. The main keyword baseline;
- ``bm25``: the same BM25 over plain lower-cased word tokens (no stemming, no
  stop words), as in common BM25 packages;
- ``dense``: brute-force cosine over the model's embeddings of the memory texts,
  from the same encoder path as the bus (what mem0's open-source library
  returns without an LLM);
- ``rrf``: reciprocal-rank fusion (k=60) of ``bm25_en`` and ``dense``;
- further dense rankings over other texts of the same memories, each under its own
  name (``Corpus(..., alt_vectors={name: vectors})``): the LoCoMo run adds
  ``dense_dated``, the turns embedded as the dataset's own retrieval code embeds
  them (the session date and the speaker's words; see
  :attr:`memorybus.evaluation.locomo.Turn.dataset_text`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Hashable, Sequence

import numpy as np

from memorybus.retrieval.text import tokens

_TOKEN = re.compile(r"\w+")

#: every baseline, the main ones first
BASELINES = ("bm25_en", "bm25", "dense", "rrf")
METHODS = BASELINES


def plain_tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def english_tokens(text: str) -> list[str]:
    """Qdrant's English analyzer (NLTK English stop words dropped, Snowball stems), as token
    ids, each repeated by its count in ``text`` (the analyzer recall's keyword index uses)."""
    return tokens(text)


class BM25:
    """Okapi BM25 over a fixed corpus of documents, with a pluggable analyzer."""

    def __init__(
        self,
        docs: Sequence[str],
        k1: float = 1.2,
        b: float = 0.75,
        analyzer: Callable[[str], Sequence[Hashable]] = plain_tokens,
    ) -> None:
        self.k1, self.b = k1, b
        self.analyzer = analyzer
        self.tfs = [Counter(analyzer(d)) for d in docs]
        self.lens = np.array([sum(tf.values()) for tf in self.tfs], dtype=np.float64)
        self.avgdl = float(self.lens.mean()) if len(docs) else 1.0
        df: Counter[Hashable] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(len(self.tfs))
        norm = self.k1 * (1 - self.b + self.b * self.lens / max(self.avgdl, 1e-9))
        for term in set(self.analyzer(query)):
            idf = self.idf.get(term)
            if idf is None:
                continue
            tf = np.array([d.get(term, 0) for d in self.tfs], dtype=np.float64)
            out += idf * tf * (self.k1 + 1) / (tf + norm)
        return out


def order(scores: np.ndarray) -> list[int]:
    """Indices, best score first (ties: lower index first)."""
    return [int(i) for i in np.lexsort((np.arange(len(scores)), -scores))]


def rrf(*rankings: Sequence[int], k: int = 60) -> list[int]:
    fused: dict[int, float] = {}
    for ranking in rankings:
        for r, i in enumerate(ranking):
            fused[i] = fused.get(i, 0.0) + 1.0 / (k + r + 1)
    return sorted(fused, key=lambda i: (-fused[i], i))


class Corpus:
    """One corpus (texts and their vectors) ranked by every baseline."""

    def __init__(self, texts: Sequence[str], vectors: np.ndarray,
                 alt_vectors: dict[str, np.ndarray] | None = None) -> None:  # fmt: skip
        self.bm25_en = BM25(texts, analyzer=english_tokens)
        self.bm25 = BM25(texts)
        self.vectors = np.asarray(vectors, dtype=np.float32)
        self.alt = {name: np.asarray(v, dtype=np.float32) for name, v in (alt_vectors or {}).items()}
        for name, v in self.alt.items():
            if v.shape != self.vectors.shape:
                raise ValueError(f"{name}: {v.shape} vectors for {self.vectors.shape} memories")

    def rank_all(self, query: str, query_vec: np.ndarray) -> dict[str, list[int]]:
        """Every baseline's full ranking of the corpus for one query."""
        q = np.asarray(query_vec, dtype=np.float32)
        by_en = order(self.bm25_en.scores(query))
        by_dense = order(self.vectors @ q)
        return {"bm25_en": by_en, "bm25": order(self.bm25.scores(query)), "dense": by_dense,
                "rrf": rrf(by_en, by_dense)} | {name: order(v @ q) for name, v in self.alt.items()}  # fmt: skip
