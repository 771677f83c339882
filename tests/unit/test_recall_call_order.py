"""A recall calls the shard of the caller's narrowest scope first (it likely holds the
caller's own memories: the most work), every owning shard once; answers merge in shard
order whatever the call order (the merge is covered by the recall tests)."""

from __future__ import annotations

import memorybus as mb
from memorybus.client import MemoryBus


def test_the_narrowest_scopes_shard_is_called_first_and_every_owner_once(tmp_path):
    bus = MemoryBus(mb.Config.embedded(tmp_path, num_shards=4))  # not connected: routing only
    split = 0
    for i in range(40):
        for ctx in (mb.Context("acme", f"u{i}"), mb.Context("acme", f"u{i}", f"a{i}", f"s{i}")):
            order = bus._owners_narrowest_first(ctx)
            assert sorted(order) == bus._owners(ctx) and len(set(order)) == len(order)
            assert order[0] == bus._router.shard_for(ctx.scope.key)
            org = bus._router.shard_for(mb.Scope("acme").key)
            if ctx.agent == "" and org != order[0]:
                split += 1
                assert order == [bus._router.shard_for(ctx.scope.key), org]
    assert split  # some users' scopes live on another shard than their org's
