"""Delivery at scale, driven without Ray: events cross processes as their log record
(one encoding shared by every subscriber), and a publish that carries many scopes,
from interleaved writers with lost pushes, keeps order per scope for every
subscriber while a hung one holds up nobody."""

import asyncio
import pickle
import random

import numpy as np

from memorybus import Context, EventFilter, Inbox, MemoryNode, Scope
from memorybus.memory.events import Event
from tests.unit.test_pubsub_hub import DIM, OWNER, Subscriber, World, until

SCOPES = [Scope("acme"), Scope("acme", "u1"), Scope("acme", "u2"), Scope("acme", "u1", "writer")]
WRITERS = {  # the context each scope's writer uses (it must be able to write there)
    SCOPES[0]: OWNER, SCOPES[1]: OWNER, SCOPES[2]: Context("acme", "u2"), SCOPES[3]: OWNER,
}


def write_many(w: World, items: list[tuple[str, Scope]], *, publish: bool = True) -> None:
    """One commit per writer context: each commit publishes its events of every scope at once."""
    by_writer: dict[Context, list[MemoryNode]] = {}
    for content, scope in items:
        by_writer.setdefault(WRITERS[scope], []).append(MemoryNode(content=content, scope=scope, tags=(content[0],)))
    w.shard.on_events = w.hub.publish if publish else None
    for ctx, nodes in by_writer.items():
        vecs = w.rng.normal(size=(len(nodes), DIM)).astype(np.float32)
        w.shard.put_many(ctx, nodes, vecs)


def test_an_event_crosses_processes_as_its_log_record(tmp_path):
    async def main():
        w = World(tmp_path)
        sub = await w.subscriber()
        w.write("the log's bytes", Scope("acme"))
        await until(lambda: len(sub.got) == 1)
        live = sub.got[0]
        ((seq, blob),) = w.shard.core.store.read_events(Scope("acme").key, 0, 10)
        assert live.wire == bytes(blob)  # sealed at commit: the very record the log holds
        copy = pickle.loads(pickle.dumps([live, live]))  # how Ray sends a batch
        assert copy[0].seq == seq == 1 and copy[0].node.content == "the log's bytes"
        assert copy[0].wire == live.wire and copy[0].kind == live.kind and copy[0].data == live.data
        # the pickle carries the record, not the memory's fields again
        assert len(pickle.dumps(live)) < len(live.wire) + 120

    asyncio.run(main())


def test_seq_travels_beside_the_record_and_an_unsealed_event_is_not_frozen():
    ev = Event.decode(Event(*_args("first")).encode(), 0)
    ev.seq = 7  # the log numbers it after the record was made
    assert pickle.loads(pickle.dumps(ev)).seq == 7
    fresh = Event(*_args("mutable"))
    fresh.node.content = "changed before it was sealed"
    assert pickle.loads(pickle.dumps(fresh)).node.content == "changed before it was sealed"
    assert fresh.wire is None  # pickling does not seal


def _args(content: str) -> tuple:
    from memorybus.memory.events import EventKind

    return (EventKind.REMEMBERED, MemoryNode(content=content, scope=Scope("acme")), 1.0, "writer")


def test_many_scope_publishes_from_interleaved_writers_keep_order_per_scope(tmp_path):
    """Four writers commit batches across four scopes in random interleavings, a fifth of
    the pushes are lost; subscribers of different visibility and filters, one of them
    hung, all get exactly what they may see, in order per scope, once each."""

    async def main():
        w = World(tmp_path)
        w.hub = w.new_hub(queue_limit=8, batch_size=4)
        gate = asyncio.Event()

        class Hung(Subscriber):
            async def on_events(self, batch):
                await gate.wait()
                self.got.extend(batch)

        class Slowish(Subscriber):
            async def on_events(self, batch):
                await asyncio.sleep(0.002)
                self.got.extend(batch)

        subs = {
            "u1": (Context("acme", "u1"), EventFilter(), Slowish()),
            "u2": (Context("acme", "u2"), EventFilter(), Subscriber()),
            "writer": (OWNER, EventFilter(), Subscriber()),
            "tagged": (Context("acme", "u1", "writer"), EventFilter.of(tags=["b"]), Slowish()),
            "hung": (Context("acme", "u1"), EventFilter(), Hung()),
        }
        for name, (ctx, flt, target) in subs.items():
            await w.hub.subscribe(name, ctx, flt, target, "on_events")
        rng = random.Random(3)
        written: list[tuple[str, Scope]] = []
        for step in range(30):
            batch = [(f"{rng.choice('ab')}{step}.{k}", rng.choice(SCOPES)) for k in range(rng.randint(1, 6))]
            write_many(w, batch, publish=rng.random() > 0.2)
            written += batch
            await asyncio.sleep(0)  # deliveries interleave with the writers
        expected = {
            name: [(c, s.key) for c, s in written if s.visible_to(ctx) and (not flt.tags or c[0] in flt.tags)]
            for name, (ctx, flt, _) in subs.items()
        }
        live = [n for n in subs if n != "hung"]
        await until(lambda: all(len(Inbox().accept(subs[n][2].got)) == len(expected[n]) for n in live))
        assert subs["hung"][2].got == []  # still hung: it held up no writer and no other subscriber
        gate.set()
        await until(lambda: len(Inbox().accept(subs["hung"][2].got)) == len(expected["hung"]))
        for name, (_, _, target) in subs.items():
            for scope in SCOPES:
                seqs = [e.seq for e in target.got if e.scope_key == scope.key]
                assert seqs == sorted(set(seqs)), (name, scope)  # in order per scope, never twice
            got = sorted((e.node.content, e.scope_key) for e in target.got)
            assert got == sorted(expected[name]), name

    asyncio.run(main())
