"""The raw model, as a user without memorybus runs it: the baseline of every speed ratio.

Fair by construction: the raw side does the work the bus does and no less.

- it encodes with the bus's encoder path (``Embedder`` in lean mode: the
  transformer, mean pooling and normalisation, the same vectors as
  ``SentenceTransformer.encode``); the ``SentenceTransformer.encode`` path is
  timed beside it and reported under its own label;
- a query is encoded and searched by brute force over exactly the vectors the
  bus may return for it: the memories of the caller's visible scope;
- texts are encoded in calls of up to :data:`CALL` texts, as a user encoding a
  corpus would (``SentenceTransformer.encode`` sorts a call's texts by length).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence

import numpy as np

from memorybus.evaluation.report import progress
from memorybus.latency import summary_ms

#: texts per encode call of the raw side
CALL = 1024
BATCH = 32


def percentiles(seconds: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / mean of durations, in milliseconds."""
    return summary_ms(seconds)


class RawModel:
    """The model in this process with ``threads`` torch threads, on both encoder paths:
    ``lean`` (the bus's) and ``st`` (``SentenceTransformer.encode``)."""

    def __init__(self, model_path: str, threads: int = 2) -> None:
        from memorybus.encoder.embedding import Embedder

        self.lean = Embedder(model_path, threads=threads, batch_size=BATCH, cache_size=0, lean=True)
        self.st = Embedder(model_path, threads=threads, batch_size=BATCH, cache_size=0, lean=False)
        for e in (self.lean, self.st):
            e.encode(["warm up the model"] * 4)
        self.dim = self.lean.dim

    def encode_all(self, texts: Sequence[str], path: str = "lean", desc: str = "", show: bool = False
                   ) -> tuple[np.ndarray, float]:  # fmt: skip
        """``(vectors, texts per second)`` over calls of up to :data:`CALL` texts."""
        model = self.lean if path == "lean" else self.st
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        t0 = time.perf_counter()
        for start in progress(range(0, len(texts), CALL), desc, (len(texts) + CALL - 1) // CALL, show and bool(desc)):
            out[start : start + CALL] = model.encode(list(texts[start : start + CALL]))
        return out, len(texts) / max(1e-9, time.perf_counter() - t0)

    def query(self, text: str, docs: np.ndarray, k: int = 10, path: str = "lean") -> tuple[np.ndarray, float]:
        """Encode one query and brute-force its top ``k`` over ``docs`` (the visible
        memories' vectors); ``(query vector, seconds)``."""
        model = self.lean if path == "lean" else self.st
        t0 = time.perf_counter()
        vec = model.encode([text])[0]
        scores = docs @ vec
        kk = min(k, len(scores))
        if kk:
            top = np.argpartition(-scores, kk - 1)[:kk]
            top[np.argsort(-scores[top])]
        return vec, time.perf_counter() - t0

    def close(self) -> None:
        del self.lean, self.st
        gc.collect()
