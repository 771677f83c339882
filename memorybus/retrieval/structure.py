"""The derived read-side structure of a shard: keyword index, vectors, threads, pinned facts.

:class:`RecallIndex` mirrors the shard's committed memories (the shard calls
:meth:`RecallIndex.add` / :meth:`RecallIndex.remove` wherever it mirrors a
write, and rebuilds it from the store on start). It holds

- the BM25 :class:`~memorybus.retrieval.keyword.KeywordIndex` over each
  memory's *index text* (content without a leading date stamp);
- each memory's vector (:class:`VectorCache`);
- threads: the memories of one declared conversation thread (``MemoryNode.thread``,
  per scope) in the order ``(valid_from, position, created_at, id)``, for
  thread-aware ranking, neighbour expansion and contextual embeddings. Only the
  declared field counts; a memory without a thread has no neighbours;
- the name tokens of each memory's speaker and source, for queries that name them;
- the answer forms each memory states (a time, a number, a quoted title) and the terms of
  its capitalised words (candidate proper names; :mod:`~memorybus.retrieval.answers`), for
  questions that ask for one;
- pinned memories (tag ``pinned`` or ``core``): the core memory of
  :meth:`~memorybus.client.MemoryBus.context_for`.

Everything is in memory and updated incrementally, O(terms) per write.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet

import numpy as np

from memorybus.memory.model import MemoryKind, MemoryNode
from memorybus.retrieval.answers import NAMED, QUOTED_TITLE, held_forms, name_terms
from memorybus.retrieval.keyword import KeywordIndex
from memorybus.retrieval.sessions import Sessions
from memorybus.retrieval.text import speaker_terms, split_time_prefix, tokens
from memorybus.retrieval.timeline import Timeline
from memorybus.retrieval.vectorcache import VectorCache, centroid_cosines

PINNED_TAGS = frozenset({"pinned", "core"})

OrderKey = tuple[float, float, float, str]

#: capitalised words whose keyword terms an index remembers
_WORD_MEMO = 50_000


def index_text(node: MemoryNode) -> str:
    """The text recall indexes and embeds: the content without a leading date stamp."""
    return index_content(node.content)


def index_content(content: str) -> str:
    """:func:`index_text` of a memory with this content."""
    _, rest = split_time_prefix(content)
    return rest if rest.strip() else content


def thread_of(node: MemoryNode) -> str | None:
    """The declared thread a memory belongs to (scoped by its scope key), or None."""
    if not node.thread:
        return None
    return f"{node.scope.key}#{node.thread}"


def order_key(node: MemoryNode) -> OrderKey:
    pos = -1.0 if node.position is None else float(node.position)
    return (float(node.valid_from), pos, float(node.created_at), node.id)


def names_of(node: MemoryNode) -> tuple[str, ...]:
    """The name tokens of who said or wrote it: its declared ``speaker`` and its ``source``."""
    return tuple(dict.fromkeys([*speaker_terms(node.speaker), *speaker_terms(node.source)]))


class RecallIndex:
    def __init__(self, k1: float = 1.2, b: float = 0.75, session_gap: float = 1800.0) -> None:
        self.keywords = KeywordIndex(k1, b)
        self.vectors = VectorCache()
        #: sessions from time of the episodic memories that declare no thread
        self.sessions = Sessions(session_gap, self.vectors.vector)
        self._threads: dict[str, list[OrderKey]] = {}
        self._thread_of: dict[str, tuple[str, OrderKey]] = {}
        self.pinned: set[str] = set()
        self._names: dict[str, tuple[str, ...]] = {}  # memory -> name tokens of its speaker and source
        self._forms: dict[str, int] = {}  # memory -> the answer forms it states (none: absent)
        self._proper: dict[str, tuple[str, ...]] = {}  # memory -> terms of its capitalised words (+ a title)
        self._terms_of_word: dict[str, tuple[str, ...]] = {}  # capitalised word -> its keyword terms (a memo)
        self._adjacent: dict[str, tuple[str | None, str | None]] = {}
        self._centroid: dict[str, np.ndarray] = {}  # thread -> sum of its members' vectors
        self._facts: Counter[str] = Counter()  # scope key -> memories that are not episodic
        self._fact_scope: dict[str, str] = {}
        self.timeline = Timeline()

    def reset(self) -> None:
        self.keywords.reset()
        self.vectors.reset()
        self.sessions.reset()
        self.timeline.reset()
        self._threads.clear()
        self._thread_of.clear()
        self.pinned.clear()
        self._names.clear()
        self._forms.clear()
        self._proper.clear()
        self._adjacent.clear()
        self._centroid.clear()
        self._facts.clear()
        self._fact_scope.clear()

    # ------------------------------------------------------------------ writes
    def _word_terms(self, word: str) -> tuple[str, ...]:
        """The keyword terms of one capitalised word, remembered (names recur; the
        tokenizer costs ~20 us a call), at most :data:`_WORD_MEMO` words."""
        found = self._terms_of_word.get(word)
        if found is None:
            found = tuple(tokens(word))
            if len(self._terms_of_word) < _WORD_MEMO:
                self._terms_of_word[word] = found
        return found

    def add(self, node: MemoryNode) -> None:
        """Index a committed memory (a new one or a new version; a node without its
        embedding keeps the vector already cached for its id)."""
        self._remove(node.id, keep_vector=node.embedding is None)
        text = index_text(node)
        self.keywords.add(node.id, node.scope.key, tokens(text))
        forms = held_forms(text)
        if forms:
            self._forms[node.id] = forms
        proper = (QUOTED_TITLE,) * bool(forms & NAMED) + name_terms(text, self._word_terms)
        if proper:
            self._proper[node.id] = proper
        self.timeline.add(node.id, node.scope.key, node.valid_from)
        if node.embedding is not None:
            self.vectors.add(node.id, node.scope.key, node.embedding)
        thread = thread_of(node)
        vec = self.vectors.vector(node.id) if thread is not None else None
        if thread is not None and vec is not None:
            total = self._centroid.get(thread)
            self._centroid[thread] = vec if total is None else total + vec
        if thread is None and is_episodic(node):
            own = node.embedding if node.embedding is not None else self.vectors.vector(node.id)
            self.sessions.add(node.id, (node.scope.key, node.source or ""), node.valid_from, own)
        if thread is not None:
            key = order_key(node)
            members = self._threads.setdefault(thread, [])
            i = bisect.bisect_left(members, key)
            members.insert(i, key)
            self._thread_of[node.id] = (thread, key)
            prev = members[i - 1][3] if i > 0 else None
            nxt = members[i + 1][3] if i + 1 < len(members) else None
            self._adjacent[node.id] = (prev, nxt)
            if prev is not None:
                self._adjacent[prev] = (self._adjacent[prev][0], node.id)
            if nxt is not None:
                self._adjacent[nxt] = (node.id, self._adjacent[nxt][1])
        if PINNED_TAGS.intersection(node.tags):
            self.pinned.add(node.id)
        if not is_episodic(node):
            self._facts[node.scope.key] += 1
            self._fact_scope[node.id] = node.scope.key
        who = names_of(node)
        if who:
            self._names[node.id] = who

    def remove(self, memory_id: str) -> None:
        self._remove(memory_id, keep_vector=False)

    def _remove(self, memory_id: str, *, keep_vector: bool) -> None:
        fact_scope = self._fact_scope.pop(memory_id, None)
        if fact_scope is not None:
            self._facts[fact_scope] -= 1
            if self._facts[fact_scope] <= 0:
                del self._facts[fact_scope]
        self._names.pop(memory_id, None)
        self._forms.pop(memory_id, None)
        self._proper.pop(memory_id, None)
        self.sessions.remove(memory_id)  # while its vector is still cached
        entry = self._thread_of.get(memory_id)
        if entry is not None and entry[0] in self._centroid:
            vec = self.vectors.vector(memory_id)
            if vec is not None:
                self._centroid[entry[0]] = self._centroid[entry[0]] - vec
        if not keep_vector:
            self.vectors.remove(memory_id)
        self.keywords.remove(memory_id)
        self.timeline.remove(memory_id)
        self.pinned.discard(memory_id)
        entry = self._thread_of.pop(memory_id, None)
        if entry is not None:
            thread, key = entry
            members = self._threads[thread]
            i = bisect.bisect_left(members, key)
            if i < len(members) and members[i] == key:
                members.pop(i)
            if not members:
                del self._threads[thread]
                self._centroid.pop(thread, None)
            prev, nxt = self._adjacent.pop(memory_id, (None, None))
            if prev is not None:
                self._adjacent[prev] = (self._adjacent[prev][0], nxt)
            if nxt is not None:
                self._adjacent[nxt] = (prev, self._adjacent[nxt][1])

    # ------------------------------------------------------------------- reads
    def has_facts(self, scope_keys: Sequence[str]) -> bool:
        """Whether any memory of ``scope_keys`` is not episodic (semantic, procedural, working)."""
        return any(self._facts.get(s, 0) > 0 for s in scope_keys)

    def names(self, memory_id: str) -> tuple[str, ...]:
        """The name tokens of the memory's speaker and source."""
        return self._names.get(memory_id, ())

    def named(self, memory_ids: Sequence[str], terms: AbstractSet[str]) -> np.ndarray:
        """1.0 for each memory whose speaker or source has a name token in ``terms``, else 0.0."""
        get = self._names.get
        return np.fromiter((0.0 if terms.isdisjoint(get(i, ())) else 1.0 for i in memory_ids), dtype=np.float64,
                           count=len(memory_ids))  # fmt: skip

    def threaded(self, memory_ids: Sequence[str]) -> list[tuple[int, tuple[str, ...]]]:
        """``(position, neighbours)`` for each of ``memory_ids`` that has thread neighbours
        (the memories just before and after it, as :meth:`adjacent`)."""
        adjacent = self.adjacent
        return [(x, near) for x, memory_id in enumerate(memory_ids) if (near := adjacent(memory_id))]

    def forms(self, memory_ids: Sequence[str]) -> list[int]:
        """The answer forms each memory states (bit flags of :mod:`~memorybus.retrieval.answers`)."""
        get = self._forms.get
        return [get(i, 0) for i in memory_ids]

    def proper_terms(self, memory_ids: Sequence[str]) -> list[tuple[str, ...]]:
        """The keyword terms of each memory's capitalised words (candidate proper names),
        led by :data:`~memorybus.retrieval.answers.QUOTED_TITLE` when it quotes a title."""
        get = self._proper.get
        return [get(i, ()) for i in memory_ids]

    def adjacent(self, memory_id: str) -> tuple[str, ...]:
        """The memories just before and just after ``memory_id`` in its thread."""
        prev, nxt = self._adjacent.get(memory_id, (None, None))
        if prev is None:
            return () if nxt is None else (nxt,)
        return (prev,) if nxt is None else (prev, nxt)

    def thread_scores(self, vector: np.ndarray, threads: Sequence[str]) -> dict[str, float]:
        """Cosine of ``vector`` with each thread's centroid (the mean of its members' vectors):
        how well the thread as a whole answers the query."""
        return centroid_cosines(vector, {x: self._centroid[x] for x in dict.fromkeys(threads) if x in self._centroid})

    def around(self, memory_id: str, limit: int) -> list[str]:
        """Up to ``limit`` other members of ``memory_id``'s thread, nearest to it first
        (alternating: previous, next, ...)."""
        entry = self._thread_of.get(memory_id)
        if entry is None or limit <= 0:
            return []
        members = self._threads[entry[0]]
        i = bisect.bisect_left(members, entry[1])
        lo, hi = i - 1, i + 1
        out: list[str] = []
        while len(out) < limit and (lo >= 0 or hi < len(members)):
            if lo >= 0:
                out.append(members[lo][3])
                lo -= 1
            if hi < len(members) and len(out) < limit:
                out.append(members[hi][3])
                hi += 1
        return out

    def thread(self, memory_id: str) -> str | None:
        entry = self._thread_of.get(memory_id)
        return entry[0] if entry else None

    def session(self, memory_id: str) -> int | None:
        """The session from time of a memory that declares no thread (see :mod:`memorybus.retrieval.sessions`)."""
        return self.sessions.session(memory_id)

    def session_scores(self, vector: np.ndarray, sessions: Sequence[int]) -> dict[int, float]:
        """Cosine of ``vector`` with each session's centroid."""
        return self.sessions.scores(vector, sessions)

    def neighbors(self, memory_id: str, before: int = 1, after: int = 1) -> list[str]:
        """Ids of up to ``before`` earlier and ``after`` later memories of the same thread,
        nearest first (alternating: previous, next, ...)."""
        if before == 1 and after == 1:
            prev, nxt = self._adjacent.get(memory_id, (None, None))
            return [j for j in (prev, nxt) if j is not None]
        entry = self._thread_of.get(memory_id)
        if entry is None:
            return []
        thread, key = entry
        members = self._threads[thread]
        i = bisect.bisect_left(members, key)
        out: list[str] = []
        for d in range(1, max(before, after) + 1):
            if d <= before and i - d >= 0:
                out.append(members[i - d][3])
            if d <= after and i + d < len(members):
                out.append(members[i + d][3])
        return out

    def predecessor_of(self, node: MemoryNode, accept: Callable[[str], bool] | None = None) -> str | None:
        """The stored memory just before ``node`` in its thread (``node`` need not be
        stored); with ``accept``, the nearest one before it that ``accept`` takes."""
        thread = thread_of(node)
        if thread is None or thread not in self._threads:
            return None
        members = self._threads[thread]
        i = bisect.bisect_left(members, order_key(node))
        while i > 0:
            i -= 1
            if members[i][3] != node.id and (accept is None or accept(members[i][3])):
                return members[i][3]
        return None

    def contextualize(
        self,
        nodes: Sequence[MemoryNode],
        vectors: np.ndarray,
        mix: float,
        stored_vector: Callable[[str], np.ndarray | None],
    ) -> np.ndarray:
        """Contextual embeddings of new episodic memories of declared threads: each vector
        plus ``mix`` times its thread predecessor's (contextual) vector, re-normalised.

        ``vectors[i]`` is the vector of ``nodes[i]``. The predecessor is the previous
        memory of the same thread in this batch or, for the first of a thread, the
        stored one before it (``stored_vector(id)``). No model work: the predecessor's
        meaning comes in through its vector. Returns new vectors; the input is not
        changed.
        """
        if mix <= 0 or not nodes or vectors.ndim != 2:
            return vectors
        out = np.asarray(vectors, dtype=np.float32).copy()
        order = sorted((i for i, n in enumerate(nodes) if is_episodic(n)), key=lambda i: order_key(nodes[i]))
        last: dict[str, int] = {}
        for i in order:
            node = nodes[i]
            thread = thread_of(node)
            if thread is None:
                continue
            prev: np.ndarray | None = None
            if thread in last:
                prev = out[last[thread]]
            else:
                pid = self.predecessor_of(node)
                if pid is not None:
                    prev = stored_vector(pid)
            last[thread] = i
            if prev is None or prev.shape != out[i].shape or not np.all(np.isfinite(prev)):
                continue
            mixed = out[i] + mix * prev
            norm = float(np.linalg.norm(mixed))
            if norm > 0:
                out[i] = mixed / norm
        return out

    def pinned_ids(self) -> Iterable[str]:
        return iter(self.pinned)


def is_episodic(node: MemoryNode) -> bool:
    """Whether a node is an episodic memory (False for an unknown kind)."""
    try:
        return MemoryKind(node.kind) is MemoryKind.EPISODIC
    except ValueError:
        return False
