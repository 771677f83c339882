"""Decay and consolidation as pure functions of ``(records, now, policy)``.

Nothing here does I/O or reads a clock: the shard gathers its records, these
functions decide, the shard commits. The scheduled actors only sleep and call.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from memorybus.config import ConsolidationPolicy, DecayPolicy
from memorybus.memory.ids import derived_id
from memorybus.memory.model import MemoryKind, MemoryNode, MemoryStatus
from memorybus.salience import SECONDS_PER_DAY, salience_array
from memorybus.scopes import Scope
from memorybus.words import STOP_WORDS


@dataclass(slots=True)
class DecayPlan:
    scanned: int
    archive: list[str] = field(default_factory=list)
    expire: list[str] = field(default_factory=list)


def plan_decay(nodes: Sequence[MemoryNode], now: float, policy: DecayPolicy) -> DecayPlan:
    """Which memories to archive (salience below the threshold) and which working
    memories to remove (past their TTL), in one vectorised pass."""
    plan = DecayPlan(scanned=len(nodes))
    if not nodes:
        return plan
    n = len(nodes)
    conf = np.fromiter((x.confidence for x in nodes), np.float64, n)
    count = np.fromiter((x.access_count for x in nodes), np.float64, n)
    last = np.fromiter((x.last_accessed for x in nodes), np.float64, n)
    rate = np.fromiter((x.decay_rate for x in nodes), np.float64, n)
    imp = np.fromiter((x.importance for x in nodes), np.float64, n)
    created = np.fromiter((x.created_at for x in nodes), np.float64, n)
    expires = np.fromiter((x.expires_at if x.expires_at is not None else np.inf for x in nodes), np.float64, n)
    active = np.fromiter(
        (x.status is MemoryStatus.ACTIVE or x.status is MemoryStatus.CONSOLIDATED for x in nodes), bool, n
    )
    sal = salience_array(conf, count, last, rate, imp, now)
    expired = expires <= now
    old_enough = (now - created) >= policy.min_age_days * SECONDS_PER_DAY
    archive = active & ~expired & old_enough & (imp < policy.protect_importance) & (sal < policy.archive_below)
    plan.archive = [nodes[int(i)].id for i in np.flatnonzero(archive)]
    plan.expire = [nodes[int(i)].id for i in np.flatnonzero(expired)]
    return plan


# --------------------------------------------------------------- consolidation
#: turns a cluster of memories into the text of one semantic memory (e.g. an LLM call)
Summarizer = Callable[[Sequence[MemoryNode]], str]


@dataclass(slots=True)
class Cluster:
    scope_key: str
    members: list[MemoryNode]
    centroid: np.ndarray

    @property
    def ids(self) -> list[str]:
        return sorted(m.id for m in self.members)

    def semantic_id(self) -> str:
        """Deterministic: the same sources always give the same semantic memory id (an
        id of the cluster's scope, see :mod:`memorybus.memory.ids`)."""
        return derived_id(Scope.from_key(self.scope_key), "consolidated:" + "\x1f".join(self.ids))


def cluster_memories(nodes: Sequence[MemoryNode], policy: ConsolidationPolicy) -> list[Cluster]:
    """Greedy centroid clustering of one scope's episodic memories (oldest first).

    Each memory joins the most similar cluster whose centroid it reaches with
    cosine >= ``similarity``, else starts a new one. Then clusters whose centroids
    reach ``similarity`` with each other are merged: the greedy pass depends on the
    order of the memories (the same paraphrases could seed two clusters), the
    merge makes the result not depend on it. Only the ``max_candidates`` most recent
    memories are considered per run. Deterministic for a given input.
    """
    items = sorted((n for n in nodes if n.embedding is not None), key=lambda n: (n.created_at, n.id))
    items = items[-policy.max_candidates :]
    if not items:
        return []
    dim = int(np.asarray(items[0].embedding).shape[0])
    sums = np.zeros((len(items), dim), dtype=np.float64)  # running sums of cluster members
    unit = np.zeros((len(items), dim), dtype=np.float64)  # normalised centroids
    members: list[list[MemoryNode]] = []
    for node in items:
        v = np.asarray(node.embedding, dtype=np.float64)
        v = v / (np.linalg.norm(v) or 1.0)
        best = -1
        if members:
            sims = unit[: len(members)] @ v
            i = int(np.argmax(sims))
            if sims[i] >= policy.similarity:
                best = i
        if best < 0:
            best = len(members)
            members.append([])
        members[best].append(node)
        sums[best] += v
        unit[best] = sums[best] / (np.linalg.norm(sums[best]) or 1.0)
    _merge_close(members, sums, unit, policy.similarity)
    return [
        Cluster(group[0].scope.key, group, unit[i].astype(np.float32))
        for i, group in enumerate(members)
        if len(group) >= policy.min_cluster
    ]


def _merge_close(members: list[list[MemoryNode]], sums: np.ndarray, unit: np.ndarray, similarity: float) -> None:
    """Merge, closest pair first, clusters whose centroids have cosine >= ``similarity``
    (in place; merged clusters are removed from ``members`` and the arrays compacted)."""
    k = len(members)
    if k < 2:
        return
    sims = unit[:k] @ unit[:k].T
    np.fill_diagonal(sims, -np.inf)
    alive = np.ones(k, dtype=bool)
    while True:
        flat = int(np.argmax(sims))
        i, j = divmod(flat, k)
        if sims[i, j] < similarity:
            break
        i, j = min(i, j), max(i, j)
        members[i] = sorted(members[i] + members[j], key=lambda n: (n.created_at, n.id))
        members[j] = []
        alive[j] = False
        sums[i] += sums[j]
        unit[i] = sums[i] / (np.linalg.norm(sums[i]) or 1.0)
        sims[j, :] = sims[:, j] = -np.inf
        row = unit[:k] @ unit[i]
        row[~alive] = -np.inf
        row[i] = -np.inf
        sims[i, :] = sims[:, i] = row
    keep = np.flatnonzero(alive)
    members[:] = [members[i] for i in keep]
    unit[: len(keep)] = unit[keep]
    sums[: len(keep)] = sums[keep]


_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]+")


def extractive_summary(members: Sequence[MemoryNode], key_phrases: int = 5) -> str:
    """The default summarizer: the most central memory, plus the salient words of the
    cluster that it does not already say. Deterministic, no model call."""
    vecs = np.stack([np.asarray(m.embedding, dtype=np.float64) for m in members])
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) + 1e-12
    centrality = (vecs @ vecs.T).mean(axis=1)
    order = sorted(range(len(members)), key=lambda i: (-centrality[i], members[i].id))
    central = members[order[0]].content.strip()
    have = {w.lower() for w in _WORD.findall(central)}
    counts: Counter[str] = Counter()
    for m in members:
        counts.update({w.lower() for w in _WORD.findall(m.content)} - STOP_WORDS)
    extra = [w for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if w not in have and c >= 2]
    summary = central
    if extra[:key_phrases]:
        summary += f" (also: {', '.join(extra[:key_phrases])})"
    return summary


def consolidated_node(cluster: Cluster, text: str, now: float) -> MemoryNode:
    """The semantic memory a cluster becomes (embedding filled in by the caller)."""
    members = cluster.members
    return MemoryNode(
        id=cluster.semantic_id(),
        content=text,
        scope=members[0].scope,
        kind=MemoryKind.SEMANTIC,
        created_at=now,
        last_accessed=now,
        valid_from=min(m.valid_from for m in members),
        parents=tuple(cluster.ids),
        source_ids=tuple(cluster.ids),
        confidence=summary_confidence(members),
        importance=min(10.0, max(m.importance for m in members)),
        source="consolidation",
        decay_rate=min(m.decay_rate for m in members) / 2,
        tags=tuple(sorted({t for m in members for t in m.tags})),
    )


def recent_episodic(nodes: Sequence[MemoryNode], now: float, policy: ConsolidationPolicy) -> list[MemoryNode]:
    horizon = now - policy.window_days * SECONDS_PER_DAY
    return [
        n
        for n in nodes
        if n.kind is MemoryKind.EPISODIC and n.status is MemoryStatus.ACTIVE and n.created_at >= horizon
    ]


def summary_confidence(members: Sequence[MemoryNode]) -> float:
    """More agreeing sources, more confidence (capped at the sources' best)."""
    best = max(m.confidence for m in members)
    return min(best, 1 - math.prod(1 - m.confidence * 0.5 for m in members))


@dataclass(slots=True)
class RunStatus:
    """What a scheduled actor reports: last run, its duration, counts, errors."""

    kind: str
    runs: int = 0
    last_run: float | None = None
    last_duration: float | None = None
    last_counts: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def succeeded(self, when: float, duration: float, counts: dict[str, int]) -> None:
        self.runs += 1
        self.last_run, self.last_duration, self.last_counts = when, duration, dict(counts)
        for k, v in counts.items():
            self.totals[k] = self.totals.get(k, 0) + v

    def failed(self, when: float, duration: float, error: str) -> None:
        self.last_run, self.last_duration = when, duration
        self.errors = [*self.errors[-9:], error]

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind, "runs": self.runs, "last_run": self.last_run, "last_duration": self.last_duration,
            "last_counts": dict(self.last_counts), "totals": dict(self.totals), "errors": list(self.errors),
        }
