"""The bus: how changes travel between agents, with no Ray and no storage imports.

- **Delivery** (:mod:`~memorybus.bus.hub`): subscriptions, fan-out in order per scope,
  replay from the shards' logs, parked push targets; their durable records
  (:mod:`~memorybus.bus.records`, :mod:`~memorybus.bus.store`) in a key-value store the hub
  is handed (:mod:`~memorybus.bus.ports`).
- **Conflict resolution** (:mod:`~memorybus.bus.conflicts`): the strategies for keyed
  facts; :mod:`~memorybus.bus.evidence` weighs every assertion of a key's candidate values,
  :mod:`~memorybus.bus.reliability` learns per org whom to believe. The shard applies them
  inside its compare-and-set commit (:mod:`memorybus.shard.facts`); a broadcast's copy is
  the shard's own write (:mod:`memorybus.shard.broadcast`).
"""
