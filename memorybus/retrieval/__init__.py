"""Recall: hybrid retrieval inside a shard, the ranking, and what a recall returns.

- :mod:`~memorybus.retrieval.hits`: :class:`RecallHit` and ``merge_hits``;
- :mod:`~memorybus.retrieval.options`: :class:`RecallOptions`;
- :mod:`~memorybus.retrieval.ranking`: the ranking stages, over
  :mod:`~memorybus.retrieval.signals`;
- :mod:`~memorybus.retrieval.keyword`: the incremental BM25 index;
- :mod:`~memorybus.retrieval.structure`: threads, vectors, speakers and pinned memories of a shard;
- :mod:`~memorybus.retrieval.reader`: the shard's read path; :mod:`~memorybus.retrieval.expand`:
  neighbours and relations around the top hits;
- :mod:`~memorybus.retrieval.query`, :mod:`~memorybus.retrieval.timeparse` and
  :mod:`~memorybus.retrieval.text`: query terms, dates and tokens.
"""

from memorybus.retrieval.hits import DEFAULT_STATUSES, RecallHit, merge_hits
from memorybus.retrieval.options import RecallOptions

__all__ = ["DEFAULT_STATUSES", "RecallHit", "RecallOptions", "merge_hits"]
