"""The policies: how the bus resolves facts and fans out (BusPolicy), the knowledge graph
(GraphPolicy), decay (DecayPolicy) and consolidation (ConsolidationPolicy).

Plain frozen data; each policy checks its own fields when it is built (a value out of
range is a ConfigError naming the field). Nothing here is read at import time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memorybus.errors import ConfigError
from memorybus.hooks import resolve_hook

__all__ = ["BusPolicy", "ConsolidationPolicy", "DecayPolicy", "GraphPolicy"]


def _require(ok: bool, name: str, why: str) -> None:
    """A policy's field check: ``ConfigError(name, why)`` unless ``ok``."""
    if not ok:
        raise ConfigError(name, why)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


def _within(value: Any, low: float, high: float) -> bool:
    return _number(value) and low <= value <= high


def _count(value: Any, low: int = 1) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


@dataclass(frozen=True, slots=True)
class BusPolicy:
    """How the bus resolves keyed facts, deduplicates and fans out events.

    - ``strategy``: default conflict strategy: ``evidence`` (every assertion since the
      last change weighed, sources' reliability learned: :mod:`memorybus.bus.evidence`),
      ``confidence_weighted``, ``recency``, ``authority``; ``authorities``: agent names, or ``role:<name>``, whose
      assertions win under ``authority`` and who may broadcast anyone's memory.
    - ``fact_half_life_days``: how fast an older fact's confidence, an assertion's
      support and a source's learned reliability stop counting.
    - ``near_duplicate``: cosine at or above which a new semantic/procedural memory
      in the same scope is a duplicate of an existing one and not stored again.
    - ``repeat_window_seconds``: an episodic memory repeating the words of one in the
      same scope, both without an event time of their own, written within this many
      seconds of it, is the same memory: it reinforces it (one more access, the
      higher confidence) instead of being stored again. 0 keeps every repeat.
    - ``contradiction``: cosine at or above which a similar memory is checked for
      a contradiction (by the judge; default: negation or different numbers).
    - ``max_cas_retries``: compare-and-set attempts before ``VersionConflict``.
    - ``broadcast_discount``: confidence factor of a broadcast copy.
    - ``partitions``: hub actors; orgs are spread over them.
    - ``subscriber_queue``: events held per live subscriber before it is switched
      to replay from the log (slow subscribers never block writers).
    - ``cursor_flush_seconds``: acknowledged cursors of all subscriptions are
      written together at most this often (delivery is at least once across a
      hub actor crash; ``Inbox`` drops repeats).
    - ``replay_page``: log entries a replay reads at a time (replay from the start of
      a long log is paged: the hub actor holds one page per subscription).
    - ``callback_retries``, ``callback_backoff_seconds``: a callback subscription whose
      callback raises retries the same batch this many times (backoff doubling from
      this, up to 5 s), then stops with the error surfaced (``sub.failed``, ``sub.check()``).
    - ``judge``: the pluggable contradiction judge (see ``bus.conflicts``).
    """

    strategy: str = "evidence"
    authorities: tuple[str, ...] = ()
    fact_half_life_days: float = 30.0
    near_duplicate: float = 0.97
    repeat_window_seconds: float = 86_400.0
    contradiction: float = 0.85
    max_cas_retries: int = 16
    broadcast_discount: float = 0.9
    partitions: int = 1
    subscriber_queue: int = 10_000
    delivery_batch: int = 256
    cursor_flush_seconds: float = 0.05
    callback_retries: int = 5
    replay_page: int = 1000
    callback_backoff_seconds: float = 0.1
    #: decides whether two similar memories contradict (e.g. an LLM call): True, False,
    #: or None for the default rule (negation or different numbers). A callable that
    #: pickles, or its import path ``"package.module:function"`` (see :func:`resolve_hook`)
    judge: Callable[[Any, Any], bool | None] | str | None = None

    def __post_init__(self) -> None:
        _require(
            self.strategy in ("evidence", "confidence_weighted", "recency", "authority"),
            "bus.strategy",
            f"unknown strategy {self.strategy!r}",
        )
        if isinstance(self.authorities, list):  # a list is what people write: kept as a tuple
            object.__setattr__(self, "authorities", tuple(self.authorities))
        _require(
            isinstance(self.authorities, tuple) and all(isinstance(a, str) and a for a in self.authorities),
            "bus.authorities",
            "must be a list or tuple of agent names or 'role:<name>' (not one string)",
        )
        _require(_within(self.fact_half_life_days, 1e-9, 1e6), "bus.fact_half_life_days", "must be > 0 days")
        for name in ("near_duplicate", "contradiction", "broadcast_discount"):
            _require(_within(getattr(self, name), 1e-9, 1.0), f"bus.{name}", "must be in (0, 1]")
        _require(
            _within(self.repeat_window_seconds, 0, 10 * 365 * 86_400),
            "bus.repeat_window_seconds",
            "must be between 0 and ten years",
        )
        for name in ("max_cas_retries", "partitions", "subscriber_queue", "delivery_batch", "replay_page"):
            _require(_count(getattr(self, name)), f"bus.{name}", "must be a whole number >= 1")
        _require(_count(self.callback_retries, 0), "bus.callback_retries", "must be a whole number >= 0")
        for name in ("cursor_flush_seconds", "callback_backoff_seconds"):
            _require(_within(getattr(self, name), 0, 60), f"bus.{name}", "must be between 0 and 60 seconds")
        resolve_hook(self.judge, "bus.judge")  # a bad import path fails here, not in a shard


@dataclass(frozen=True, slots=True)
class GraphPolicy:
    """The per-shard temporal knowledge graph and multi-hop recall.

    ``hops``: how far recall expands the query's entities (0 turns the graph off);
    ``fanout``: edges followed per entity per hop (a hub cannot explode the
    expansion). How much a graph link lifts a memory is ``RankingWeights.graph``.
    """

    hops: int = 2
    fanout: int = 16

    def __post_init__(self) -> None:
        _require(_count(self.hops, 0), "graph.hops", "must be a whole number >= 0 (0: no graph expansion)")
        _require(_count(self.fanout), "graph.fanout", "must be a whole number >= 1")


@dataclass(frozen=True, slots=True)
class DecayPolicy:
    """Decay: when the forgetting curve archives a memory (see :mod:`memorybus.maintenance`).

    - ``archive_below``: salience under which an active memory is archived.
    - ``protect_importance``: memories at or above this importance are never archived.
    - ``min_age_days``: memories younger than this are never archived.
    - ``interval_seconds``: how often the scheduled sweep runs.
    """

    archive_below: float = 0.1
    protect_importance: float = 8.0
    min_age_days: float = 1.0
    interval_seconds: float = 3600.0

    def __post_init__(self) -> None:
        _require(_within(self.archive_below, 0, 1), "decay.archive_below", "is a salience: must be in [0, 1]")
        _require(_within(self.protect_importance, 0, 1e9), "decay.protect_importance", "must be >= 0")
        _require(_within(self.min_age_days, 0, 1e6), "decay.min_age_days", "must be >= 0 days")
        _require(_within(self.interval_seconds, 1e-3, 1e9), "decay.interval_seconds", "must be > 0 seconds")


@dataclass(frozen=True, slots=True)
class ConsolidationPolicy:
    """Consolidation: episodic memories clustered into semantic ones (see :mod:`memorybus.maintenance`).

    - ``similarity``: cosine to a cluster's centroid needed to join it.
    - ``min_cluster``: smallest cluster that becomes a semantic memory.
    - ``window_days``: only episodic memories created this recently are clustered.
    - ``reflect_importance``: accumulated importance of new episodic memories in a
      scope that triggers a consolidation of that scope (the reflection trigger).
    - ``source_decay_factor``: consolidated sources decay this much faster.
    - ``interval_seconds``: how often the scheduled run happens.
    - ``max_candidates``: the most recent memories of a scope considered per run.
    - ``summarizer``: turns a cluster into the text of its semantic memory (e.g. an
      LLM call): a callable that pickles, or its import path
      ``"package.module:function"``; None: the extractive summary.
    """

    similarity: float = 0.75
    min_cluster: int = 3
    window_days: float = 30.0
    reflect_importance: float = 150.0
    source_decay_factor: float = 3.0
    interval_seconds: float = 3600.0
    key_phrases: int = 5
    max_candidates: int = 2000
    summarizer: Callable[[Sequence[Any]], str] | str | None = None  # memories -> text

    def __post_init__(self) -> None:
        _require(_within(self.similarity, 1e-9, 1), "consolidation.similarity", "is a cosine: must be in (0, 1]")
        for name in ("min_cluster", "key_phrases", "max_candidates"):
            _require(_count(getattr(self, name)), f"consolidation.{name}", "must be a whole number >= 1")
        for name in ("window_days", "reflect_importance", "source_decay_factor"):
            _require(_within(getattr(self, name), 0, 1e9), f"consolidation.{name}", "must be >= 0")
        _require(_within(self.interval_seconds, 1e-3, 1e9), "consolidation.interval_seconds", "must be > 0 seconds")
        resolve_hook(self.summarizer, "consolidation.summarizer")
