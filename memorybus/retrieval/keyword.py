"""An incremental BM25 keyword index, partitioned by scope key.

Each scope key has its own inverted index (term -> postings), so a search
touches only the partitions of the caller's visible scopes: its cost follows
the size of what the caller can see, not the size of the shard. Postings are
append-only ``array`` buffers read by numpy without copying; a removed or
replaced document is marked dead and its postings are compacted away when a
partition holds more dead than live entries; dead document slots are reclaimed
(all slots renumbered) when they outnumber the live ones, so re-indexing one
document many times does not grow the index.

Scores are Okapi BM25 over the union of the visible partitions (document
frequencies and average length summed over them), so results do not depend on
how scopes are spread over shards.

Guarantees: ``add``/``remove`` cost O(terms of the document) (amortised);
``search`` is exact BM25 over live documents; the index is derived and
rebuilt from the store.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(slots=True)
class _Postings:
    slots: array = field(default_factory=lambda: array("i"))
    tfs: array = field(default_factory=lambda: array("f"))


@dataclass(slots=True)
class _Partition:
    postings: dict[str, _Postings] = field(default_factory=dict)
    df: Counter[str] = field(default_factory=Counter)
    docs: int = 0
    total_len: int = 0
    dead: int = 0
    entries: int = 0


class KeywordIndex:
    """BM25 (``k1``, ``b``) over token lists, one partition per scope key."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self.reset()

    def reset(self) -> None:
        self._parts: dict[str, _Partition] = {}
        self._slot_of: dict[str, int] = {}
        self._ids: list[str] = []
        self._scope: list[str] = []
        self._terms: list[Counter[str] | None] = []
        self._len = array("f")
        self._distinct = array("f")  # distinct terms of each document slot
        self._alive = bytearray()

    def __len__(self) -> int:
        return len(self._slot_of)

    def slots(self) -> int:
        """Document slots held, live or dead (bounded by twice the live ones, plus 64)."""
        return len(self._ids)

    # ------------------------------------------------------------------ writes
    def add(self, doc_id: str, scope_key: str, terms: Sequence[str]) -> None:
        """Index ``terms`` as document ``doc_id`` (replacing an earlier version)."""
        if doc_id in self._slot_of:
            self.remove(doc_id)
        counts = Counter(terms)
        slot = len(self._ids)
        self._ids.append(doc_id)
        self._scope.append(scope_key)
        self._terms.append(counts)
        self._len.append(float(len(terms)))
        self._distinct.append(float(len(counts)))
        self._alive.append(1)
        self._slot_of[doc_id] = slot
        part = self._parts.get(scope_key)
        if part is None:
            part = self._parts[scope_key] = _Partition()
        part.docs += 1
        part.total_len += len(terms)
        for term, tf in counts.items():
            post = part.postings.get(term)
            if post is None:
                post = part.postings[term] = _Postings()
            post.slots.append(slot)
            post.tfs.append(float(tf))
            part.df[term] += 1
            part.entries += 1

    def remove(self, doc_id: str) -> bool:
        """Forget ``doc_id``; False if it was not indexed."""
        slot = self._slot_of.pop(doc_id, None)
        if slot is None:
            return False
        counts = self._terms[slot]
        self._terms[slot] = None
        self._alive[slot] = 0
        part = self._parts[self._scope[slot]]
        part.docs -= 1
        part.total_len -= int(self._len[slot])
        if counts:
            for term in counts:
                part.df[term] -= 1
                if part.df[term] <= 0:
                    del part.df[term]
                part.dead += 1
        if part.dead > max(64, part.entries - part.dead):
            self._compact(part)
        if len(self._ids) - len(self._slot_of) > max(64, len(self._slot_of)):
            self._reclaim_slots()
        return True

    def _reclaim_slots(self) -> None:
        """Renumber the live documents ``0..n-1`` and drop every dead slot and posting."""
        alive = np.frombuffer(self._alive, dtype=np.bool_)
        keep = np.flatnonzero(alive)
        new_of = np.full(len(self._ids), -1, dtype=np.int32)
        new_of[keep] = np.arange(len(keep), dtype=np.int32)
        for part in self._parts.values():
            for term in list(part.postings):
                post = part.postings[term]
                slots = np.frombuffer(post.slots, dtype=np.int32)
                live = alive[slots]
                if not live.any():
                    del part.postings[term]
                    continue
                post.slots = array("i", new_of[slots[live]].tobytes())
                post.tfs = array("f", np.frombuffer(post.tfs, dtype=np.float32)[live].tobytes())
            part.entries -= part.dead
            part.dead = 0
        idx = keep.tolist()
        self._ids = [self._ids[i] for i in idx]
        self._scope = [self._scope[i] for i in idx]
        self._terms = [self._terms[i] for i in idx]
        self._len = array("f", np.frombuffer(self._len, dtype=np.float32)[keep].tobytes())
        self._distinct = array("f", np.frombuffer(self._distinct, dtype=np.float32)[keep].tobytes())
        self._alive = bytearray(len(idx)) if not idx else bytearray(b"\x01" * len(idx))
        self._slot_of = {doc_id: i for i, doc_id in enumerate(self._ids)}

    def _compact(self, part: _Partition) -> None:
        for term in list(part.postings):
            post = part.postings[term]
            slots = np.frombuffer(post.slots, dtype=np.int32)
            keep = np.frombuffer(self._alive, dtype=np.bool_)[slots]
            if not keep.any():
                del part.postings[term]
                continue
            post.slots = array("i", slots[keep].tobytes())
            post.tfs = array("f", np.frombuffer(post.tfs, dtype=np.float32)[keep].tobytes())
        part.entries -= part.dead
        part.dead = 0

    # ------------------------------------------------------------------- reads
    def distinct_terms(self, doc_ids: Sequence[str]) -> np.ndarray:
        """How many distinct terms each of ``doc_ids`` holds (0 for one not indexed)."""
        get = self._slot_of.get
        slots = np.array([get(i, -1) for i in doc_ids], dtype=np.int64)
        out = np.zeros(len(slots))
        known = slots >= 0
        if known.any():
            out[known] = np.frombuffer(self._distinct, dtype=np.float32)[slots[known]]
        return out

    def holds(self, doc_ids: Sequence[str], terms: Iterable[str]) -> np.ndarray:
        """Whether each of ``doc_ids`` holds any of ``terms`` (False for one not indexed)."""
        wanted = frozenset(terms)
        get, docs = self._slot_of.get, self._terms
        out = np.zeros(len(doc_ids), dtype=np.bool_)
        if not wanted:
            return out
        for x, doc_id in enumerate(doc_ids):
            slot = get(doc_id)
            counts = docs[slot] if slot is not None else None
            out[x] = bool(counts) and not wanted.isdisjoint(counts)  # type: ignore[arg-type]
        return out

    def weight(self, terms: Iterable[str], scope_keys: Sequence[str]) -> float:
        """The query's full keyword weight over the live documents of ``scope_keys``: the
        sum of its distinct terms' idf (a term no document holds counts with the idf of
        a term in none). A document of average length holding each term once scores
        about this much, so ``bm25 / weight`` reads as the share of the query matched."""
        parts = [self._parts[s] for s in dict.fromkeys(scope_keys) if s in self._parts]
        n_docs = sum(p.docs for p in parts)
        total = 0.0
        for term in dict.fromkeys(terms):
            df = sum(p.df.get(term, 0) for p in parts)
            total += math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
        return total

    def doc_share(self, terms: Sequence[str], scope_keys: Sequence[str]) -> np.ndarray:
        """For each of ``terms``, the share of the live documents of ``scope_keys`` that
        hold it (0 when there are none)."""
        parts = [self._parts[s] for s in dict.fromkeys(scope_keys) if s in self._parts]
        n_docs = sum(p.docs for p in parts)
        if n_docs <= 0 or not terms:
            return np.zeros(len(terms))
        return np.array([sum(p.df.get(t, 0) for p in parts) for t in terms], dtype=np.float64) / n_docs

    def search(self, terms: Iterable[str], scope_keys: Sequence[str], limit: int) -> list[tuple[str, float]]:
        """Top ``limit`` ``(id, bm25)`` among live documents of ``scope_keys`` (score > 0)."""
        return self.match(terms, scope_keys, limit).top

    def match(self, terms: Iterable[str], scope_keys: Sequence[str], limit: int) -> KeywordMatches:
        """The BM25 of every live document of ``scope_keys`` that holds a query term: the
        best ``limit`` as :attr:`KeywordMatches.top`, and :meth:`KeywordMatches.bm25` for
        any other document (the scores are computed for all of them anyway)."""
        none = KeywordMatches([], np.zeros(0, dtype=np.int64), np.zeros(0), self._slot_of)
        parts = [self._parts[s] for s in dict.fromkeys(scope_keys) if s in self._parts]
        unique = list(dict.fromkeys(terms))
        if not parts or not unique or limit <= 0:
            return none
        n_docs = sum(p.docs for p in parts)
        if n_docs <= 0:
            return none
        avgdl = max(1e-9, sum(p.total_len for p in parts) / n_docs)
        lengths = np.frombuffer(self._len, dtype=np.float32)
        all_slots: list[np.ndarray] = []
        all_scores: list[np.ndarray] = []
        for term in unique:
            df = sum(p.df.get(term, 0) for p in parts)
            if df <= 0:
                continue
            idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
            for p in parts:
                post = p.postings.get(term)
                if post is None or not len(post.slots):
                    continue
                slots = np.frombuffer(post.slots, dtype=np.int32)
                tfs = np.frombuffer(post.tfs, dtype=np.float32)
                norm = self.k1 * (1.0 - self.b + self.b * lengths[slots] / avgdl)
                all_slots.append(slots)
                all_scores.append(idf * tfs * (self.k1 + 1.0) / (tfs + norm))
        if not all_slots:
            return none
        slots_all, scores_all = np.concatenate(all_slots), np.concatenate(all_scores)
        if 4 * len(slots_all) >= len(self._ids):  # many postings: sum into one row per slot (no sort)
            per_slot = np.bincount(slots_all, weights=scores_all, minlength=len(self._ids))
            uniq = np.flatnonzero(per_slot)  # a held term always scores > 0
            summed = per_slot[uniq]
        else:
            uniq, inverse = np.unique(slots_all, return_inverse=True)
            summed = np.bincount(inverse, weights=scores_all)
        live = np.frombuffer(self._alive, dtype=np.bool_)[uniq]
        uniq, summed = uniq[live], summed[live]  # uniq stays sorted: KeywordMatches looks slots up in it
        top_slots, top_scores = uniq, summed
        if len(uniq) > limit:
            top = np.argpartition(-summed, limit - 1)[:limit]
            top_slots, top_scores = uniq[top], summed[top]
        order = np.lexsort((top_slots, -top_scores))
        ids = self._ids
        best = [(ids[slot], score) for slot, score in zip(top_slots[order].tolist(), top_scores[order].tolist(),
                                                          strict=True)]
        return KeywordMatches(best, uniq, summed, self._slot_of)


class KeywordMatches:
    """One keyword search: ``top``, the best ``(id, bm25)`` best first, and the BM25 of every
    other document that matched (:meth:`bm25`). Read it before the index next changes."""

    __slots__ = ("_scores", "_slot_of", "_slots", "top")

    def __init__(self, top: list[tuple[str, float]], slots: np.ndarray, scores: np.ndarray,
                 slot_of: dict[str, int]) -> None:  # fmt: skip
        self.top = top
        self._slots, self._scores, self._slot_of = slots, scores, slot_of

    def bm25(self, doc_ids: Sequence[str]) -> np.ndarray:
        """The BM25 of each of ``doc_ids`` for the query (0 for one that holds no query term)."""
        out = np.zeros(len(doc_ids))
        if not len(self._slots) or not doc_ids:
            return out
        get = self._slot_of.get
        want = np.array([get(i, -1) for i in doc_ids], dtype=np.int64)
        at = np.minimum(np.searchsorted(self._slots, want), len(self._slots) - 1)
        hit = self._slots[at] == want
        out[hit] = self._scores[at[hit]]
        return out
