"""The hub when its durable state cannot be written (a read-only SQLite file here; a
Redis write no replica confirms raises the same StoreUnavailable): subscribing fails
and leaves no subscription behind; once the store takes writes, the same call works."""

import asyncio

import pytest

from memorybus import Context, EventFilter, Scope, StoreUnavailable
from memorybus.bus.hub import Hub
from memorybus.storage.kv import SqliteKV
from tests.unit.test_pubsub_hub import Subscriber, World, contents, until


def test_a_subscription_the_store_does_not_acknowledge_is_not_created(tmp_path):
    async def main():
        w = World(tmp_path)  # creates the hub's file
        hub = w.hub
        down = Hub(SqliteKV(w.kv_path, read_only=True), hub._read_events, hub._last_seqs, hub._deliver,
                   targets=w.targets)
        sub = Subscriber()
        with pytest.raises(StoreUnavailable):
            await down.subscribe("feed", Context("acme"), EventFilter(), sub, "on_events")
        assert down.find(Context("acme"), "feed") is None and down.subs == {}
        await hub.subscribe("feed", Context("acme"), EventFilter(), sub, "on_events")  # writable: it works
        w.write("after", Scope("acme"))
        await until(lambda: contents(sub.got) == ["after"])

    asyncio.run(main())
