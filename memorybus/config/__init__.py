"""The configuration, all in this package: :class:`Config` (``settings.py``), the policies
it holds (``policies.py``: BusPolicy, GraphPolicy, DecayPolicy, ConsolidationPolicy) and
recall's :class:`RankingWeights` (``weights.py``). Every one is plain frozen data that
checks itself when built.

Nothing here is read at import time: build a :class:`Config` (or use
:meth:`Config.embedded` / :meth:`Config.redis`) and hand it to
:func:`memorybus.connect`.
"""

from __future__ import annotations

from memorybus.config.policies import BusPolicy, ConsolidationPolicy, DecayPolicy, GraphPolicy
from memorybus.config.settings import Config
from memorybus.config.weights import RankingWeights
from memorybus.hooks import resolve_hook

__all__ = [
    "BusPolicy", "Config", "ConsolidationPolicy", "DecayPolicy", "GraphPolicy", "RankingWeights", "resolve_hook",
]  # fmt: skip
