"""Tune and check recall quality on the dev files, fast: the shard's own search, no Ray.

Builds each memory exactly as ``remember_many`` does (``memorybus.memory.items``), with
the loaders' items for each mode (``structured``: declared thread / position /
speaker; ``plain``: text and event time only), stores them in a plain
:class:`~memorybus.shard.Shard` (SQLite + Qdrant Edge in a temp dir) and asks
every dev question through ``Shard.search`` — the code a recall runs in the
shard actor. Embeddings come from the bus's own encoder and are cached on disk
(``--cache``), so a rerun costs seconds. The same run scores the baselines
(English BM25, plain BM25, dense, RRF) on the same texts.

This is the script behind every tuned ``RankingWeights`` default: it only reads
the dev files (never a test split). ``--weight NAME=VALUE`` overrides a default;
``--grid NAME=V1,V2,...`` (repeatable) scores every combination, best first.

Examples::

    python benchmarks/tune_recall.py locomo --data ../shared/data/locomo/locomo_dev.json
    python benchmarks/tune_recall.py locomo --data ... --grid neighbor=0.1,0.2,0.3 --grid thread=0.2,0.4
    python benchmarks/tune_recall.py longmemeval --data ../shared/data/longmemeval/longmemeval_s_dev48.json
    python benchmarks/tune_recall.py locomo --data ... --calibrate   # the cosine scale behind the floor
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import numpy as np  # noqa: E402

from benchmarks.common import log  # noqa: E402


class CachedEncoder:
    """The bus's encoder (``Embedder``, lean path) with a content-hash cache on disk, one
    file per model (``model``: ``Config.model_path``; None: the shipped MiniLM)."""

    def __init__(self, cache_dir: str, threads: int = 2, model: str | None = None) -> None:
        from memorybus.config import Config
        from memorybus.encoder.modelinfo import model_fingerprint

        cfg = Config(model_path=model)
        self.model_path = cfg.resolved_model_path()
        self.dim = cfg.vector_dim()
        name = "vectors.npz" if model is None else f"vectors-{model_fingerprint(self.model_path)}.npz"
        self.path = Path(cache_dir) / name
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.threads = threads
        self._model: Any = None
        self._vecs: dict[str, np.ndarray] = {}
        if self.path.exists():
            with np.load(self.path) as f:
                self._vecs = {k: f[k] for k in f.files}
        self._dirty = False

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in self._vecs))
        if missing:
            if self._model is None:
                from memorybus.encoder.embedding import Embedder

                self._model = Embedder(self.model_path, threads=self.threads, cache_size=0)
            log(f"encoding {len(missing)} texts")
            for start in range(0, len(missing), 512):
                part = missing[start : start + 512]
                for t, v in zip(part, self._model.encode(part), strict=True):
                    self._vecs[self._key(t)] = v
            self._dirty = True
        return np.stack([self._vecs[k] for k in keys]) if keys else np.zeros((0, self.dim), np.float32)

    def save(self) -> None:
        if self._dirty:
            tmp = self.path.with_suffix(".tmp.npz")
            np.savez(tmp, **self._vecs)
            tmp.replace(self.path)
            self._dirty = False


class Harness:
    """One shard holding one mode's memories; ``ask`` runs a recall there."""

    def __init__(self, encoder: CachedEncoder, ranking: Any) -> None:
        from memorybus.clock import ManualClock
        from memorybus.shard import Shard
        from memorybus.storage.sqlite import SqliteStore
        from memorybus.storage.vectors import EdgeVectorIndex

        self.dir = tempfile.mkdtemp(prefix="mb-tune-")
        self.encoder = encoder
        self.clock = ManualClock(time.time())
        dim = encoder.dim
        self.shard = Shard("shard-0", SqliteStore(f"{self.dir}/r.sqlite"), EdgeVectorIndex(f"{self.dir}/v", dim),
                           dim=dim, clock=self.clock, ranking=ranking)  # fmt: skip

    def store(self, items: list[dict[str, Any]], context: Any) -> list[Any]:
        from memorybus.memory.items import build_memory

        out = []
        for start in range(0, len(items), 256):  # the client's ingest chunk
            nodes = [build_memory(it, context, self.clock.now()) for it in items[start : start + 256]]
            vecs = self.encoder.encode(self.shard.embedding_texts(context, nodes))  # what the shard embeds
            out += self.shard.put_many(context, nodes, vecs)
        return out

    def ask(self, context: Any, query: str, k: int, reference: float) -> list[Any]:
        from memorybus.retrieval import RecallOptions
        from memorybus.retrieval.query import query_texts

        vec = self.encoder.encode(query_texts(query))
        opts = RecallOptions(reference_time=reference, touch=False)
        return self.shard.search(context, vec, k, query=query, options=opts)

    def store_conversation(self, conv: Any, mode: str) -> tuple[Any, dict[str, list[str]]]:
        """A LoCoMo conversation's turns stored as its own user's memories: that user's
        context, and the dialogue ids of each stored memory."""
        from memorybus.evaluation import locomo
        from memorybus.scopes import Context

        ctx = Context(org="locomo", user=conv.sample_id)
        items = [locomo.memory_item(conv, t, base_mode(mode)) for t in conv.turns]
        stored = self.store(timed_threads(items) if mode == TIMED else items, ctx)
        dia_of: dict[str, list[str]] = defaultdict(list)
        for t, node in zip(conv.turns, stored, strict=True):
            dia_of[node.id].append(t.dia_id)
        return ctx, dia_of

    def store_sessions(self, item: Any, mode: str) -> tuple[Any, dict[str, str]]:
        """A LongMemEval question's sessions stored as its own user's memories: that user's
        context, and the session id of each stored memory."""
        from memorybus.evaluation import longmemeval
        from memorybus.scopes import Context

        ctx = Context(org="longmemeval", user=item.question_id)
        batch, session_ids = longmemeval.items(item, base_mode(mode))
        batch = timed_threads(batch) if mode == TIMED else batch
        return ctx, {n.id: s for n, s in zip(self.store(batch, ctx), session_ids, strict=True)}

    def close(self) -> None:
        self.shard.close()
        shutil.rmtree(self.dir, ignore_errors=True)


#: an experiment, not a product mode: plain items, and each run of consecutive items with
#: one event time declared as a thread (position = order in the run). What the shard would
#: get if it derived threads from event times itself (a session = memories of one scope
#: written together), measured before building that (docs/retrieval.md)
TIMED = "plain_timed"


def base_mode(mode: str) -> str:
    """The evaluation module's mode behind ``mode`` (``plain_timed`` is ``plain``)."""
    return "plain" if mode == TIMED else mode


def timed_threads(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` (plain, in order), each run of consecutive items with one ``valid_from``
    given ``thread`` = that run's number and ``position`` = its place in the run."""
    out, run, pos, last = [], -1, 0, object()
    for it in items:
        if "thread" in it:
            raise ValueError("timed_threads takes plain items (no declared thread)")
        when = it.get("valid_from")
        if when != last:
            run, pos, last = run + 1, 0, when
        out.append(it | {"thread": f"timed-{run}", "position": pos})
        pos += 1
    return out


@contextmanager
def harness(encoder: CachedEncoder, ranking: Any) -> Iterator[Harness]:
    """A :class:`Harness` for the block; closed, and the encoder's cache saved, after it."""
    h = Harness(encoder, ranking)
    try:
        yield h
    finally:
        h.close()
        encoder.save()


def lme_baselines(items: list[Any], encoder: CachedEncoder) -> dict[str, list[float]]:
    """Every baseline's recall_all@5 per question, in ``items`` order."""
    from memorybus.evaluation.baselines import Corpus
    from memorybus.evaluation.metrics import recall_all_at

    out: dict[str, list[float]] = defaultdict(list)
    for it in items:
        docs = [s.document for s in it.sessions]
        corpus = Corpus(docs, encoder.encode(docs))
        for name, order in corpus.rank_all(it.question, encoder.encode([it.question])[0]).items():
            out[name].append(recall_all_at([it.sessions[i].session_id for i in order], it.gold, 5))
    encoder.save()
    return out


# ---------------------------------------------------------------------- LoCoMo
def locomo_run(args: argparse.Namespace, encoder: CachedEncoder, rankings: list[Any]) -> list[dict[str, Any]]:
    from memorybus.evaluation import locomo
    from memorybus.evaluation.baselines import BASELINES, Corpus
    from memorybus.evaluation.metrics import dedupe, recall_at

    convs = locomo.load(args.data)
    results = []
    base_rows: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    for c in convs:
        texts = [t.content for t in c.turns]
        corpus = Corpus(texts, encoder.encode(texts))
        qv = encoder.encode([q.text for q in c.questions])
        for q, v in zip(c.questions, qv, strict=True):
            for name, order in corpus.rank_all(q.text, v).items():
                ranked = [c.turns[i].dia_id for i in order[:10]]
                base_rows[name].append((q.category, recall_at(ranked, q.gold, 5), recall_at(ranked, q.gold, 10)))
    for mode in args.modes:
        for ranking in rankings:
            rows: list[tuple[int, float, float]] = []
            per_conv: dict[str, float] = {}
            with harness(encoder, ranking) as h:
                for c in convs:
                    start = len(rows)
                    ctx, dia_of = h.store_conversation(c, mode)
                    for q in c.questions:
                        hits = h.ask(ctx, q.text, 10, c.last_time)
                        ranked = dedupe(d for hit in hits for d in dia_of[hit.node.id])
                        rows.append((q.category, recall_at(ranked, q.gold, 5), recall_at(ranked, q.gold, 10)))
                    mine = [r[2] for r in rows[start:] if r[0] in locomo.OVERALL]
                    per_conv[c.sample_id] = float(np.mean(mine)) if mine else float("nan")
            results.append({"mode": mode, "ranking": ranking, "scores": _by_category(rows), "conversations": per_conv})
    encoder.save()
    for name in BASELINES:
        results.append({"mode": "baseline", "ranking": name, "scores": _by_category(base_rows[name])})
    return results


def _by_category(rows: list[tuple[int, float, float]]) -> dict[str, dict[str, float]]:
    from memorybus.evaluation.locomo import CATEGORIES, OVERALL

    out = {}
    for cat, name in CATEGORIES.items():
        sel = [r for r in rows if r[0] == cat]
        out[name] = {"r5": float(np.mean([r[1] for r in sel])), "r10": float(np.mean([r[2] for r in sel])),
                     "n": len(sel)}  # fmt: skip
    sel = [r for r in rows if r[0] in OVERALL]
    out["overall"] = {"r5": float(np.mean([r[1] for r in sel])), "r10": float(np.mean([r[2] for r in sel])),
                      "n": len(sel)}  # fmt: skip
    return out


def locomo_table(results: list[dict[str, Any]], changed: Sequence[str]) -> str:
    cats = ["multi-hop", "temporal", "open-domain", "single-hop", "overall"]
    lines = [f"{'':<64}" + "".join(f"{c[:10]:>11}" for c in cats) + "   (R@10; overall R@5)"]
    for r in results:
        if r["mode"] == "baseline":
            label = f"baseline {r['ranking']}"
        else:
            diff = ",".join(f"{n}={getattr(r['ranking'], n)}" for n in changed)
            label = f"{r['mode']} {diff}"
        s = r["scores"]
        lines.append(f"{label[:64]:<64}" + "".join(f"{s[c]['r10']:>11.3f}" for c in cats)
                     + f"   {s['overall']['r5']:.3f}")  # fmt: skip
    return "\n".join(lines)


def conversation_table(results: list[dict[str, Any]], changed: Sequence[str]) -> str:
    """Overall R@10 of each conversation, for each ranking: does a change hold in every one?"""
    convs = list(results[0]["conversations"]) if results else []
    lines = [f"{'R@10 by conversation':<64}" + "".join(f"{c[:10]:>11}" for c in convs)]
    for r in results:
        label = f"{r['mode']} " + ",".join(f"{n}={getattr(r['ranking'], n)}" for n in changed)
        lines.append(f"{label[:64]:<64}" + "".join(f"{r['conversations'][c]:>11.3f}" for c in convs))
    return "\n".join(lines)


def locomo_calibrate(args: argparse.Namespace, encoder: CachedEncoder) -> str:
    """The cosine scale of relevance: dev questions against their gold turns, and against
    the turns of the other dev conversations (other people, other lives: a stand-in for
    memories that do not answer). Behind ``dense_zero`` and ``min_relevance``."""
    from memorybus.evaluation import locomo

    convs = locomo.load(args.data)
    vec = {c.sample_id: encoder.encode([t.content for t in c.turns]) for c in convs}
    gold: list[float] = []
    cross: list[float] = []
    for c in convs:
        qs = [q for q in c.questions if q.category in locomo.OVERALL]
        qv = encoder.encode([q.text for q in qs])
        at = {t.dia_id: i for i, t in enumerate(c.turns)}
        for q, v in zip(qs, qv, strict=True):
            gold += [float(vec[c.sample_id][at[g]] @ v) for g in q.gold]
        for o in convs:
            if o.sample_id != c.sample_id:
                cross += (qv @ vec[o.sample_id].T).ravel().tolist()
    g, x = np.asarray(gold), np.asarray(cross)
    lines = [
        f"gold pairs {len(g)}: cosine percentiles 5/10/25/50 = {np.percentile(g, [5, 10, 25, 50]).round(3).tolist()}",
        f"other-conversation pairs {len(x)}: percentiles 50/90/99 = {np.percentile(x, [50, 90, 99]).round(3).tolist()}",
    ]
    for t in (0.2, 0.25, 0.3, 0.35):
        below, above = (g < t).mean(), (x >= t).mean()
        lines.append(f"cosine {t}: gold below {below:.3f}, other-conversation at or above {above:.3f}")
    return "\n".join(lines)


# ----------------------------------------------------------------- LongMemEval
def lme_run(args: argparse.Namespace, encoder: CachedEncoder, rankings: list[Any]) -> list[dict[str, Any]]:
    from memorybus.evaluation import longmemeval
    from memorybus.evaluation.baselines import BASELINES
    from memorybus.evaluation.metrics import dedupe, recall_all_at

    items, _ = longmemeval.load(args.data)
    if args.limit:
        items = items[: args.limit]
    results = []
    base = lme_baselines(items, encoder)
    for mode in args.modes:
        for ranking in rankings:
            by_type: dict[str, list[float]] = defaultdict(list)
            with harness(encoder, ranking) as h:
                for it in items:
                    ctx, sid = h.store_sessions(it, mode)
                    hits = h.ask(ctx, it.question, 100, it.question_date)
                    ranked = dedupe(sid[x.node.id] for x in hits if x.node.id in sid)
                    by_type[it.question_type].append(recall_all_at(ranked, it.gold, 5))
            scores = {t: float(np.mean(v)) for t, v in sorted(by_type.items())}
            scores["overall"] = float(np.mean([x for v in by_type.values() for x in v]))
            results.append({"mode": mode, "ranking": ranking, "scores": scores})
    for name in BASELINES:
        results.append({"mode": "baseline", "ranking": name, "scores": {"overall": float(np.mean(base[name]))}})
    return results


def lme_table(results: list[dict[str, Any]], changed: Sequence[str]) -> str:
    lines = ["recall_all@5"]
    for r in results:
        label = f"baseline {r['ranking']}" if r["mode"] == "baseline" else (
            f"{r['mode']} " + ",".join(f"{n}={getattr(r['ranking'], n)}" for n in changed))
        per = " ".join(f"{k[:12]}={v:.3f}" for k, v in r["scores"].items() if k != "overall")
        lines.append(f"{label[:64]:<64} {r['scores']['overall']:.3f}  {per}")
    return "\n".join(lines)


# ------------------------------------------------------------------------ main
def tuning_parser(doc: str | None) -> argparse.ArgumentParser:
    """The options of this script and tune_cv.py: the dataset and its dev file, the
    modes, ``--grid``, the embedding cache, the model and ``--out``."""
    p = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    p.add_argument("dataset", choices=["locomo", "longmemeval"])
    p.add_argument("--data", required=True)
    p.add_argument("--modes", default="structured,plain",
                   help="structured, plain, and plain_timed (an experiment: plain, each run of one "
                   "event time declared a thread)")
    p.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...")
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "memorybus-tune-cache"))
    p.add_argument("--model", default=None, help="a sentence-transformers model (default: the shipped MiniLM)")
    p.add_argument("--out", default=None, help="write the results as JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    p = tuning_parser(__doc__)
    p.add_argument("--weight", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--limit", type=int, default=None, help="LongMemEval: the first N questions")
    p.add_argument("--calibrate", action="store_true", help="LoCoMo: print the cosine scale of relevance and stop")
    p.add_argument("--by-conversation", action="store_true", help="LoCoMo: also print R@10 per conversation")
    args = p.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from memorybus.cli import _weights
    from memorybus.config import RankingWeights

    base = RankingWeights(**_weights(args.weight))  # type: ignore[arg-type]
    grid: list[tuple[str, list[str]]] = []
    for g in args.grid:
        name, _, values = g.partition("=")
        grid.append((name, values.split(",")))
    rankings = []
    for combo in itertools.product(*[v for _, v in grid]) if grid else [()]:
        over = _weights([f"{n}={v}" for (n, _), v in zip(grid, combo, strict=True)])
        rankings.append(replace(base, **over))
    changed = [n for n, _ in grid] + [w.partition("=")[0] for w in args.weight]
    encoder = CachedEncoder(args.cache, model=args.model)
    t0 = time.perf_counter()
    if args.calibrate:
        print(locomo_calibrate(args, encoder))
        return 0
    if args.dataset == "locomo":
        results = locomo_run(args, encoder, rankings)
        key = lambda r: -r["scores"]["overall"]["r10"]  # noqa: E731
        ours = sorted((r for r in results if r["mode"] != "baseline"), key=key)
        print(locomo_table(ours + [r for r in results if r["mode"] == "baseline"], changed))
        if args.by_conversation:
            print(conversation_table(ours, changed))
    else:
        results = lme_run(args, encoder, rankings)
        ours = sorted((r for r in results if r["mode"] != "baseline"), key=lambda r: -r["scores"]["overall"])
        print(lme_table(ours + [r for r in results if r["mode"] == "baseline"], changed))
    log(f"{time.perf_counter() - t0:.1f} s")
    if args.out:
        for r in results:
            r["ranking"] = r["ranking"] if isinstance(r["ranking"], str) else repr(r["ranking"])
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
