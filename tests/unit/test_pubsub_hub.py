"""The hub's delivery guarantees, driven without Ray: a real Shard (SQLite, Qdrant Edge)
is the event log, subscribers are plain async callables."""

import asyncio

import numpy as np
import pytest

from memorybus import ActorUnavailable, Context, EventFilter, EventKind, Inbox, ManualClock, MemoryNode, Scope
from memorybus.bus.hub import Hub
from memorybus.bus.targets import LocalTargets
from memorybus.shard import Shard
from memorybus.storage.kv import SqliteKV
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

DIM = 8
OWNER = Context("acme", "u1", "writer")
U1 = Context("acme", "u1")


class Subscriber:
    def __init__(self, fail_first=0):
        self.got = []
        self.fail = fail_first

    async def on_events(self, batch):
        if self.fail:
            self.fail -= 1
            raise RuntimeError("subscriber down")
        self.got.extend(batch)


class World:
    def __init__(self, tmp_path):
        self.shard = Shard("shard-0", SqliteStore(tmp_path / "r.sqlite"), EdgeVectorIndex(tmp_path / "v", DIM),
                           dim=DIM, clock=ManualClock(), dedupe=False, detect_contradictions=False)
        self.hub_published = []
        self.reads = []
        self.kv_path = tmp_path / "bus.sqlite"
        self.targets = LocalTargets()  # one "cluster": restarted hubs find the same targets
        self.hub = self.new_hub()
        self.rng = np.random.default_rng(0)

    def new_hub(self, deliver=None, **kw):
        async def read_events(context, cursors, flt, limit):
            self.reads.append(limit)
            return self.shard.read_events_page(context, cursors, flt, limit)

        async def last_seqs(context):
            return self.shard.last_seqs(context)

        async def lazy(target, method, batch):
            if getattr(target, "gone", False):  # as the hub actor reports a dead actor
                raise ActorUnavailable("subscriber", "the actor died")
            return await getattr(target, method)(batch)

        kw.setdefault("targets", self.targets)
        return Hub(SqliteKV(self.kv_path), read_events, last_seqs, deliver or lazy, **kw)

    async def subscribe(self, target, name="s", context=U1, **kw):
        """``target.on_events`` subscribed as ``name``, every event it may see; the hub's answer."""
        return await self.hub.subscribe(name, context, EventFilter(), target, "on_events", **kw)

    async def subscriber(self, name="s", context=U1, *, fail_first=0, **kw):
        """A :class:`Subscriber` (failing its first ``fail_first`` deliveries), subscribed."""
        sub = Subscriber(fail_first)
        await self.subscribe(sub, name, context, **kw)
        return sub

    def write(self, content, scope, context=OWNER, publish=True):
        v = self.rng.normal(size=DIM).astype(np.float32)
        self.shard.on_events = self.hub.publish if publish else None
        return self.shard.put_many(context, [MemoryNode(content=content, scope=scope)], v[None, :])[0]


async def until(cond, timeout=5.0):
    for _ in range(int(timeout / 0.01)):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


def contents(events):
    return [e.node.content for e in events]


def test_push_in_order_visible_and_filtered(tmp_path):
    async def main():
        w = World(tmp_path)
        u2 = Subscriber()
        tags = Subscriber()
        await w.subscribe(u2, "u2", Context("acme", "u2"))
        await w.hub.subscribe("tags", Context("acme", "u1"), EventFilter.of(events=["remembered"], levels=["org"]),
                              tags, "on_events")
        for i in range(5):
            w.write(f"org news {i}", Scope("acme"))
            w.write(f"u1 secret {i}", Scope("acme", "u1"))
            w.write(f"u2 note {i}", Scope("acme", "u2"), Context("acme", "u2"))
        await until(lambda: len(u2.got) == 10 and len(tags.got) == 5)
        assert [c for c in contents(u2.got) if c.startswith("org")] == [f"org news {i}" for i in range(5)]
        assert not any("secret" in c for c in contents(u2.got))  # never what it cannot recall
        assert contents(tags.got) == [f"org news {i}" for i in range(5)]
        assert w.hub.cursors("u2", Context("acme", "u2"))[Scope("acme").key] == 5

    asyncio.run(main())


def test_a_publish_sends_every_idle_subscription_its_batch_before_awaiting_any(tmp_path):
    """As a plain Ray fan-out does: the calls of one publish all leave inside it, in one
    pass over the subscriptions (the hub actor's deliver makes the Ray call when called and
    awaits it later), not one by one as each subscription's loop gets its turn. A
    subscription with a batch in flight gets nothing more until it is answered; order per
    scope and the cursors hold."""

    async def main():
        w = World(tmp_path)
        sent = []
        answers = asyncio.Event()

        def deliver(target, method, batch):  # the call leaves now; its answer comes later
            sent.append((target, contents(batch)))

            async def answer():
                await answers.wait()
                return await getattr(target, method)(batch)

            return answer()

        w.hub = w.new_hub(deliver=deliver)
        subs = [Subscriber() for _ in range(20)]
        for i, s in enumerate(subs):
            await w.subscribe(s, f"s{i}", Context("acme", f"u{i}"))
        await until(lambda: all(sub.idle for sub in w.hub.subs.values()))
        w.write("news 1", Scope("acme"))  # publish runs here, synchronously
        assert len(sent) == 20 and {id(t) for t, _ in sent} == {id(s) for s in subs}
        assert all(batch == ["news 1"] for _, batch in sent)
        w.write("news 2", Scope("acme"))
        assert len(sent) == 20  # each has a batch in flight: the second waits its turn
        answers.set()
        await until(lambda: all(len(s.got) == 2 for s in subs))
        assert all(contents(s.got) == ["news 1", "news 2"] for s in subs)
        assert len(sent) == 40
        assert all(w.hub.cursors(f"s{i}", Context("acme", f"u{i}"))[Scope("acme").key] == 2 for i in range(20))

    asyncio.run(main())


def test_a_batch_sent_by_publish_that_fails_is_replayed_in_order(tmp_path):
    """The batches publish sends itself (the call made at once, as the hub actor's
    deliver makes it) fail for a while: nothing is acknowledged for them, and the
    subscriber still gets every event once it answers, in order, without a gap."""

    async def main():
        w = World(tmp_path)
        sub = Subscriber(fail_first=3)
        calls = []

        def deliver(target, method, batch):  # the call leaves now
            calls.append(contents(batch))
            return getattr(target, method)(batch)

        w.hub = w.new_hub(deliver=deliver)
        await w.subscribe(sub)
        await until(lambda: all(s.idle for s in w.hub.subs.values()))
        for i in range(10):
            w.write(f"e{i}", Scope("acme"))
            await asyncio.sleep(0)
        await until(lambda: len(sub.got) == 10)
        assert contents(sub.got) == [f"e{i}" for i in range(10)]
        assert calls[0] == ["e0"]  # the first one publish sent itself, and it failed
        assert w.hub.cursors("s", U1)[Scope("acme").key] == 10

    asyncio.run(main())


def test_an_unsubscribe_before_the_loop_takes_a_sent_batch_leaves_nothing_dangling(tmp_path):
    """Publish sent a batch (a coroutine not yet awaited, as an async deliver returns it)
    and the subscription ends before its loop awaits it: the loop closes it (no coroutine
    left never awaited), and nothing more reaches the target."""
    import gc
    import warnings

    async def main():
        w = World(tmp_path)
        sub = await w.subscriber()
        await until(lambda: all(s.idle for s in w.hub.subs.values()))
        w.write("e0", Scope("acme"))
        state = next(iter(w.hub.subs.values()))
        assert state.sent is not None  # sent by publish, not yet awaited
        assert await w.hub.unsubscribe("s", U1)
        await asyncio.sleep(0.05)
        assert state.sent is None and sub.got == []
        w.write("e1", Scope("acme"))
        await asyncio.sleep(0.05)
        assert sub.got == []

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(main())
        gc.collect()
    assert not [c for c in caught if "never awaited" in str(c.message)]


def test_lost_publish_is_replayed_from_the_log(tmp_path):
    async def main():
        w = World(tmp_path)
        sub = await w.subscriber()
        w.write("one", Scope("acme"))
        w.write("two (push lost)", Scope("acme"), publish=False)
        w.write("three", Scope("acme"))  # its seq shows a gap: replay
        await until(lambda: len(sub.got) == 3)
        assert contents(sub.got) == ["one", "two (push lost)", "three"]
        assert [e.seq for e in sub.got] == [1, 2, 3]

    asyncio.run(main())


def test_failed_delivery_is_retried_without_loss(tmp_path):
    async def main():
        w = World(tmp_path)
        sub = await w.subscriber(fail_first=2)
        for i in range(10):
            w.write(f"e{i}", Scope("acme"))
        await until(lambda: len(sub.got) == 10)
        assert contents(sub.got) == [f"e{i}" for i in range(10)]

    asyncio.run(main())


def test_slow_subscriber_never_blocks_writers_and_catches_up(tmp_path):
    async def main():
        w = World(tmp_path)
        gate = asyncio.Event()

        class Slow(Subscriber):
            async def on_events(self, batch):
                await gate.wait()
                self.got.extend(batch)

        sub = Slow()
        w.hub = w.new_hub(queue_limit=5, batch_size=3)
        await w.subscribe(sub)
        await until(lambda: not w.hub.find(Context("acme", "u1"), "s").needs_replay)
        assert w.hub.find(Context("acme", "u1"), "s").replays == 0  # nothing was lost yet
        w.write("e0", Scope("acme"))
        await until(lambda: not w.hub.find(Context("acme", "u1"), "s").queue)  # taken: in flight, stuck at the gate
        for i in range(1, 40):  # writers go on while the subscriber is stuck
            w.write(f"e{i}", Scope("acme"))
        assert len(w.hub.find(Context("acme", "u1"), "s").queue) <= 5
        gate.set()
        await until(lambda: len(sub.got) >= 40)
        got = Inbox().accept(sub.got)
        assert contents(got) == [f"e{i}" for i in range(40)]
        # the overflow was caught up from the log: one replay that re-read events (the
        # subscription's first read of the log found nothing and does not count)
        assert w.hub.find(Context("acme", "u1"), "s").replays >= 1

    asyncio.run(main())


def test_resubscribe_resumes_after_acknowledged_events(tmp_path):
    async def main():
        w = World(tmp_path)
        first = await w.subscriber("durable")
        for i in range(3):
            w.write(f"before {i}", Scope("acme"))
        await until(lambda: len(first.got) == 3)
        await until(lambda: w.hub.find(Context("acme", "u1"), "durable").acked.get(Scope("acme").key) == 3)
        # the hub itself restarts (stopped cleanly: the coalesced cursors are flushed)
        w.hub.flush()
        for task in [s.task for s in w.hub.subs.values()]:
            task.cancel()
        w.hub = w.new_hub()
        for i in range(4):
            w.write(f"while away {i}", Scope("acme"))
        second = Subscriber()
        cursors = await w.subscribe(second, "durable")
        assert cursors[Scope("acme").key] == 3
        await until(lambda: len(second.got) == 4)
        assert contents(second.got) == [f"while away {i}" for i in range(4)]

    asyncio.run(main())


def test_cursor_writes_are_coalesced_and_a_hub_crash_only_redelivers(tmp_path):
    """Many subscribers acknowledging many events cost few durable cursor writes; a hub
    that dies before writing them delivers those events again, and the subscriber's
    Inbox drops them: the application still sees every event exactly once."""

    async def main():
        w = World(tmp_path)
        w.hub = w.new_hub(cursor_flush_seconds=0.2)
        subs = [Subscriber() for _ in range(10)]
        for i, sub in enumerate(subs):
            await w.subscribe(sub, f"s{i}", Context("acme", f"u{i}"))
        writes_before = w.hub.cursor_writes
        for i in range(20):
            w.write(f"e{i}", Scope("acme"))
            await asyncio.sleep(0.005)
        await until(lambda: all(len(s.got) == 20 for s in subs))
        await until(lambda: not w.hub._dirty)
        # 200 acknowledgements, a handful of writes
        assert 1 <= w.hub.cursor_writes - writes_before <= 10
        assert w.hub.cursors("s0", Context("acme", "u0"))[Scope("acme").key] == 20

        # crash: acknowledged but not yet flushed cursors are lost with the hub
        w.hub.cursor_flush_seconds = 60.0
        app = Inbox()  # s0's application, with its own record of what it processed
        seen = contents(app.accept(subs[0].got))
        for i in range(20, 23):
            w.write(f"e{i}", Scope("acme"))
        await until(lambda: len(subs[0].got) == 23)
        seen += contents(app.accept(subs[0].got[20:]))
        for task in [s.task for s in w.hub.subs.values()]:
            task.cancel()
        w.hub = w.new_hub()
        w.write("e23", Scope("acme"))
        again = await w.subscriber("s0", Context("acme", "u0"))
        await until(lambda: any(e.node.content == "e23" for e in again.got))
        assert contents(again.got) == ["e20", "e21", "e22", "e23"]  # at least once: 3 again
        seen += contents(app.accept(again.got))
        assert seen == [f"e{i}" for i in range(24)]  # exactly once for the application

    asyncio.run(main())


def test_pull_subscription_with_acks(tmp_path):
    async def main():
        w = World(tmp_path)
        await w.hub.subscribe("p", Context("acme", "u1"), EventFilter(), None, "")
        assert await w.hub.pull("p", Context("acme", "u1"), None, 0.05) == []
        w.write("a", Scope("acme"))
        w.write("b", Scope("acme", "u1"))
        batch = await w.hub.pull("p", Context("acme", "u1"), None, 1.0)
        assert sorted(contents(batch)) == ["a", "b"]
        inbox = Inbox(w.hub.cursors("p", Context("acme", "u1")))
        assert len(inbox.accept(batch)) == 2 and inbox.accept(batch) == []  # no duplicates
        await w.hub.pull("p", Context("acme", "u1"), inbox.cursors, 0.01)
        assert w.hub.cursors("p", Context("acme", "u1")) == inbox.cursors
        assert {e.kind for e in batch} == {EventKind.REMEMBERED}

    asyncio.run(main())


@pytest.mark.parametrize("start", ["now", "beginning"])
def test_start_position(tmp_path, start):
    async def main():
        w = World(tmp_path)
        w.write("old", Scope("acme"))
        sub = await w.subscriber("s", Context("acme"), start=start)
        w.write("new", Scope("acme"))
        await until(lambda: "new" in contents(sub.got))
        assert contents(sub.got) == (["new"] if start == "now" else ["old", "new"])

    asyncio.run(main())


def test_a_subscription_belongs_to_the_context_that_created_it(tmp_path):
    """Two orgs (and two users of one org) use the same subscription name: each has its
    own subscription; no call of one touches, reads or lists the other's (issue 10, 1)."""

    async def main():
        w = World(tmp_path)
        alice, carol = Context("acme", "alice", "planner"), Context("acme", "carol")
        bob = Context("initech", "bob", "spy")
        subs = {c: Subscriber() for c in (alice, carol, bob)}
        for c, s in subs.items():
            await w.subscribe(s, "planner-feed", c)
        for i in range(7):
            w.write(f"alice note {i}", Scope("acme", "alice"), alice)
        for i in range(3):
            w.write(f"bob secret {i}: acquisition target is Initech {i}", Scope("initech", "bob"), bob)
        await until(lambda: len(subs[alice].got) == 7 and len(subs[bob].got) == 3)
        await asyncio.sleep(0.05)
        assert contents(subs[alice].got) == [f"alice note {i}" for i in range(7)]
        assert contents(subs[bob].got) == [f"bob secret {i}: acquisition target is Initech {i}" for i in range(3)]
        assert subs[carol].got == []
        # bob reads, lists and deletes only his own
        assert w.hub.cursors("planner-feed", bob) and not any("acme" in k for k in w.hub.cursors("planner-feed", bob))
        assert any("alice" in k for k in w.hub.cursors("planner-feed", alice))
        assert w.hub.cursors("planner-feed", Context("initech", "mallory")) == {}
        for shown in (w.hub.stats(bob), w.hub.stats(Context("initech"))):
            assert "acme" not in repr(shown) and "alice" not in repr(shown) and shown["published"] == 3
        assert list(w.hub.stats(carol)["subscriptions"]) == ["planner-feed"]
        assert len(w.hub.stats(Context("acme"))["subscriptions"]) == 2  # the org manages both of its own
        assert await w.hub.pull("planner-feed", Context("initech", "mallory"), None, 0.01) == []
        assert await w.hub.unsubscribe("planner-feed", Context("initech", "mallory")) is False
        assert await w.hub.unsubscribe("planner-feed", bob) is True
        assert w.hub.find(alice, "planner-feed") is not None and w.hub.find(bob, "planner-feed") is None
        w.write("alice note 7", Scope("acme", "alice"), alice)
        await until(lambda: len(subs[alice].got) == 8)
        # a restarted hub restores each owner's subscription apart
        w.hub.flush()
        for s in list(w.hub.subs.values()):
            s.task.cancel()
        w.hub = w.new_hub()
        assert w.hub.restore() == 2
        assert w.hub.find(alice, "planner-feed").context == alice
        assert w.hub.find(carol, "planner-feed").context == carol

    asyncio.run(main())


def test_replay_from_the_start_of_a_long_log_is_paged(tmp_path):
    """A subscriber starting at the beginning of a long log gets every event in order,
    while the hub never reads or holds more than one page at a time (issue 10, 17)."""

    async def main():
        w = World(tmp_path)
        for i in range(300):
            w.write(f"e{i}", Scope("acme"), publish=False)
        w.hub = w.new_hub(replay_page=40, batch_size=16)
        held = []

        class Watching(Subscriber):
            async def on_events(self, batch):
                held.append(len(w.hub.find(Context("acme", "u1"), "s").queue) + len(batch))
                await asyncio.sleep(0)
                self.got.extend(batch)

        sub = Watching()
        await w.subscribe(sub, start="beginning")
        for i in range(300, 310):  # live writes during the replay come from the log too
            w.write(f"e{i}", Scope("acme"))
        await until(lambda: len(sub.got) >= 310)
        await asyncio.sleep(0.05)
        assert contents(sub.got) == [f"e{i}" for i in range(310)]
        assert max(held) <= 40 and max(w.reads) <= 40
        assert w.hub.find(Context("acme", "u1"), "s").acked[Scope("acme").key] == 310

    asyncio.run(main())


def test_pull_replay_is_paged_and_complete(tmp_path):
    async def main():
        w = World(tmp_path)
        ctx = Context("acme", "u1")
        for i in range(100):
            hidden = i % 3 == 0  # a third are u2's: not visible to the subscriber
            w.write(f"e{i}", Scope("acme", "u2") if hidden else Scope("acme"), Context("acme", "u2"), publish=False)
        w.hub = w.new_hub(replay_page=30, batch_size=7)
        await w.hub.subscribe("p", ctx, EventFilter(), None, "", "beginning")
        inbox, got = Inbox(), []
        for _ in range(100):
            batch = await w.hub.pull("p", ctx, inbox.cursors, 0.05)
            got += inbox.accept(batch)
            if len(got) >= 66:
                break
        assert contents(got) == [f"e{i}" for i in range(100) if i % 3]
        assert max(w.reads) <= 30

    asyncio.run(main())


def test_erase_principal_deletes_its_subscriptions_and_cursors_only(tmp_path):
    """Erasing a user removes every subscription it owns (any of its agents), live and
    stored, with its cursors; another user's and another org's stay; a dry run counts."""

    async def main():
        w = World(tmp_path)
        mine, other, foreign = Subscriber(), Subscriber(), Subscriber()
        await w.subscribe(mine, "a", Context("acme", "alice", "planner"))
        await w.subscribe(mine, "b", Context("acme", "alice", "scribe"))
        await w.subscribe(other, "c", Context("acme", "bob"))
        await w.subscribe(foreign, "d", Context("globex", "alice"))
        assert w.hub.erase_principal("acme", "alice", dry_run=True) == 2
        assert len(w.hub.subs) == 4
        assert w.hub.erase_principal("acme", "alice") == 2
        assert w.hub.erase_principal("acme", "alice") == 0
        assert sorted(s.name for s in w.hub.subs.values()) == ["c", "d"]
        assert w.hub.cursors("a", Context("acme", "alice", "planner")) == {}
        stored = sorted(k for k, _ in w.hub.kv.scan("sub:")) + sorted(k for k, _ in w.hub.kv.scan("cur:"))
        assert len(stored) == 4 and all(w.hub.subs.get(k[4:]) is not None for k in stored)
        w.write("after the erase", Scope("acme"))
        await until(lambda: len(other.got) == 1)
        assert mine.got == []  # nothing reaches an erased principal's subscription

    asyncio.run(main())
