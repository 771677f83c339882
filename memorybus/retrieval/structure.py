"""The derived read-side structure of a shard: keyword index, sessions, pinned facts.

:class:`RecallIndex` mirrors the shard's committed memories (the shard calls
:meth:`RecallIndex.add` / :meth:`RecallIndex.remove` wherever it mirrors a
write, and rebuilds it from the store on start). It holds

- the BM25 :class:`~memorybus.retrieval.keyword.KeywordIndex` over each
  memory's *index text* (content without a leading date stamp);
- sessions: the memories of one conversation session in event order, for
  session-aware ranking, neighbour expansion and contextual embeddings. A
  memory's session is its scope's ``session`` or, for memories kept at a wider
  scope, ``structured["session"]``; its order is ``(valid_from,
  structured["turn"], created_at, id)``;
- pinned memories (tag ``pinned`` or ``core``): the core memory of
  :meth:`~memorybus.client.MemoryBus.context_for`.

Everything is in memory and updated incrementally, O(terms) per write.
"""

from __future__ import annotations

import bisect
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from memorybus.model import MemoryKind, MemoryNode
from memorybus.retrieval.keyword import KeywordIndex
from memorybus.retrieval.text import split_time_prefix, tokens

PINNED_TAGS = frozenset({"pinned", "core"})

OrderKey = tuple[float, float, float, str]


def index_text(node: MemoryNode) -> str:
    """The text recall indexes and embeds: the content without a leading date stamp."""
    _, rest = split_time_prefix(node.content)
    return rest if rest.strip() else node.content


def session_of(node: MemoryNode) -> str | None:
    """The session a memory belongs to (scoped by its scope key), or None."""
    name = node.scope.session or node.structured.get("session")
    if name is None or name == "":
        return None
    return f"{node.scope.key}#{name}"


def order_key(node: MemoryNode) -> OrderKey:
    turn = node.structured.get("turn", 0)
    turn_f = float(turn) if isinstance(turn, int | float) and not isinstance(turn, bool) else 0.0
    return (float(node.valid_from), turn_f, float(node.created_at), node.id)


def speaker_of(node: MemoryNode) -> str:
    """Who said or wrote it: ``structured["speaker"]`` or the memory's ``source``."""
    speaker = node.structured.get("speaker")
    return speaker if isinstance(speaker, str) and speaker else node.source


class VectorCache:
    """Each memory's (contextual) vector, partitioned by scope key.

    It lets recall score any candidate exactly (keyword-only candidates and
    session neighbours get their true cosine, not a floor) and search small
    visible sets exactly without an index round trip. 1.5 KB per memory with
    MiniLM (154 MB per 100K memories).
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._mat = np.zeros((0, 0), dtype=np.float32)
        self._n = 0
        self._slot: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._parts: dict[str, array] = {}
        self._live: dict[str, int] = {}
        self._scope_of: list[str] = []
        self._dead = 0

    def __len__(self) -> int:
        return len(self._slot)

    def rows(self) -> int:
        """Rows in use, live or dead (bounded by twice the live ones, plus 64)."""
        return self._n

    def add(self, memory_id: str, scope_key: str, vector: np.ndarray) -> None:
        """Cache ``memory_id``'s vector; a new vector of a cached memory replaces its row."""
        vec = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self._mat.shape[1] not in (0, vec.shape[0]):
            return
        slot = self._slot.get(memory_id)
        if slot is not None and self._scope_of[slot] == scope_key:
            self._mat[slot] = vec  # re-indexed: the same row, no new one
            return
        self.remove(memory_id)
        if self._dead > max(64, len(self._slot)):
            self._compact()
        if self._n >= self._mat.shape[0]:
            grown = np.zeros((max(64, 2 * self._mat.shape[0]), vec.shape[0]), dtype=np.float32)
            if self._n:
                grown[: self._n] = self._mat[: self._n]
            self._mat = grown
        slot = self._n
        self._n += 1
        self._mat[slot] = vec
        self._slot[memory_id] = slot
        self._ids.append(memory_id)
        self._scope_of.append(scope_key)
        self._parts.setdefault(scope_key, array("i")).append(slot)
        self._live[scope_key] = self._live.get(scope_key, 0) + 1

    def remove(self, memory_id: str) -> None:
        slot = self._slot.pop(memory_id, None)
        if slot is None:
            return
        self._ids[slot] = None
        self._dead += 1
        scope = self._scope_of[slot]
        self._live[scope] -= 1
        part = self._parts[scope]
        if len(part) > 64 and self._live[scope] * 2 < len(part):
            self._parts[scope] = array("i", (s for s in part if self._ids[s] is not None))

    def _compact(self) -> None:
        """Drop the rows of removed memories: renumber the live ones ``0..n-1``."""
        live = [(memory_id, slot) for memory_id, slot in self._slot.items()]
        live.sort(key=lambda x: x[1])
        old = np.fromiter((s for _, s in live), dtype=np.int64, count=len(live))
        rows = max(64, 2 * len(live))
        mat = np.zeros((rows, self._mat.shape[1]), dtype=np.float32)
        mat[: len(live)] = self._mat[old]
        scope_of = [self._scope_of[s] for _, s in live]
        self._mat, self._n, self._dead = mat, len(live), 0
        self._slot = {memory_id: i for i, (memory_id, _) in enumerate(live)}
        self._ids = [memory_id for memory_id, _ in live]
        self._scope_of = scope_of
        self._parts = {}
        for i, scope in enumerate(scope_of):
            self._parts.setdefault(scope, array("i")).append(i)

    def has(self, memory_id: str) -> bool:
        return memory_id in self._slot

    def vector(self, memory_id: str) -> np.ndarray | None:
        slot = self._slot.get(memory_id)
        return None if slot is None else self._mat[slot].copy()

    def live_count(self, scope_keys: Sequence[str]) -> int:
        return sum(self._live.get(s, 0) for s in dict.fromkeys(scope_keys))

    def scores(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Cosine (dot product of unit vectors) of ``vector`` with each known id."""
        known = [(i, self._slot[i]) for i in ids if i in self._slot]
        if not known:
            return {}
        slots = np.fromiter((s for _, s in known), dtype=np.int64, count=len(known))
        sims = self._mat[slots] @ np.asarray(vector, dtype=np.float32)
        return {i: float(v) for (i, _), v in zip(known, sims, strict=True)}

    def search(self, vector: np.ndarray, scope_keys: Sequence[str], limit: int) -> list[tuple[str, float]]:
        """Exact top ``limit`` ``(id, cosine)`` over the live vectors of ``scope_keys``."""
        parts = [np.frombuffer(self._parts[s], dtype=np.int32) for s in dict.fromkeys(scope_keys) if s in self._parts]
        if not parts or limit <= 0:
            return []
        slots = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if self._dead:  # removed slots keep their rows until compaction: never rank them
            ids = self._ids
            slots = slots[np.fromiter((ids[x] is not None for x in slots.tolist()), dtype=bool, count=len(slots))]
        sims = self._mat[slots] @ np.asarray(vector, dtype=np.float32)
        if len(slots) > limit:
            top = np.argpartition(-sims, limit - 1)[:limit]
            slots, sims = slots[top], sims[top]
        out = []
        for s, v in zip(slots.tolist(), sims.tolist(), strict=True):
            memory_id = self._ids[s]
            if memory_id is not None:
                out.append((memory_id, float(v)))
        out.sort(key=lambda x: (-x[1], x[0]))
        return out


class RecallIndex:
    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.keywords = KeywordIndex(k1, b)
        self.vectors = VectorCache()
        self._sessions: dict[str, list[OrderKey]] = {}
        self._session_of: dict[str, tuple[str, OrderKey]] = {}
        self.pinned: set[str] = set()
        self._speakers: dict[str, Counter[str]] = {}
        self._speaker_of: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._adjacent: dict[str, tuple[str | None, str | None]] = {}
        self._centroid: dict[str, np.ndarray] = {}  # session -> sum of its members' vectors
        self._facts: Counter[str] = Counter()  # scope key -> memories that are not episodic
        self._fact_scope: dict[str, str] = {}

    def reset(self) -> None:
        self.keywords.reset()
        self.vectors.reset()
        self._sessions.clear()
        self._session_of.clear()
        self.pinned.clear()
        self._speakers.clear()
        self._speaker_of.clear()
        self._adjacent.clear()
        self._centroid.clear()
        self._facts.clear()
        self._fact_scope.clear()

    # ------------------------------------------------------------------ writes
    def add(self, node: MemoryNode) -> None:
        """Index a committed memory (a new one or a new version; a node without its
        embedding keeps the vector already cached for its id)."""
        self._remove(node.id, keep_vector=node.embedding is None)
        self.keywords.add(node.id, node.scope.key, tokens(index_text(node)))
        if node.embedding is not None:
            self.vectors.add(node.id, node.scope.key, node.embedding)
        session = session_of(node)
        vec = self.vectors.vector(node.id) if session is not None else None
        if session is not None and vec is not None:
            total = self._centroid.get(session)
            self._centroid[session] = vec if total is None else total + vec
        if session is not None:
            key = order_key(node)
            members = self._sessions.setdefault(session, [])
            i = bisect.bisect_left(members, key)
            members.insert(i, key)
            self._session_of[node.id] = (session, key)
            prev = members[i - 1][3] if i > 0 else None
            nxt = members[i + 1][3] if i + 1 < len(members) else None
            self._adjacent[node.id] = (prev, nxt)
            if prev is not None:
                self._adjacent[prev] = (self._adjacent[prev][0], node.id)
            if nxt is not None:
                self._adjacent[nxt] = (node.id, self._adjacent[nxt][1])
        if PINNED_TAGS.intersection(node.tags):
            self.pinned.add(node.id)
        if not _episodic(node):
            self._facts[node.scope.key] += 1
            self._fact_scope[node.id] = node.scope.key
        who = tuple(tokens(speaker_of(node)))
        if who:
            self._speakers.setdefault(node.scope.key, Counter()).update(who)
            self._speaker_of[node.id] = (node.scope.key, who)

    def remove(self, memory_id: str) -> None:
        self._remove(memory_id, keep_vector=False)

    def _remove(self, memory_id: str, *, keep_vector: bool) -> None:
        fact_scope = self._fact_scope.pop(memory_id, None)
        if fact_scope is not None:
            self._facts[fact_scope] -= 1
            if self._facts[fact_scope] <= 0:
                del self._facts[fact_scope]
        spoke = self._speaker_of.pop(memory_id, None)
        if spoke is not None:
            counts = self._speakers[spoke[0]]
            counts.subtract(spoke[1])
            for t in spoke[1]:
                if counts[t] <= 0:
                    del counts[t]
        entry = self._session_of.get(memory_id)
        if entry is not None and entry[0] in self._centroid:
            vec = self.vectors.vector(memory_id)
            if vec is not None:
                self._centroid[entry[0]] = self._centroid[entry[0]] - vec
        if not keep_vector:
            self.vectors.remove(memory_id)
        self.keywords.remove(memory_id)
        self.pinned.discard(memory_id)
        entry = self._session_of.pop(memory_id, None)
        if entry is not None:
            session, key = entry
            members = self._sessions[session]
            i = bisect.bisect_left(members, key)
            if i < len(members) and members[i] == key:
                members.pop(i)
            if not members:
                del self._sessions[session]
                self._centroid.pop(session, None)
            prev, nxt = self._adjacent.pop(memory_id, (None, None))
            if prev is not None:
                self._adjacent[prev] = (self._adjacent[prev][0], nxt)
            if nxt is not None:
                self._adjacent[nxt] = (prev, self._adjacent[nxt][1])

    # ------------------------------------------------------------------- reads
    def has_facts(self, scope_keys: Sequence[str]) -> bool:
        """Whether any memory of ``scope_keys`` is not episodic (semantic, procedural, working)."""
        return any(self._facts.get(s, 0) > 0 for s in scope_keys)

    def speaker_terms(self, scope_keys: Sequence[str]) -> set[str]:
        """Keyword tokens of the speakers/sources of the memories in ``scope_keys``."""
        out: set[str] = set()
        for s in scope_keys:
            out.update(self._speakers.get(s, ()))
        return out

    def adjacent(self, memory_id: str) -> tuple[str, ...]:
        """The memories just before and just after ``memory_id`` in its session."""
        prev, nxt = self._adjacent.get(memory_id, (None, None))
        if prev is None:
            return () if nxt is None else (nxt,)
        return (prev,) if nxt is None else (prev, nxt)

    def session_scores(self, vector: np.ndarray, sessions: Sequence[str]) -> dict[str, float]:
        """Cosine of ``vector`` with each session's centroid (the mean of its members' vectors):
        how well the session as a whole answers the query."""
        known = [x for x in dict.fromkeys(sessions) if x in self._centroid]
        if not known:
            return {}
        mat = np.stack([self._centroid[x] for x in known])
        norms = np.linalg.norm(mat, axis=1)
        sims = (mat @ np.asarray(vector, dtype=np.float32)) / np.maximum(norms, 1e-9)
        return {x: float(v) for x, v in zip(known, sims, strict=True)}

    def session(self, memory_id: str) -> str | None:
        entry = self._session_of.get(memory_id)
        return entry[0] if entry else None

    def neighbors(self, memory_id: str, before: int = 1, after: int = 1) -> list[str]:
        """Ids of up to ``before`` earlier and ``after`` later memories of the same session,
        nearest first (alternating: previous, next, ...)."""
        if before == 1 and after == 1:
            prev, nxt = self._adjacent.get(memory_id, (None, None))
            return [j for j in (prev, nxt) if j is not None]
        entry = self._session_of.get(memory_id)
        if entry is None:
            return []
        session, key = entry
        members = self._sessions[session]
        i = bisect.bisect_left(members, key)
        out: list[str] = []
        for d in range(1, max(before, after) + 1):
            if d <= before and i - d >= 0:
                out.append(members[i - d][3])
            if d <= after and i + d < len(members):
                out.append(members[i + d][3])
        return out

    def predecessor_of(self, node: MemoryNode) -> str | None:
        """The stored memory just before ``node`` in its session (``node`` need not be stored)."""
        session = session_of(node)
        if session is None or session not in self._sessions:
            return None
        members = self._sessions[session]
        i = bisect.bisect_left(members, order_key(node))
        while i > 0:
            i -= 1
            if members[i][3] != node.id:
                return members[i][3]
        return None

    def contextualize(
        self,
        nodes: Sequence[object],
        vectors: np.ndarray | None,
        rows: Sequence[int] | None,
        mix: float,
        stored_vector: Callable[[str], np.ndarray | None],
    ) -> tuple[np.ndarray | None, Sequence[int] | None]:
        """Contextual embeddings of new episodic memories: each vector plus ``mix`` times
        its session predecessor's (contextual) vector, re-normalised.

        The predecessor is the previous memory of the same session in this batch
        or, for the first of a session, the stored one before it
        (``stored_vector(id)``). No model work: the date stamp is kept out of
        the vector by embedding :func:`index_text`, and the predecessor's
        meaning comes in through its vector. Returns new ``(vectors, rows)``;
        the inputs are not changed.
        """
        if vectors is None or mix <= 0 or not nodes:
            return vectors, rows
        vecs = np.asarray(vectors)
        if vecs.ndim != 2:
            return vectors, rows
        rows = list(range(len(nodes))) if rows is None else list(rows)
        if len(rows) != len(nodes) or max(rows, default=0) >= len(vecs):
            return vectors, rows  # the shard reports the mismatch
        out = np.asarray(vecs[rows], dtype=np.float32).copy()
        order = sorted(
            (i for i, n in enumerate(nodes) if isinstance(n, MemoryNode) and _episodic(n)),
            key=lambda i: order_key(nodes[i]),  # type: ignore[arg-type]
        )
        last: dict[str, int] = {}
        for i in order:
            node = nodes[i]
            assert isinstance(node, MemoryNode)
            session = session_of(node)
            if session is None:
                continue
            prev: np.ndarray | None = None
            if session in last:
                prev = out[last[session]]
            else:
                pid = self.predecessor_of(node)
                if pid is not None:
                    prev = stored_vector(pid)
            last[session] = i
            if prev is None or prev.shape != out[i].shape or not np.all(np.isfinite(prev)):
                continue
            mixed = out[i] + mix * prev
            norm = float(np.linalg.norm(mixed))
            if norm > 0:
                out[i] = mixed / norm
        return out, list(range(len(nodes)))

    def pinned_ids(self) -> Iterable[str]:
        return iter(self.pinned)


def _episodic(node: MemoryNode) -> bool:
    try:
        return MemoryKind(node.kind) is MemoryKind.EPISODIC
    except ValueError:
        return False


def embedding_texts(nodes: Sequence[MemoryNode], contextual_text: bool = False) -> list[str]:
    """What the embedder encodes for each new memory: :func:`index_text` (no date stamp).

    With ``contextual_text`` (a quality option that costs model work: the texts
    grow), an episodic memory is encoded after the text of the memory before it
    in the same session of this batch.
    """
    texts = [index_text(n) for n in nodes]
    if not contextual_text:
        return texts
    out = list(texts)
    last: dict[str, int] = {}
    for i in sorted(range(len(nodes)), key=lambda i: order_key(nodes[i])):
        node = nodes[i]
        session = session_of(node) if _episodic(node) else None
        if session is None:
            continue
        if session in last:
            out[i] = f"{texts[last[session]]}\n{texts[i]}"
        last[session] = i
    return out
