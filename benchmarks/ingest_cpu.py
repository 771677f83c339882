"""Ingest's CPU outside the model: CPU per memory of every process that works on a
``remember_many``, read from ``/proc``, against the shard's own write path in this process.

    python benchmarks/ingest_cpu.py --memories 4000 --batch 100

Through Ray: a one-shard embedded bus (SQLite ``synchronous=FULL``, Qdrant Edge), one user
scope; this driver calls ``remember_many`` with ``--batch`` chat-like texts at a time
(``benchmarks.common.make_texts``: a dated prefix, names, a sentence). Every text is
embedded through the bus once before the clock starts, so the embedder answers from its
cache: what is timed is everything the bus does per memory except the model's forward
pass (the embedder's cache lookup and the vectors' trip stay in). For each round the CPU
(user + system) of the shard, hub, embedder and maintenance actors, of this driver, and
of Ray's own daemons (raylet, GCS; found by the session directory in their command
lines) is read before and after, and divided by the memories written; ``all`` adds them
up. The machine's busy time from ``/proc/stat`` over the same span is printed beside it
(it includes anything else running).

In process: a plain Shard opened here over files of its own, fed the same kind of texts
with random unit vectors through ``Shard.put_many`` in batches of ``--batch`` (the shard's
write path with no Ray, no embedder, no hub): its CPU per memory from
``time.process_time``. Rounds alternate, Ray then in process; each figure is the median of
the rounds. Every acknowledged memory is read back (``get``) after the last round:
``lost`` counts the missing ones.

Left out: the model's forward pass (measured by ``benchmarks/gpu_embed.py`` and ``memorybus
eval``), the first start of the actors, and the delivery of events to subscribers (there
are none; ``benchmarks/bus.py`` times fan-out).
"""

from __future__ import annotations

import os
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

from benchmarks.common import emit, log, make_texts, parser, prepare_env, process_cpu  # noqa: E402

#: a pause before each round: the actors finish what the last one left them (the hub's
#: publishing, the index's catch-up) before the clock starts
SETTLE_S = 2.0


def machine_busy() -> float:
    """Seconds of CPU the whole machine has spent busy (``/proc/stat``: all but idle and iowait)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def session_processes(session_dir: str) -> dict[int, str]:
    """Every process of this Ray session: its daemons (found by the session directory in
    their command lines) and all their descendants (the workers), pid: name."""
    parent: dict[int, int] = {}
    names: dict[int, str] = {}
    roots: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        parent[pid] = int(stat.rsplit(")", 1)[1].split()[1])
        names[pid] = stat[stat.index("(") + 1 : stat.rindex(")")]
        if session_dir.encode() in cmd:
            roots.add(pid)
    found: dict[int, str] = {}
    for pid in parent:
        p = pid
        while p > 1:
            if p in roots:
                found[pid] = names[pid]
                break
            p = parent.get(p, 0)
    return found


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--memories", type=int, default=4000, help="memories per round")
    ap.add_argument("--batch", type=int, default=100, help="memories per remember_many / put_many call")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds, Ray then in process")
    args = ap.parse_args()
    prepare_env()
    import numpy as np
    import ray

    import memorybus as mb
    from memorybus.actors import handle
    from memorybus.auth.keyring import derived_key
    from memorybus.shard.build import open_shard

    n, nb, rounds = args.memories, args.batch, max(1, args.rounds)
    cache = mb.Config().embed_cache_size
    if n * rounds > cache:
        log(f"warning: {n * rounds} texts, more than the embedder's cache holds ({cache}): the model runs again")
    texts = make_texts(n * rounds * 2, seed=7)
    ray_texts = [texts[r * n : (r + 1) * n] for r in range(rounds)]
    local_texts = [texts[(rounds + r) * n : (rounds + r + 1) * n] for r in range(rounds)]
    ctx = mb.Context("ingestbench", "u1", "writer", "s1")
    data = tempfile.mkdtemp(prefix="mbingest-")
    cfg = mb.Config.embedded(f"{data}/bus", num_shards=1, namespace=f"ingestbench_{uuid.uuid4().hex[:6]}")
    bus = mb.connect(cfg, num_cpus=2, include_dashboard=False, log_to_driver=False)
    local_cfg = mb.Config.embedded(f"{data}/local", num_shards=1)
    shard = open_shard(local_cfg, "shard-0", audit_key=derived_key(local_cfg, "audit checkpoint"))
    rng = np.random.default_rng(0)
    result: dict[str, Any] = {"memories_per_round": n, "batch": nb, "rounds": rounds,
                              "backend": "embedded (sqlite + qdrant edge), one shard"}  # fmt: skip
    per_round: list[dict[str, float]] = []
    local_ms: list[float] = []
    acked: list[str] = []
    try:
        for part in ray_texts:  # what the shard will embed for them, into the embedder's cache
            said = shard.embedding_texts(ctx, [mb.MemoryNode(content=x, scope=ctx.scope) for x in part])
            for lo in range(0, n, 1000):
                bus.embed(said[lo : lo + 1000])
        embedder = handle(cfg, "embedder")
        bus.remember("warm up", ctx)
        pids = {kind: int(ray.get(handle(cfg, kind).pid.remote(), timeout=60)) for kind in ("shard", "hub", "embedder")}
        pids["driver"] = os.getpid()
        session = ray._private.worker.global_worker.node.get_session_dir_path()
        for r in range(rounds):
            time.sleep(SETTLE_S)
            others = {pid: name for pid, name in session_processes(session).items() if pid not in pids.values()}
            before = {kind: process_cpu(pid) for kind, pid in pids.items()}
            before_others = {pid: process_cpu(pid) for pid in others}
            encoded = ray.get(embedder.stats.remote(), timeout=60)["encoded"]
            busy, t = machine_busy(), time.perf_counter()
            for lo in range(0, n, nb):
                acked += [m.id for m in bus.remember_many(ray_texts[r][lo : lo + nb], ctx)]
            elapsed = time.perf_counter() - t
            busy = machine_busy() - busy
            spent = {kind: (process_cpu(pid) - before[kind]) * 1000 / n for kind, pid in pids.items()}
            # every other process of the session: Ray's daemons, the maintenance actors, idle workers
            # (a process started during the round counts from zero)
            later = [(process_cpu(pid) - before_others.get(pid, 0.0), name)
                     for pid, name in session_processes(session).items() if pid not in pids.values()]  # fmt: skip
            spent["ray_other"] = sum(s for s, _ in later) * 1000 / n
            top = sorted(later, reverse=True)[:4]
            log("  largest other processes: " + ", ".join(f"{name} {s * 1000 / n:.3f} ms" for s, name in top))
            spent["all"] = sum(spent.values())
            spent["embedded_anew"] = ray.get(embedder.stats.remote(), timeout=60)["encoded"] - encoded
            spent["machine"] = busy * 1000 / n
            spent["per_s"] = n / elapsed
            per_round.append(spent)
            log(f"round {r} through Ray: {n / elapsed:.0f} memories/s; CPU per memory: "
                + ", ".join(f"{k} {v:.3f} ms" for k, v in spent.items() if k not in ("per_s", "embedded_anew"))
                + f"; texts the model embedded: {spent['embedded_anew']:.0f}")
            time.sleep(SETTLE_S)
            vecs = rng.standard_normal((n, 384), dtype=np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            c0 = time.process_time()
            for lo in range(0, n, nb):
                nodes = [mb.MemoryNode(content=x, scope=ctx.scope) for x in local_texts[r][lo : lo + nb]]
                shard.put_many(ctx, nodes, vecs[lo : lo + nb])
            local_ms.append((time.process_time() - c0) * 1000 / n)
            log(f"round {r} in process: Shard.put_many {local_ms[-1]:.3f} ms of CPU per memory")
        lost = 0
        for memory_id in acked:
            try:
                bus.get(memory_id, ctx)
            except mb.MemoryNotFound:
                lost += 1
        result["lost"] = lost
    finally:
        bus.shutdown()
        ray.shutdown()
        shard.close()
        shutil.rmtree(data, ignore_errors=True)
    keys = list(per_round[0])
    result["through_ray_ms_per_memory"] = {k: round(statistics.median(p[k] for p in per_round), 4) for k in keys}
    result["through_ray_rounds"] = per_round
    result["in_process_put_many_ms_per_memory"] = round(statistics.median(local_ms), 4)
    result["in_process_rounds"] = local_ms
    med = result["through_ray_ms_per_memory"]
    log(f"median CPU per memory through Ray: all processes {med['all']:.3f} ms (shard {med['shard']:.3f}, "
        f"hub {med['hub']:.3f}, embedder {med['embedder']:.3f}, driver {med['driver']:.3f}); "
        f"in process put_many {result['in_process_put_many_ms_per_memory']:.3f} ms; lost {result['lost']}")
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
