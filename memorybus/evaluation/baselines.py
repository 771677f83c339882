"""The baselines measured in the same run as memorybus, on identical memories.

- ``bm25``: Okapi BM25 (k1=1.2, b=0.75) over lower-cased word tokens (no
  stemming, no stop words), as in common BM25 packages;
- ``dense``: brute-force cosine over the raw model's embeddings of the memory
  texts (what mem0's open-source library returns without an LLM);
- ``rrf``: reciprocal-rank fusion of the two (k=60).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

_TOKEN = re.compile(r"\w+")

METHODS = ("bm25", "dense", "rrf")


def plain_tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25:
    """Okapi BM25 over a fixed corpus of documents."""

    def __init__(self, docs: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.tfs = [Counter(plain_tokens(d)) for d in docs]
        self.lens = np.array([sum(tf.values()) for tf in self.tfs], dtype=np.float64)
        self.avgdl = float(self.lens.mean()) if len(docs) else 1.0
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(len(self.tfs))
        norm = self.k1 * (1 - self.b + self.b * self.lens / max(self.avgdl, 1e-9))
        for term in set(plain_tokens(query)):
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


def rank_all(query: str, query_vec: np.ndarray, bm25: BM25, doc_vecs: np.ndarray) -> dict[str, list[int]]:
    """Every baseline's full ranking of the corpus for one query."""
    by_bm25 = order(bm25.scores(query))
    by_dense = order(doc_vecs @ query_vec)
    return {"bm25": by_bm25, "dense": by_dense, "rrf": rrf(by_bm25, by_dense)}
