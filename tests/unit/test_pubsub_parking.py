"""Parked push subscriptions, driven without Ray: a subscription whose target is not
there (after a restart of the cluster, or gone while it ran) loses nothing, is listed,
is removable, and is re-attached when its target appears."""

import asyncio

import msgpack
from ray import cloudpickle

from memorybus import Context, EventFilter, Inbox, Scope
from memorybus.bus.records import encode_context, encode_filter, subscription_id
from memorybus.bus.targets import LocalTargets, TargetRef
from memorybus.storage.kv import SqliteKV
from tests.unit.test_pubsub_hub import Subscriber, World, contents, until

ALICE = Context("acme", "alice")


def restart(w, targets=None, **kw):
    """The hub stops cleanly (cursors flushed) and a new one restores; ``targets``: a
    new resolver, as a new Ray cluster is (the old one's handles are gone)."""
    w.hub.flush()
    for s in w.hub.subs.values():
        if s.task is not None:
            s.task.cancel()
    w.hub.kv.close()
    if targets is not None:
        w.targets = targets
    w.hub = w.new_hub(**kw)
    w.hub.restore()


def test_a_named_target_that_comes_back_after_a_cluster_restart_gets_what_it_missed(tmp_path):
    async def main():
        w = World(tmp_path)
        first = w.targets.register("feed-worker", Subscriber())
        await w.subscribe(first, "feed", ALICE)
        sub = w.hub.find(ALICE, "feed")
        assert sub.ref == TargetRef(name="feed-worker", namespace="local")
        for i in range(3):
            w.write(f"before {i}", Scope("acme"))
        await until(lambda: len(first.got) == 3 and sub.acked.get(Scope("acme").key) == 3)

        restart(w, LocalTargets(), parked_retry_seconds=0.05)  # a new cluster: nothing runs yet
        sub = w.hub.find(ALICE, "feed")
        await w.hub.attach_parked(force=True)
        assert sub.parked and "feed-worker" in sub.parked and sub.target is None
        for i in range(5):
            w.write(f"while away {i}", Scope("acme"))
        await asyncio.sleep(0.2)  # retries find nothing; the cursor stays where it was
        assert sub.acked[Scope("acme").key] == 3
        stats = w.hub.stats(ALICE)
        assert stats["parked"] == ["feed"]
        assert stats["subscriptions"]["feed"]["parked"] and not stats["subscriptions"]["feed"]["replaying"]
        assert "feed-worker" in stats["subscriptions"]["feed"]["target"]

        second = w.targets.register("feed-worker", Subscriber())  # the subscriber runs again
        await until(lambda: len(second.got) == 5)  # found by the periodic look, no new call
        assert contents(second.got) == [f"while away {i}" for i in range(5)]
        assert not sub.parked and w.hub.stats(ALICE)["parked"] == []
        assert sub.replays == 1  # one replay that re-read the missed events
        w.write("live", Scope("acme"))
        await until(lambda: contents(second.got)[-1:] == ["live"])

    asyncio.run(main())


def test_a_target_found_gone_while_running_is_parked_and_removable(tmp_path):
    async def main():
        w = World(tmp_path)
        worker = w.targets.register("w", Subscriber())
        await w.subscribe(worker, "feed", ALICE)
        w.write("one", Scope("acme"))
        await until(lambda: len(worker.got) == 1)
        worker.gone = True  # the actor died (the hub actor reports ActorUnavailable)
        w.targets.remove("w")
        w.write("two", Scope("acme"))
        sub = w.hub.find(ALICE, "feed")
        await until(lambda: bool(sub.parked))
        assert "gone" in sub.parked and sub.errors == 1 and sub.acked[Scope("acme").key] == 1
        assert w.hub.stats(ALICE)["parked"] == ["feed"]
        assert await w.hub.unsubscribe("feed", ALICE) is True
        assert w.hub.stats(ALICE)["parked"] == [] and w.hub.parked() == []
        restart(w)
        assert w.hub.find(ALICE, "feed") is None  # removed for good, not restored

    asyncio.run(main())


def test_an_unnamed_target_from_another_cluster_stays_parked_until_its_owner_subscribes_again(tmp_path):
    async def main():
        w = World(tmp_path)
        old = Subscriber()  # not registered: an unnamed actor
        await w.subscribe(old, "feed", ALICE)
        w.write("one", Scope("acme"))
        await until(lambda: len(old.got) == 1)
        restart(w)  # the same cluster: its unnamed handle is found again
        await w.hub.attach_parked(force=True)
        assert w.hub.parked() == []
        restart(w, LocalTargets(cluster="another"))
        await w.hub.attach_parked(force=True)
        sub = w.hub.find(ALICE, "feed")
        assert "unnamed" in sub.parked
        w.write("two", Scope("acme"))
        new = await w.subscriber("feed", ALICE)
        await until(lambda: contents(new.got) == ["two"])
        assert not sub.parked

    asyncio.run(main())


def test_a_target_given_by_name_that_does_not_run_yet_is_parked_then_found_on_publish(tmp_path):
    async def main():
        w = World(tmp_path)
        w.hub = w.new_hub(parked_retry_seconds=30.0)  # the timer would not look again in time
        await w.hub.subscribe("feed", ALICE, EventFilter(), ("late", "local"), "on_events", start="beginning")
        sub = w.hub.find(ALICE, "feed")
        assert sub.parked and sub.ref == TargetRef(name="late", namespace="local")
        lookups = w.targets.lookups
        for i in range(20):  # publishes look again, at most once per retry period
            w.write(f"e{i}", Scope("acme"))
        await asyncio.sleep(0.05)
        assert w.targets.lookups - lookups <= 1
        late = w.targets.register("late", Subscriber())
        w.hub._next_look = 0.0  # the period is over
        w.write("e20", Scope("acme"))
        await until(lambda: len(late.got) == 21)
        assert contents(late.got) == [f"e{i}" for i in range(21)]

    asyncio.run(main())


def test_restore_survives_unreadable_and_old_records(tmp_path):
    """One broken record never stops the others; a record of an older version (a pickled
    handle of a cluster that is gone) is restored parked, never decoded."""

    async def main():
        w = World(tmp_path)
        keep = w.targets.register("keep", Subscriber())
        await w.subscribe(keep, "keep", ALICE)
        w.hub.flush()
        kv = SqliteKV(w.kv_path)
        old_owner = Context("acme", "bob")
        old = {"name": "old", "context": encode_context(old_owner), "filter": encode_filter(EventFilter()),
               "method": "on_events", "target": cloudpickle.dumps(object()), "push": True}  # fmt: skip
        kv.put_many({
            f"sub:{subscription_id(old_owner, 'old')}": msgpack.packb(old, use_bin_type=True),
            "sub:sbroken": b"\xc1 not msgpack",
        })  # fmt: skip
        kv.close()
        restart(w, LocalTargets())
        w.targets.register("keep", keep)
        await w.hub.attach_parked(force=True)
        assert w.hub.find(ALICE, "keep").parked == ""
        stale = w.hub.find(old_owner, "old")
        assert stale is not None and "unnamed" in stale.parked
        assert await w.hub.unsubscribe("old", old_owner) is True

    asyncio.run(main())


def test_inbox_takes_cursors_keyed_by_scope():
    inbox = Inbox({Scope("acme", "alice"): 3})
    assert inbox.cursors == {Scope("acme", "alice").key: 3}
