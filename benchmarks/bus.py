"""Bus benchmark: broadcast fan-out latency to many subscriber actors, and resolved
``assert_fact`` throughput with concurrent writers (lost updates counted).

Every assertion carries a value the embedder has not seen (the model runs for
each one, as for a real fact); the same run also times assertions whose values
repeat six pre-embedded texts, reported apart as ``assert_fact_cached_values``.

    python benchmarks/bus.py --subscribers 100 --writers 16 --asserts 200
    python benchmarks/bus.py --subscribers 0 --writers 0 --many-actors 50 --subs-per-actor 20

Fan-out latency is measured from the moment the shard stamps an event (just
before its durable commit) to the moment a subscriber actor receives it. The
baseline, in the same run and to the same subscriber actors, is a plain async
actor calling every subscriber once per event (stamped just before the calls):
the floor any Ray actor fan-out pays on this machine. By default the two take
turns, a bus broadcast then a plain fan-out, ``--pause`` seconds apart, and
nobody asks the hub anything meanwhile; ``--pause 0`` is the older protocol (all
the bus's broadcasts first, the driver polling the hub every 5 ms for its
delivery count after each, then the plain fan-outs).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import emit, parser, prepare_env  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    from memorybus.latency import percentile

    value = percentile(xs, q)
    return float("nan") if value is None else value


def delivered(bus: Any) -> int:
    """Events the hub actors delivered so far (one cheap call per hub: their totals, not
    the per-subscription stats)."""
    return sum(h["delivered"] for h in bus.hub_stats())


def started(cls: Any, n: int, ready: str) -> list[Any]:
    """``n`` actors of ``cls``, each up (it answered its method ``ready``)."""
    import ray

    actors = [cls.remote() for _ in range(n)]
    ray.get([getattr(a, ready).remote() for a in actors], timeout=600)
    return actors


def fanout(bus: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Broadcast ``args.events`` memories to an org with ``args.subscribers`` subscriber
    actors; latency from the event's stamp (before its commit) to its receipt."""
    import ray

    import memorybus as mb

    @ray.remote(num_cpus=0)
    class Sub:
        def __init__(self) -> None:
            self.lat: list[float] = []
            self.plain: list[float] = []

        def on_events(self, batch: list) -> None:
            now = time.time()
            for e in batch:  # the plain fan-out's stamps say so; the bus's events are Events
                (self.plain if getattr(e, "plain", False) else self.lat).append(now - e.at)

        def latencies(self) -> tuple[list[float], list[float]]:
            return self.lat, self.plain

        def reset(self) -> None:
            self.lat, self.plain = [], []

    @ray.remote(num_cpus=0)
    class PlainFanout:
        """The floor: one async actor calling every subscriber's method once per event
        (what any Ray fan-out pays), with no store, log, filter or cursor."""

        def __init__(self, subs: list) -> None:
            self.subs = subs

        async def send(self, content: str) -> None:
            import asyncio
            import types

            stamp = types.SimpleNamespace(at=time.time(), content=content, plain=True)
            await asyncio.gather(*(s.on_events.remote([stamp]) for s in self.subs))

    org = f"fanout-{uuid.uuid4().hex[:6]}"  # its own subscriptions, however often this runs
    writer = mb.Context(org, "u1", "announcer")
    t = time.time()
    subs = started(Sub, args.subscribers, "latencies")
    for i, s in enumerate(subs):
        bus.subscribe(mb.Context(org, f"user{i}", f"agent{i}"), target=s, name=f"fan-{i}")
    print(f"started {len(subs)} subscriber actors in {time.time() - t:.1f}s", file=sys.stderr)
    plain = PlainFanout.remote(subs)

    # wait on the hub actor's delivery count, not on every subscriber: polling 100
    # actors would load the cores the fan-out needs
    def wait_for(target: int, timeout: float) -> None:
        deadline = time.time() + timeout
        while delivered(bus) < target and time.time() < deadline:
            time.sleep(0.005)

    def announce(i: int) -> None:
        n = bus.remember(f"announcement {i}: the release train leaves at {i % 12 + 1} pm", writer)
        bus.broadcast(n.id, "org", writer)

    base = delivered(bus)
    announce(-1)  # warm-up, both sides (not counted)
    wait_for(base + len(subs), 120)
    ray.get(plain.send.remote("warm-up"))
    ray.get([s.reset.remote() for s in subs])
    start = delivered(bus)
    if args.pause > 0:
        # interleaved: a bus broadcast, a pause, a plain fan-out, a pause, ...; nobody asks
        # the hub anything meanwhile, and both sides see the same machine, event by event
        sent = []
        for i in range(args.events):
            announce(i)
            time.sleep(args.pause)
            sent.append(plain.send.remote(f"announcement {i}"))
            time.sleep(args.pause)
        ray.get(sent)
        wait_for(start + args.events * len(subs), 120)
    else:
        # the bus's events first (after each, the hub polled every 5 ms until it delivered),
        # then the plain fan-out's, each awaited
        for i in range(args.events):
            base = delivered(bus)
            announce(i)
            wait_for(base + len(subs), 60)
            time.sleep(args.gap)
        for i in range(args.events):
            ray.get(plain.send.remote(f"announcement {i}"))
            time.sleep(args.gap)
    got = ray.get([s.latencies.remote() for s in subs])
    lat = [x * 1000 for bus_side, _ in got for x in bus_side]
    floor = [x * 1000 for _, plain_side in got for x in plain_side]
    # subscriptions that fell behind or saw a gap and read the log instead of the push
    replays = sum(s["replays"] for s in bus.bus_stats(mb.Context(org))["subscriptions"].values())
    ray.kill(plain)
    for s in subs:
        ray.kill(s)
    out = {
        "subscribers": len(subs),
        "events": args.events,
        "deliveries": len(lat),
        "expected_deliveries": args.events * len(subs),
        "p50_ms": pct(lat, 50),
        "p99_ms": pct(lat, 99),
        "mean_ms": statistics.fmean(lat),
        "plain_ray_p50_ms": pct(floor, 50),
        "plain_ray_p99_ms": pct(floor, 99),
        "ratio_p50": pct(lat, 50) / pct(floor, 50),
        "ratio_p99": pct(lat, 99) / pct(floor, 99),
        "replays": replays,
    }
    print(
        f"fan-out to {len(subs)} subscribers: p50 {out['p50_ms']:.1f} ms, p99 {out['p99_ms']:.1f} ms "
        f"({len(lat)}/{out['expected_deliveries']} deliveries); plain Ray fan-out in the same run: "
        f"p50 {out['plain_ray_p50_ms']:.1f} ms, p99 {out['plain_ray_p99_ms']:.1f} ms; {replays} replays",
        file=sys.stderr,
    )
    return out


def many_subscribers(bus: Any, args: argparse.Namespace) -> dict[str, Any]:
    """``args.many_actors`` subscriber actors holding ``args.subs_per_actor`` subscriptions
    each (one method per subscription, so each counts its own); writers commit
    ``args.many_events`` org-scope memories in batches of ``args.many_batch``. Reports
    deliveries per second (every subscription sees every event: events x subscriptions,
    from the first event's stamp to the last receipt), events lost (expected but never
    received, per subscription) and duplicates."""
    import ray

    import memorybus as mb

    per = args.subs_per_actor

    def method(j: int) -> Any:
        def on(self: Any, batch: list) -> None:
            now = time.time()
            got = self.got[j]
            for e in batch:
                key = (e.scope_key, e.seq)
                if key in got:
                    self.dup += 1
                got.add(key)
            self.calls += 1
            self.first = min(self.first, *(e.at for e in batch))
            self.last = now

        on.__name__ = f"on_{j}"
        return on

    def init(self: Any) -> None:
        self.got = [set() for _ in range(per)]
        self.dup = self.calls = 0
        self.first, self.last = float("inf"), 0.0

    def report(self: Any) -> dict[str, Any]:
        return {"got": [len(g) for g in self.got], "dup": self.dup, "calls": self.calls,
                "first": self.first, "last": self.last}

    body = {"__init__": init, "report": report} | {f"on_{j}": method(j) for j in range(per)}
    many_cls = ray.remote(num_cpus=0)(type("ManySubscriber", (), body))

    org = "many"
    writer = mb.Context(org, "w", "writer")
    t = time.time()
    actors = started(many_cls, args.many_actors, "report")
    for a, actor in enumerate(actors):
        for j in range(per):
            bus.subscribe(mb.Context(org, f"user{a}", f"agent{a}-{j}"), target=actor, method=f"on_{j}",
                          name=f"many-{a}-{j}")
    subs = len(actors) * per
    print(f"{subs} subscriptions on {len(actors)} actors in {time.time() - t:.1f}s", file=sys.stderr)

    texts = [f"team notice {i}: standup moves to {i % 9 + 9} am" for i in range(args.many_events)]
    bus.embed(texts)  # the embedder's cache has them: the run times delivery, not the model
    base = delivered(bus)
    expected = args.many_events * subs
    write_s: list[float] = []
    t0 = time.time()
    for start in range(0, args.many_events, args.many_batch):
        items = [{"content": t, "scope": "org"} for t in texts[start:start + args.many_batch]]
        w = time.perf_counter()
        bus.remember_many(items, writer)  # a writer's call returns once its batch is durable
        write_s.append(time.perf_counter() - w)
    writes_done = time.time() - t0
    deadline = time.time() + args.many_timeout
    while delivered(bus) < base + expected and time.time() < deadline:
        time.sleep(0.05)
    reports = ray.get([a.report.remote() for a in actors], timeout=120)
    replays = sum(s["replays"] for s in bus.bus_stats(mb.Context(org))["subscriptions"].values())
    for actor in actors:
        ray.kill(actor)
    received = sum(sum(r["got"]) for r in reports)
    first = min(r["first"] for r in reports)
    last = max(r["last"] for r in reports)
    out = {
        "subscriptions": subs,
        "actors": len(actors),
        "events": args.many_events,
        "expected_deliveries": expected,
        "delivered": received,
        "lost": expected - received,
        "duplicates": sum(r["dup"] for r in reports),
        "calls": sum(r["calls"] for r in reports),
        "replays": replays,  # subscriptions that fell behind (queue bound) or saw a gap, and read the log
        "seconds": last - first,
        "deliveries_per_s": received / max(1e-9, last - first),
        "writes_seconds": writes_done,
        "write_call_p50_ms": pct([x * 1000 for x in write_s], 50),
        "write_call_max_ms": max(write_s) * 1000,
    }
    print(
        f"{subs} subscriptions ({len(actors)} actors): {received}/{expected} delivered, lost {out['lost']}, "
        f"{out['deliveries_per_s']:.0f} deliveries/s in {out['calls']} calls; writers done in {writes_done:.2f}s",
        file=sys.stderr,
    )
    return out


def resolved_asserts(bus: Any, args: argparse.Namespace) -> dict[str, Any]:
    """``args.writers`` Ray tasks assert values of one key, one call per assertion and
    then in batches; every acknowledged write must be in the key's history.

    With ``--orgs 1`` every writer hits the same fact (the worst case: one slot, one
    shard, every write contending); with ``--orgs N`` writer ``w`` asserts the key in
    org ``w % N``, so the facts spread over the shards as a team's facts would."""
    import ray

    import memorybus as mb

    key = "team/deploy_target"
    targets = ("AWS", "GCP", "Azure", "bare metal", "Fly", "Hetzner")
    cached = [f"The team deploys to {x}" for x in targets]
    bus.embed(cached)  # the cached variant: the embedder has these, as it would for any repeated value

    def value(w: int, i: int, run: str) -> str:
        if run == "cached":
            return cached[(w + i) % len(cached)]
        # a value never seen before: the embedder must run the model for it
        return f"The team deploys to {targets[(w + i) % len(targets)]} from release {run}-{w}.{i}"

    @ray.remote(num_cpus=0)
    def writer_task(b: mb.MemoryBus, w: int, n: int, run: str, wkey: str) -> list[str]:
        ctx = mb.Context(f"facts{w % args.orgs}", agent=f"writer{w}")
        out = []
        for i in range(n):
            r = b.assert_fact(
                wkey,
                value(w, i, run),
                ctx,
                scope="org",
                confidence=0.3 + 0.07 * ((w * 13 + i) % 10),
                valid_from=1_700_000_000 + i,
            )
            out.append(r.write_id)
        return out

    @ray.remote(num_cpus=0)
    def batch_writer(b: mb.MemoryBus, w: int, n: int, size: int, bkey: str) -> list[str]:
        ctx = mb.Context(f"facts{w % args.orgs}", agent=f"writer{w}")
        out: list[str] = []
        for start in range(0, n, size):
            items = [
                {
                    "key": bkey,
                    "content": value(w, i, "batched"),
                    "scope": "org",
                    "confidence": 0.3 + 0.07 * ((w * 13 + i) % 10),
                    "valid_from": 1_700_000_000 + i,
                }
                for i in range(start, min(n, start + size))
            ]
            out += [r.write_id for r in b.assert_facts(items, ctx)]
        return out

    def measure(label: str, refs_of: Any, hkey: str) -> dict[str, Any]:
        t = time.perf_counter()
        writes = ray.get(refs_of(), timeout=900)
        elapsed = time.perf_counter() - t
        acked = {i for ws in writes for i in ws}
        recorded = {
            e.data["write"]
            for org in range(args.orgs)
            for e in bus.history(hkey, mb.Context(f"facts{org}"), scope="org")
        }
        n = args.writers * args.asserts
        out = {
            "writers": args.writers,
            "orgs": args.orgs,
            "assertions": n,
            "seconds": elapsed,
            "resolved_per_s": n / elapsed,
            "lost_updates": len(acked - recorded),
        }
        print(
            f"{label}, {args.writers} writers: {n / elapsed:.0f} resolved/s, lost updates {out['lost_updates']}",
            file=sys.stderr,
        )
        return out

    # each writer task gets an agent's handle (the operator's handle never leaves this process)
    handles = [bus.agent_handle(f"facts{w % args.orgs}", agent=f"writer{w}") for w in range(args.writers)]
    # start the writer processes first, so process start-up is not timed
    ray.get([writer_task.remote(handles[w], w, 1, "warm", "team/warm_up") for w in range(args.writers)], timeout=300)
    single = measure(
        "assert_fact (new values)",
        lambda: [writer_task.remote(handles[w], w, args.asserts, "single", key) for w in range(args.writers)],
        key,
    )
    bkey = "team/deploy_target_batched"
    batched = measure(
        f"assert_facts (new values, batches of {args.batch})",
        lambda: [batch_writer.remote(handles[w], w, args.asserts, args.batch, bkey) for w in range(args.writers)],
        bkey,
    )
    ckey = "team/deploy_target_cached"
    cached_run = measure(
        "assert_fact (cached values)",
        lambda: [writer_task.remote(handles[w], w, args.asserts, "cached", ckey) for w in range(args.writers)],
        ckey,
    )
    return {
        "assert_fact": single | {"values": "new (model work per assertion)"},
        "assert_facts_batched": batched | {"batch": args.batch, "values": "new (model work per assertion)"},
        "assert_fact_cached_values": cached_run | {"values": "six repeated, pre-embedded texts"},
    }


def main() -> int:
    ap = parser(__doc__, data_dir=True)
    ap.add_argument("--subscribers", type=int, default=100)
    ap.add_argument("--events", type=int, default=30, help="broadcasts measured")
    ap.add_argument("--gap", type=float, default=0.05, help="with --pause 0: seconds after each delivered broadcast")
    ap.add_argument("--pause", type=float, default=0.6,
                    help="seconds between a bus broadcast and a plain fan-out, taken in turn, with "
                         "nobody polling the hub; 0: the bus's broadcasts first, each followed by "
                         "polling the hub every 5 ms until it delivered and a wait of GAP, then the "
                         "plain fan-outs, each awaited")
    ap.add_argument("--many-actors", type=int, default=0, help="the many-subscriber run: actors (0: skip)")
    ap.add_argument("--subs-per-actor", type=int, default=20)
    ap.add_argument("--many-events", type=int, default=200)
    ap.add_argument("--many-batch", type=int, default=20, help="memories per remember_many call")
    ap.add_argument("--many-timeout", type=float, default=300.0)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--orgs", type=int, default=1, help="writers spread their facts over this many orgs")
    ap.add_argument("--asserts", type=int, default=200, help="assert_fact calls per writer")
    ap.add_argument("--batch", type=int, default=50, help="assertions per assert_facts call")
    ap.add_argument("--backend", choices=["embedded", "redis"], default="embedded")
    ap.add_argument("--redis-url", default=None)
    args = ap.parse_args()
    prepare_env()
    import ray

    import memorybus as mb

    data = args.data_dir or tempfile.mkdtemp(prefix="mbbus-")
    ns = f"bench_{uuid.uuid4().hex[:6]}"
    if args.backend == "redis":
        cfg = mb.Config.redis(args.redis_url, data_dir=data, num_shards=2, namespace=ns)
    else:
        cfg = mb.Config.embedded(data, num_shards=2, namespace=ns)
    bus = mb.connect(cfg, num_cpus=2, include_dashboard=False, log_to_driver=False)
    result: dict[str, object] = {"backend": args.backend}
    try:
        if args.subscribers > 0:
            result["fanout"] = fanout(bus, args)
        if args.many_actors > 0:
            result["many"] = many_subscribers(bus, args)
        if args.writers > 0:
            result |= resolved_asserts(bus, args)
    finally:
        bus.shutdown()
        ray.shutdown()
        if not args.data_dir:
            shutil.rmtree(data, ignore_errors=True)
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
