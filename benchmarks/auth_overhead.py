"""What credential checks cost: the same ingest and recall through two buses in one run,
one verifying a credential on every call (``auth="credentials"``, an agent's handle) and
one taking contexts as given (``auth="trusted"``).

Both buses run side by side on one local Ray (same shards, same embedder settings, each
its own data directory and namespace) and get the same texts and queries, interleaved
call by call (A, B, B, A, ...), so load on the machine falls on both alike. Timed:
``remember_many`` calls (model work included: the shard embeds what it stores) and
single ``recall(k=10)`` calls (query embedding included). What it leaves out: the
one-off cost of ``connect`` and of minting the credential. The ratios are
credentials / trusted: 1.0 means the checks cost nothing measurable. The two buses have
an embedder process each, so the ratios also carry how the machine shares its cores
between those two processes (``--trusted-first`` swaps which is created first); the
check itself is timed apart too: ``check_us_per_call`` is one ``Gatekeeper.admit`` as a
shard makes it (credential remembered), and ``check_share_of_recall_p50`` its share of
the credentials bus's recall p50 (a recall makes one admission per shard it asks).

Example::

    python benchmarks/auth_overhead.py --n 3000 --queries 300
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import emit, make_queries, make_texts, parser, percentiles_ms, prepare_env  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--n", type=int, default=3000)
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--batch", type=int, default=250, help="items per remember_many call")
    p.add_argument("--trusted-first", action="store_true", help="create the trusted bus first (order effects)")
    args = p.parse_args(argv)
    ray_tmp = prepare_env()
    import memorybus
    from memorybus import Config, Context

    root = tempfile.mkdtemp(prefix="mb-auth-")
    texts = make_texts(args.n, seed=3)
    queries = make_queries(args.queries, seed=4, exclude=set(texts))
    buses = {}
    try:
        for mode in ("trusted", "credentials") if args.trusted_first else ("credentials", "trusted"):
            cfg = Config.embedded(f"{root}/{mode}", num_shards=2, namespace=f"auth-{mode}", auth=mode)  # type: ignore[arg-type]
            buses[mode] = memorybus.connect(cfg, num_cpus=3, include_dashboard=False, log_to_driver=False)
            buses[mode].warm_up()  # this process's query model, loaded behind connect: timed recalls embed here
        ctx = Context("acme", "u1", "bench")
        agent = buses["credentials"].agent_handle("acme", "u1", "bench")
        handles = {"credentials": agent, "trusted": buses["trusted"]}
        ingest = dict.fromkeys(handles, 0.0)
        recall: dict[str, list[float]] = {m: [] for m in handles}
        order = [("credentials", "trusted"), ("trusted", "credentials")]
        for i, start in enumerate(range(0, args.n, args.batch)):
            chunk = texts[start : start + args.batch]
            for mode in order[i % 2]:
                t = time.perf_counter()
                handles[mode].remember_many(chunk, ctx)
                ingest[mode] += time.perf_counter() - t
        for handle in handles.values():  # warm: the query encoder and each shard's first read
            for q in queries[:5]:
                handle.recall(q, ctx, k=10)
        for i, q in enumerate(queries):
            for mode in order[i % 2]:
                t = time.perf_counter()
                handles[mode].recall(q, ctx, k=10)
                recall[mode].append(time.perf_counter() - t)
        ms = {m: percentiles_ms(v) for m, v in recall.items()}
        check_us = _check_cost(buses["credentials"].config, agent._credential)
        result = {
            "n": args.n, "queries": args.queries,
            "ingest_seconds": ingest,
            "recall_ms": ms,
            "check_us_per_call": check_us,
            "check_share_of_recall_p50": check_us / 1000 / ms["credentials"]["p50"],
            "ratio": {
                "ingest_time": ingest["credentials"] / ingest["trusted"],
                "recall_p50": ms["credentials"]["p50"] / ms["trusted"]["p50"],
                "recall_p95": ms["credentials"]["p95"] / ms["trusted"]["p95"],
            },
        }  # fmt: skip
        emit(result, args.out)
    finally:
        for b in buses.values():
            b.shutdown()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    return 0


def _check_cost(config: object, credential: str, calls: int = 20_000) -> float:
    """Microseconds one admission costs in a shard (the credential remembered, as in a
    running actor): ``Gatekeeper.admit`` on the agent's own context, ``calls`` times."""
    from memorybus import Context
    from memorybus.auth import gatekeeper_for, peek

    gate = gatekeeper_for(config)
    grant = peek(credential)
    ctx = Context(grant.org, grant.user, grant.agent, credential=credential)
    gate.admit(ctx, "recall", write=False)
    t = time.perf_counter()
    for _ in range(calls):
        gate.admit(ctx, "recall", write=False)
    return (time.perf_counter() - t) / calls * 1e6


if __name__ == "__main__":
    sys.exit(main())
