"""Keyed-fact write rate: concurrent single-call writers and batched ``assert_facts``
through Ray, against the shard's own rate in this process, in one run.

    python benchmarks/fact_groups.py --writers 16 --asserts 100 --batch 50

Through Ray: a one-shard embedded bus (SQLite, ``synchronous=FULL``); ``--writers``
threads of this driver each call ``bus.assert_fact`` ``--asserts`` times (one Ray
call per assertion; the shard group-commits the calls that meet, see
``memorybus.shard.factgroup``), then ``assert_facts`` in batches of ``--batch``.
In process: a plain Shard opened here over its own files as the actor opens its
own, fed the same assertions: ``assert_facts`` in batches of ``--batch`` on one
thread (the shard's in-process rate), ``--writers`` threads of single calls through
the group path, and one thread of plain single ``assert_fact`` calls (one commit
each: the rate without groups). The batched runs alternate, Ray then in process, for
``--rounds`` rounds of the same new assertions (each round's texts are new to both
stores), each after a pause of ``SETTLE_S``; the ratio is the median of the rounds'
ratios (one round lasts a second or two, and single rounds here vary by a third). Each
Ray round also reports the CPU per assertion of the shard, hub and embedder actors and
of this driver, read from ``/proc`` around the round. The rounds' writes are read back
after the last round (a read of a fact's history is audited, and its entry, with every
event's memory id, would be written during the next round).

Ray's floor, in the same run: the same ``--writers`` threads make one call each per
assertion to the same shard actor, a call that does nothing (``pid``), with each
process's CPU per call: what one Ray hop per assertion costs on this machine before
the shard does any work. The single-call run reports the same CPU per assertion.

Every text is embedded once before the clock starts (the embedder's cache then has
it): the write path is measured, not the model. ``--new-values`` adds a Ray run of
single calls whose values the embedder has not seen. Every acknowledged write is
read back from its fact's history: ``lost`` counts the missing ones. All writers
assert one key (``--keys 1``: every write contends for one slot) unless ``--keys``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import emit, log, parser, prepare_env, process_cpu  # noqa: E402

ORG = "factbench"
#: a pause before each batched round: the actors finish what a round left them (the hub's
#: deliveries, the index's catch-up) before the other side's clock starts
SETTLE_S = 2.0


def text(run: str, w: int, i: int) -> str:
    places = ("AWS", "GCP", "Azure", "bare metal", "Fly", "Hetzner")
    return f"The team deploys to {places[(w + i) % len(places)]} from release {run}-{w}.{i}"


def confidence(w: int, i: int) -> float:
    return 0.3 + 0.07 * ((w * 13 + i) % 10)


def threads(writers: int, work: Callable[[int], list[str]]) -> tuple[float, list[str]]:
    """``work(w)`` on ``writers`` threads at once: seconds, acknowledged write ids."""
    out: list[list[str]] = [[] for _ in range(writers)]
    errors: list[BaseException] = []

    def one(w: int) -> None:
        try:
            out[w] = work(w)
        except BaseException as exc:  # reported below: a benchmark that lost a writer says so
            errors.append(exc)

    ts = [threading.Thread(target=one, args=(w,)) for w in range(writers)]
    t = time.perf_counter()
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    elapsed = time.perf_counter() - t
    if errors:
        raise RuntimeError(f"{len(errors)} writers failed: {errors[0]!r}")
    return elapsed, [i for ws in out for i in ws]


def report(label: str, n: int, elapsed: float, acked: list[str], recorded: set[str]) -> dict[str, Any]:
    lost = len(set(acked) - recorded)
    out = {"assertions": n, "acknowledged": len(acked), "seconds": elapsed, "resolved_per_s": n / elapsed,
           "lost": lost}
    print(f"{label}: {n / elapsed:.0f} resolved/s ({n} in {elapsed:.2f}s), lost {lost}", file=sys.stderr)
    return out


def pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Rounds of one kind together: their assertions over their summed time."""
    n, seconds = sum(r["assertions"] for r in runs), sum(r["seconds"] for r in runs)
    return {"assertions": n, "seconds": seconds, "resolved_per_s": n / seconds, "rounds": len(runs),
            "lost": sum(r["lost"] for r in runs)}


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--asserts", type=int, default=100, help="assertions per writer and run")
    ap.add_argument("--batch", type=int, default=50, help="assertions per assert_facts call")
    ap.add_argument("--keys", type=int, default=1, help="writer w asserts key w %% keys")
    ap.add_argument("--rounds", type=int, default=5,
                    help="alternating batched rounds, Ray then in process (every run's texts are embedded "
                         "beforehand and must fit the embedder's cache, Config.embed_cache_size (20,000 texts): "
                         "with 16 writers of 100, at most 9 rounds; more and the Ray rounds embed again)")  # fmt: skip
    ap.add_argument("--new-values", action="store_true", help="also a Ray run of single calls with unseen values")
    ap.add_argument("--ray-only", action="store_true", help="no in-process runs (e.g. a checkout without groups)")
    args = ap.parse_args()
    prepare_env()
    import numpy as np
    import ray

    import memorybus as mb
    from memorybus.actors import handle
    from memorybus.auth.keyring import derived_key
    from memorybus.shard.build import open_shard

    nw, na, nb = args.writers, args.asserts, args.batch
    embedded = nw * na * (max(1, args.rounds) + 3)  # every run's texts but --new-values
    if embedded > mb.Config().embed_cache_size:
        log(f"warning: {embedded} texts embedded beforehand, more than the embedder's cache holds "
            f"({mb.Config().embed_cache_size}): the Ray rounds embed again (model work in their figures)")
    ctx = mb.Context(ORG, agent="writer")
    scope = mb.Scope(ORG)

    def key(w: int) -> str:
        return f"team/deploy_target{w % args.keys}"

    rounds = [f"batched{r}" for r in range(max(1, args.rounds))]
    runs = ("ray-single", *rounds, "local-grouped", "local-plain")
    texts = {r: [[text(r, w, i) for i in range(na)] for w in range(nw)] for r in runs}
    data = tempfile.mkdtemp(prefix="mbfacts-")
    cfg = mb.Config.embedded(f"{data}/bus", num_shards=1, namespace=f"factbench_{uuid.uuid4().hex[:6]}")
    bus = mb.connect(cfg, num_cpus=2, include_dashboard=False, log_to_driver=False)
    result: dict[str, Any] = {"backend": "embedded (sqlite)", "writers": nw, "asserts_per_writer": na, "batch": nb,
                              "keys": args.keys}  # fmt: skip
    try:
        vectors = {r: [bus.embed(texts[r][w]) for w in range(nw)] for r in runs}  # the embedder caches them
        bus.assert_fact("team/warm_up", "warm up", ctx, scope="org")

        def recorded(b: Any) -> set[str]:
            return {e.data["write"] for k in range(args.keys) for e in b.history(f"team/deploy_target{k}", ctx,
                                                                                  scope="org")}  # fmt: skip

        def node(run: str, w: int, i: int, into: str | None = None) -> mb.MemoryNode:
            return mb.MemoryNode(content=texts[run][w][i], scope=scope, key=key(w) + (into or run),
                                 kind=mb.MemoryKind.SEMANTIC, confidence=confidence(w, i),
                                 valid_from=1_700_000_000 + i)  # fmt: skip

        def local_recorded(shard: Any, into: str) -> set[str]:
            return {e.data["write"] for k in range(args.keys)
                    for e in shard.history(ctx, f"team/deploy_target{k}{into}", scope)}  # fmt: skip

        def local_batched(shard: Any, run: str, w: int) -> list[str]:
            """The batched run ``run`` in process, on one key per writer for every round."""
            out: list[str] = []
            for s in range(0, na, nb):
                part = range(s, min(na, s + nb))
                rows = np.asarray(vectors[run][w][s : s + len(part)])
                nodes = [node(run, w, i, into="batched") for i in part]
                out += [r.write_id for r in shard.assert_facts(ctx, nodes, rows)]
            return out

        def ray_single(run: str) -> Callable[[int], list[str]]:
            def work(w: int) -> list[str]:
                return [bus.assert_fact(key(w), texts[run][w][i] if run in texts else text(run, w, i), ctx,
                                        scope="org", confidence=confidence(w, i), valid_from=1_700_000_000 + i).write_id
                        for i in range(na)]  # fmt: skip
            return work

        def ray_batched(run: str) -> Callable[[int], list[str]]:
            def work(w: int) -> list[str]:
                out: list[str] = []
                for s in range(0, na, nb):
                    items = [{"key": key(w), "content": texts[run][w][i], "scope": "org",
                              "confidence": confidence(w, i), "valid_from": 1_700_000_000 + i}
                             for i in range(s, min(na, s + nb))]  # fmt: skip
                    out += [r.write_id for r in bus.assert_facts(items, ctx)]
                return out
            return work

        pids = {kind: int(ray.get(handle(cfg, kind).pid.remote(), timeout=60)) for kind in ("shard", "hub", "embedder")}
        pids["driver"] = os.getpid()

        def cpu_now() -> dict[str, float]:
            return {kind: process_cpu(pid) for kind, pid in pids.items()}

        def ms_per_assertion(since: dict[str, float]) -> dict[str, float]:
            """Each process's CPU since ``since``, in ms per assertion of a run (or call)."""
            return {kind: (cpu - since[kind]) * 1000 / (nw * na) for kind, cpu in cpu_now().items()}

        before = bus.stats()["shards"][0]["process"].get("fact_groups", {"commits": 0})
        cpu0 = cpu_now()
        t, acked = threads(nw, ray_single("ray-single"))
        single_cpu = ms_per_assertion(cpu0)
        after = bus.stats()["shards"][0]["process"].get("fact_groups", {"commits": 0})
        seen = recorded(bus)
        result["ray_single"] = report("through Ray, single assert_fact", nw * na, t, acked, seen)
        result["ray_single"]["group_commits"] = after["commits"] - before["commits"]
        result["ray_single"]["cpu_ms_per_assertion"] = single_cpu
        print(f"  {result['ray_single']['group_commits']} group commits; CPU per assertion: "
              + ", ".join(f"{k} {v:.2f} ms" for k, v in single_cpu.items()), file=sys.stderr)
        # Ray's own floor for the same pattern: the same writers, one call each per
        # assertion to the same shard actor, a call that does nothing (``pid``)
        shard_actor = handle(cfg, "shard")
        cpu0 = cpu_now()
        t, _ = threads(nw, lambda w: [str(ray.get(shard_actor.pid.remote())) for _ in range(na)])
        floor_cpu = ms_per_assertion(cpu0)
        result["ray_floor"] = {"calls": nw * na, "seconds": t, "calls_per_s": nw * na / t,
                               "cpu_ms_per_call": floor_cpu}  # fmt: skip
        print(f"Ray's floor, the same writers' no-op calls to the shard actor: {nw * na / t:.0f} calls/s; CPU per "
              "call: " + ", ".join(f"{k} {v:.2f} ms" for k, v in floor_cpu.items()), file=sys.stderr)
        if args.new_values:
            t, acked = threads(nw, ray_single("new"))
            result["ray_single_new_values"] = report("through Ray, single, unseen values", nw * na, t, acked,
                                                     recorded(bus))  # fmt: skip
        local_cfg = mb.Config.embedded(f"{data}/local", num_shards=1)
        shard = None if args.ray_only else open_shard(local_cfg, "shard-0",
                                                      audit_key=derived_key(local_cfg, "audit checkpoint"))
        # each round's writes are read back once, after the last round: a fact's whole
        # history read after every round would add its read's audit entry (every event's
        # memory id) to the shard's work during the next round
        timed: dict[str, list[tuple[str, float, list[str], dict[str, float]]]] = {"ray": [], "local": []}
        for run in rounds:  # alternating: both sides see the same machine, round by round
            time.sleep(SETTLE_S)
            before = cpu_now()
            t, acked = threads(nw, ray_batched(run))
            spent = ms_per_assertion(before)
            timed["ray"].append((run, t, acked, spent))
            if shard is not None:
                def in_process(_: int, run: str = run, shard: Any = shard) -> list[str]:
                    return [i for w in range(nw) for i in local_batched(shard, run, w)]

                time.sleep(SETTLE_S)
                t, acked = threads(1, in_process)
                timed["local"].append((run, t, acked, {}))
        batched: dict[str, list[dict[str, Any]]] = {"ray": [], "local": []}
        read_back = {"ray": recorded(bus), "local": local_recorded(shard, "batched") if shard is not None else set()}
        for run, t, acked, spent in timed["ray"]:
            batched["ray"].append(report(f"through Ray, assert_facts of {nb} ({run})", nw * na, t, acked,
                                         read_back["ray"]))  # fmt: skip
            batched["ray"][-1]["cpu_ms_per_assertion"] = spent
            print("  CPU per assertion: " + ", ".join(f"{k} {v:.2f} ms" for k, v in spent.items()), file=sys.stderr)
        for run, t, acked, _ in timed["local"]:
            batched["local"].append(report(f"in process, assert_facts of {nb} ({run})", nw * na, t, acked,
                                           read_back["local"]))  # fmt: skip
        result["ray_batched"] = pooled(batched["ray"])
    finally:
        bus.shutdown()
        ray.shutdown()

    if shard is None:
        shutil.rmtree(data, ignore_errors=True)
        emit(result, args.out)
        return 0
    result["local_batched"] = pooled(batched["local"])
    try:
        def local_grouped(w: int) -> list[str]:
            return [shard.assert_fact_grouped(ctx, node("local-grouped", w, i), vectors["local-grouped"][w][i]).write_id
                    for i in range(na)]  # fmt: skip

        def local_plain(w: int) -> list[str]:
            return [shard.assert_fact(ctx, node("local-plain", w, i), vectors["local-plain"][w][i]).write_id
                    for i in range(na)]  # fmt: skip

        t, acked = threads(nw, local_grouped)
        result["local_grouped"] = report("in process, single calls, grouped", nw * na, t, acked,
                                         local_recorded(shard, "local-grouped"))  # fmt: skip
        t, acked = threads(1, lambda _: [i for w in range(nw) for i in local_plain(w)])
        result["local_plain"] = report("in process, single calls, one commit each", nw * na, t, acked,
                                       local_recorded(shard, "local-plain"))  # fmt: skip
    finally:
        shard.close()
        shutil.rmtree(data, ignore_errors=True)
    local = result["local_batched"]["resolved_per_s"]
    result["ratio_ray_single_to_local_batched"] = result["ray_single"]["resolved_per_s"] / local
    floor = result["ray_floor"]["calls_per_s"]
    result["ratio_ray_single_to_ray_floor"] = result["ray_single"]["resolved_per_s"] / floor
    pairs = zip(batched["ray"], batched["local"], strict=True)
    per_round = [r["resolved_per_s"] / lo["resolved_per_s"] for r, lo in pairs]
    result["ratio_ray_batched_to_local_batched_per_round"] = per_round
    result["ratio_ray_batched_to_local_batched"] = statistics.median(per_round)
    single, batched_ratio = result["ratio_ray_single_to_local_batched"], result["ratio_ray_batched_to_local_batched"]
    rounds_line = " ".join(f"{r:.2f}" for r in per_round)
    print(f"ratio through Ray / in process (assert_facts of {nb}): single {single:.2f}, batched {batched_ratio:.2f}"
          f" (median of rounds {rounds_line}); single calls / Ray's no-op floor "
          f"{result['ratio_ray_single_to_ray_floor']:.2f}", file=sys.stderr)
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
