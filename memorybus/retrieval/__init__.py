"""Recall: hybrid retrieval inside a shard, the ranking, and what a recall returns.

- :mod:`~memorybus.retrieval.hits`: :class:`RecallHit`, the rerank and ``merge_hits``;
- :mod:`~memorybus.retrieval.keyword`: the incremental BM25 index;
- :mod:`~memorybus.retrieval.structure`: sessions, vectors and pinned memories of a shard;
- :mod:`~memorybus.retrieval.hybrid`: fusion and structure-aware ranking, :class:`RecallOptions`;
- :mod:`~memorybus.retrieval.reader`: the shard's read path;
- :mod:`~memorybus.retrieval.timeparse` and :mod:`~memorybus.retrieval.text`: dates and tokens.
"""

from memorybus.retrieval.hits import DEFAULT_STATUSES, RecallHit, merge_hits, rank_score
from memorybus.retrieval.hybrid import RecallOptions

__all__ = ["DEFAULT_STATUSES", "RecallHit", "RecallOptions", "merge_hits", "rank_score"]
