"""Path vectors of the LangGraph store when its index config names an ``embed``.

LangGraph's store contract for ``index={"dims", "embed", "fields"}``: every text found at
an indexed path of a value (a path matching several texts gives one text each) is
embedded on its own, and a query search scores an item by the best cosine similarity
between the query's vector and any of its path vectors (max pooling); items with no
vector (``index=False``, or no text at the paths) are not scored: they come after every
scored item, with score ``None``.

Vectors travel with the item's memory, packed as little-endian float32 bytes (``dims``
per vector), so every store on the bus with the same embedder scores alike. Pure
functions: no I/O, no bus.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from langgraph.store.base import get_text_at_path, tokenize_path

from memorybus.errors import InvalidRequest
from memorybus.integrations.lgmatch import ParsedItem


def path_texts(value: dict[str, Any], paths: Sequence[str]) -> list[str]:
    """The texts to embed for ``value``: one per text found at each path, in path order
    (``"$"`` is the whole value as JSON); blank texts are left out."""
    texts: list[str] = []
    for path in paths:
        field = path if path == "$" else tokenize_path(path)  # "$" is the whole value, not a key
        texts += [t for t in get_text_at_path(value, field) if t.strip()]
    return texts


def pack(vectors: Sequence[Sequence[float]], dims: int | None) -> tuple[bytes, int]:
    """``(bytes, dims)`` of the embedder's vectors; raises InvalidRequest (nothing is
    written) when they are not one finite row of the same width per text, or not of
    the configured ``dims``."""
    try:
        arr = np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidRequest("index", f"the embedder returned something that is not vectors: {exc}") from None
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise InvalidRequest("index", f"the embedder returned vectors of shape {arr.shape}")
    if dims is not None and arr.shape[1] != dims:
        raise InvalidRequest("index", f"the embedder returned {arr.shape[1]} dimensions, the index says {dims}")
    if not np.isfinite(arr).all():
        raise InvalidRequest("index", "the embedder returned a vector that is not finite")
    return arr.astype("<f4").tobytes(), int(arr.shape[1])


def unpack(blob: bytes, dims: int) -> np.ndarray:
    """The ``(n, dims)`` float32 matrix packed by :func:`pack`."""
    return np.frombuffer(blob, dtype="<f4").reshape(-1, dims)


def best_score(query: np.ndarray, vectors: np.ndarray) -> float | None:
    """The best cosine similarity of ``query`` with any row of ``vectors`` (a zero vector
    scores 0); None when the widths differ (an item embedded by another embedder)."""
    if vectors.shape[1] != query.shape[0]:
        return None
    norms = np.linalg.norm(vectors, axis=1) * float(np.linalg.norm(query))
    dots = vectors.astype(np.float64) @ query
    scores = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
    return float(scores.max())


def item_score(query: np.ndarray, item: ParsedItem | str) -> float | None:
    """The score of a parsed item (:func:`best_score` of its path vectors); None when it
    has none or is not an item."""
    if isinstance(item, str) or item.vectors is None or item.dims is None:
        return None
    return best_score(query, unpack(item.vectors, item.dims))


def query_vector(vector: Sequence[float]) -> np.ndarray:
    """The query's vector as float64; InvalidRequest when it is not one finite row."""
    arr = np.asarray(vector, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0 or not np.isfinite(arr).all():
        raise InvalidRequest("query", f"the embedder returned a query vector of shape {arr.shape}")
    return arr


def rank(scored: Sequence[tuple[float | None, Any]]) -> list[tuple[float | None, Any]]:
    """Scored entries best first (ties keep their order), then the unscored in order."""
    order = sorted((e for e in scored if e[0] is not None), key=lambda e: -float(e[0]))  # type: ignore[arg-type]
    return order + [e for e in scored if e[0] is None]
