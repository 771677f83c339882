"""The memory shard: the plain class a ShardActor wraps.

A shard owns the scopes routed to it. It writes through to its durable
:class:`~memorybus.storage.Store` first and only then to its derived indexes;
it enforces scope visibility on every read and write; it ranks recall by
relevance and salience and records accesses. See :mod:`memorybus.shard.shard`
for its parts and jobs.

Guarantees:
- ``put_many``, ``update`` and ``delete`` validate everything before writing;
  a rejected call changes nothing (store, index and cache).
- A call returns only after its store commit is durable; an index that fails
  after the commit does not fail the call (see :mod:`memorybus.shard.index`).
- The index and cache are rebuilt from the store when the shard starts.
- Access statistics (counts, last access) are flushed to the store at most
  ``touch_flush_seconds`` after a recall, or on :meth:`flush`; a crash may lose
  that window of access statistics, never a memory.
"""

from memorybus.shard.erase import Selector
from memorybus.shard.results import FactResult
from memorybus.shard.shard import Shard
from memorybus.shard.writes import UPDATABLE

__all__ = ["UPDATABLE", "FactResult", "Selector", "Shard"]
