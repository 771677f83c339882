"""Maintenance benchmark: a decay sweep over many nodes across shards, and
consolidation throughput.

    python benchmarks/maintenance.py --nodes 1000000 --shards 4

Records are written straight into the shards' stores with small random vectors
before the bus starts (the decay sweep never looks at vectors, and embedding a
million texts would take hours on this machine); then the DecayActor sweeps every shard in parallel at a
simulated time 90 days later. Consolidation is measured through the real model
on clusters of paraphrases.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import emit, parser, prepare_env  # noqa: E402

TEMPLATES = [
    "{who} mentioned that {event}",
    "{who} told me {event}",
    "I heard from {who} that {event}",
    "According to {who}, {event}",
]
EVENTS = [
    "the production deploy failed because the database migration timed out",
    "the quarterly sales numbers beat the forecast by twelve percent",
    "the office cafeteria now serves vegan lunches on Fridays",
    "the new hire in marketing starts on the first of March",
    "the VPN certificate expires at the end of this month",
    "the customer in Lisbon asked for a refund on their annual plan",
    "the team offsite moved from Berlin to a lake house in Bavaria",
    "the mobile app crashes on older Android phones when uploading photos",
    "the CEO wants a security audit before the product launch",
    "the coffee machine on the third floor is broken again",
    "the search index rebuild takes six hours every night",
    "the board approved the budget for two more data engineers",
    "the printer in room 204 jams whenever someone prints double-sided",
    "the legal team flagged the new privacy policy for review",
    "the Kubernetes cluster ran out of memory during the load test",
    "the partner integration with the bank goes live next Tuesday",
    "the annual hackathon theme this year is accessibility",
    "the support backlog doubled after the pricing change",
    "the design team switched from Sketch to Figma",
    "the parking garage will be closed for repairs all of next week",
]


ORG = "bench"  # one org, a user scope per shard: one scoped sweep covers them all


def _load(cfg: object, per: int, stale_share: float, now: float) -> None:
    """``per`` records into each shard's store, with small random vectors, before the bus
    starts: through the plain shard (the actors embed what they store, and embedding a
    million texts would take hours here), as a shard actor would write them."""
    import numpy as np

    import memorybus as mb
    from memorybus.memory.model import MemoryNode
    from memorybus.scopes import Router, shard_name
    from memorybus.shard.build import open_shard

    assert isinstance(cfg, mb.Config)
    rng = np.random.default_rng(0)
    router = Router(cfg.num_shards)
    for s_idx in range(cfg.num_shards):
        # a user whose scope this shard owns
        user = next(f"user{s_idx}-{k}" for k in range(10_000) if router.shard_for(mb.Scope(ORG, f"user{s_idx}-{k}").key)
                    == s_idx)  # fmt: skip
        ctx = mb.Context(ORG, user)
        shard = open_shard(cfg, shard_name(s_idx))
        try:
            for start in range(0, per, 5000):
                n = min(5000, per - start)
                age = np.where(rng.random(n) < stale_share, 120.0, rng.uniform(0, 5, n)) * 86400.0
                nodes = [
                    MemoryNode(content=f"record {s_idx}-{start + i}", scope=mb.Scope(ORG, user),
                               created_at=now - age[i], last_accessed=now - age[i], valid_from=now - age[i],
                               importance=float(rng.integers(1, 8)), confidence=float(rng.uniform(0.5, 1.0)))
                    for i in range(n)
                ]
                vecs = rng.normal(size=(n, cfg.embedding_dim)).astype(np.float32)
                shard.put_many(ctx, nodes, vecs / np.linalg.norm(vecs, axis=1, keepdims=True))
        finally:
            shard.close()
        print(f"  shard {s_idx}: {per} records written", file=sys.stderr)


def main() -> int:
    ap = parser(__doc__, data_dir=True)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--stale", type=float, default=0.05, help="share of nodes old enough to be archived")
    ap.add_argument("--clusters", type=int, default=20, help="consolidation clusters (of 8 paraphrases)")
    args = ap.parse_args()
    prepare_env()
    import ray

    import memorybus as mb

    data = args.data_dir or tempfile.mkdtemp(prefix="mbmaint-")
    result: dict[str, object] = {"nodes": args.nodes, "shards": args.shards}
    # the sweeps run a day or two ahead: the config allows that much injected future
    cfg = mb.Config.embedded(data, num_shards=args.shards, namespace=f"maint_{uuid.uuid4().hex[:6]}",
                             shard_num_cpus=0.0, maintenance_max_future_seconds=3 * 86400.0)
    t, now = time.perf_counter(), time.time()
    _load(cfg, args.nodes // args.shards, args.stale, now)
    result["load_seconds"] = time.perf_counter() - t
    bus = mb.connect(cfg, num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        print(f"loaded {bus.count()} records in {result['load_seconds']:.0f}s", file=sys.stderr)
        org = ORG
        t = time.perf_counter()
        # a sweep a day later: the stale share (untouched for 120 days) falls below the threshold
        status = bus.run_decay(mb.Context(org), now=now + 86400.0)
        result["decay"] = {
            "seconds": time.perf_counter() - t,
            "actor_seconds": status["last_duration"],
            **status["last_counts"],
        }
        t = time.perf_counter()
        status = bus.run_decay(mb.Context(org), now=now + 2 * 86400.0)
        result["decay_second_sweep"] = {"seconds": time.perf_counter() - t, **status["last_counts"]}

        # consolidation throughput on real text
        ctx = mb.Context("consolidation-bench", "u1")
        people = ["Ana", "Ben", "Chloe", "Dev", "Eli", "Fay", "Gus", "Hana"]
        items = [
            TEMPLATES[j % len(TEMPLATES)].format(who=people[j], event=EVENTS[c % len(EVENTS)])
            for c in range(min(args.clusters, len(EVENTS))) for j in range(8)
        ]
        bus.remember_many(items, ctx)
        t = time.perf_counter()
        status = bus.run_consolidation(ctx, now=time.time(), scopes=[ctx.scope.key])
        secs = time.perf_counter() - t
        counts = status["last_counts"]
        result["consolidation"] = {
            "seconds": secs,
            "sources": len(items),
            **counts,
            "sources_per_s": counts.get("sources", 0) / secs if secs else 0.0,
        }
    finally:
        bus.shutdown()
        ray.shutdown()
        if not args.data_dir:
            shutil.rmtree(data, ignore_errors=True)
    d = result["decay"]
    print(f"decay sweep over {d['scanned']} nodes on {args.shards} shards: {d['seconds']:.2f}s "  # type: ignore[index]
          f"({d['archived']} archived)")  # type: ignore[index]
    c = result["consolidation"]
    print(f"consolidation: {c['consolidated']} clusters from {c['sources']} memories in {c['seconds']:.2f}s")  # type: ignore[index]
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
