"""Evaluation runs through the real bus (Ray actors, SQLite + Qdrant Edge, the embedder).

Each run measures, in one process and on identical memories:

1. ingest: per conversation, the raw model (in this process, 2 torch threads)
   encodes the texts the bus embeds, then ``remember_many`` stores them through
   the bus (one embedder with 2 threads): memories/s of each;
2. queries: per question, the raw model's encode + brute-force top 10 over the
   raw vectors, then ``recall`` through the bus (read-only: ``touch=False``, so
   one question's recall does not change the next one's salience): p50/p95 of
   each. Pairing every raw timing with its bus timing keeps the ratios honest
   on a shared machine;
3. the baselines (BM25, dense brute force over the raw vectors of the memories'
   text, RRF) on the same memories;

and writes ``<dataset>.json`` and ``<dataset>_recall.png`` into the output dir.
"""

from __future__ import annotations

import gc
import os
import platform
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from memorybus.config import Config, RankingWeights
from memorybus.evaluation import locomo, longmemeval
from memorybus.evaluation.baselines import BM25, METHODS, rank_all
from memorybus.evaluation.metrics import dedupe, hit_at, mean, ndcg_at, recall_all_at, recall_at
from memorybus.evaluation.report import log, plot_by_category, progress, write_json

KS = (1, 5, 10)
RAW_BATCH = 32
#: texts per raw ``encode`` call: SentenceTransformer sorts a call's texts by length
#: before cutting model batches, as a user encoding a corpus in one call gets
RAW_CALL = 1024
WARMUP = 5


def _percentiles(seconds: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(seconds, dtype=np.float64) * 1000.0
    if not len(arr):
        return {}
    return {"p50": float(np.percentile(arr, 50)), "p95": float(np.percentile(arr, 95)), "mean": float(arr.mean())}


# ------------------------------------------------------------------- raw model
class RawModel:
    """The model in this process, as a user without memorybus would run it."""

    def __init__(self, model_path: str, threads: int = 2) -> None:
        from memorybus.embedding import Embedder

        self.embedder = Embedder(model_path, threads=threads, batch_size=RAW_BATCH, cache_size=0, lean=False)
        self.embedder.encode(["warm up the model"] * 4)

    def encode_all(self, texts: Sequence[str], desc: str, show: bool) -> tuple[np.ndarray, float]:
        out = np.empty((len(texts), self.embedder.dim), dtype=np.float32)
        t0 = time.perf_counter()
        for start in progress(range(0, len(texts), RAW_CALL), desc, (len(texts) + RAW_CALL - 1) // RAW_CALL, show):
            out[start : start + RAW_CALL] = self.embedder.encode(list(texts[start : start + RAW_CALL]))
        return out, len(texts) / max(1e-9, time.perf_counter() - t0)

    def query(self, text: str, docs: np.ndarray, k: int = 10) -> tuple[np.ndarray, float]:
        """Encode one query and brute-force its top ``k``; (query vector, seconds)."""
        t0 = time.perf_counter()
        vec = self.embedder.encode([text])[0]
        scores = docs @ vec
        kk = min(k, len(scores))
        top = np.argpartition(-scores, kk - 1)[:kk]
        top[np.argsort(-scores[top])]
        return vec, time.perf_counter() - t0

    def close(self) -> None:
        del self.embedder
        gc.collect()


# --------------------------------------------------------------------- the bus
def _connect(data_dir: str, namespace: str, shards: int, ranking: RankingWeights, threads: int = 2) -> Any:
    """The bus on this machine with the raw model's budget: one embedder with ``threads``
    torch threads (as the raw model has), shards beside it."""
    import memorybus

    cfg = Config.embedded(
        data_dir, num_shards=shards, namespace=namespace, ranking=ranking, embedder_num_cpus=float(threads)
    )
    return memorybus.connect(cfg, num_cpus=threads + 1, include_dashboard=False, log_to_driver=False)


def _shutdown(bus: Any) -> None:
    from memorybus.actors import runtime

    bus.shutdown()
    runtime.shutdown()


def _summary(per_q: list[dict[str, Any]], group_key: str, groups: dict[Any, str], overall: Sequence[Any],
             metrics: Sequence[str]) -> dict[str, Any]:  # fmt: skip
    by: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in per_q:
        by[row[group_key]].append(row)
    out: dict[str, Any] = {"by_category": {}}
    for g, name in groups.items():
        rows = by.get(g, [])
        out["by_category"][name] = {m: mean([r[m] for r in rows]) for m in metrics} | {"n": len(rows)}
    rows = [r for g in overall for r in by.get(g, [])]
    out["overall"] = {m: mean([r[m] for r in rows]) for m in metrics} | {"n": len(rows)}
    return out


# ---------------------------------------------------------------------- LoCoMo
def run_locomo(
    data: str | Path,
    out: str | Path,
    *,
    conversations: Sequence[str] | None = None,
    shards: int = 2,
    ranking: RankingWeights | None = None,
    show_progress: bool = True,
    label: str = "memorybus",
) -> dict[str, Any]:
    """The LoCoMo protocol (see :mod:`memorybus.evaluation.locomo`); returns and writes the result."""
    from memorybus.retrieval.hybrid import RecallOptions
    from memorybus.retrieval.structure import embedding_texts
    from memorybus.scopes import Context

    ranking = ranking or RankingWeights()
    out_dir = Path(out)
    convs = locomo.load(data)
    if conversations:
        convs = [c for c in convs if c.sample_id in set(conversations)]
        if not convs:
            raise SystemExit(f"no conversation among {list(conversations)}")
    n_mem = sum(len(c.turns) for c in convs)
    n_q = sum(len(c.questions) for c in convs)
    log(f"locomo: {len(convs)} conversations, {n_mem} memories, {n_q} questions")
    ctx_of = {c.sample_id: Context(org="locomo", user=c.sample_id) for c in convs}
    items_of = {c.sample_id: [locomo.memory_item(t) for t in c.turns] for c in convs}

    # The raw model stays loaded beside the bus, and every timing is paired: raw encode of a
    # conversation's texts then its ingest through the bus; raw query then bus recall, one
    # question at a time. Both sides see the same load on a shared machine.
    from memorybus.model import MemoryNode

    probe_nodes = {
        c.sample_id: [MemoryNode(content=t.content, scope=ctx_of[c.sample_id].scope,
                                 structured=items_of[c.sample_id][i]["structured"]) for i, t in enumerate(c.turns)]
        for c in convs
    }  # fmt: skip
    raw = RawModel(Config().resolved_model_path())
    # the dense baseline's vectors: the memories' protocol text, embedded by the raw model
    doc_vecs, raw_rate_content = raw.encode_all(
        [t.content for c in convs for t in c.turns], "raw encode (contents)", show_progress
    )
    offsets: dict[str, int] = {}
    offset = 0
    for c in convs:
        offsets[c.sample_id] = offset
        offset += len(c.turns)
    data_dir = tempfile.mkdtemp(prefix="mb-eval-")
    per_q: dict[str, list[dict[str, Any]]] = {label: [], **{m: [] for m in METHODS}}
    bus_lat: list[float] = []
    raw_lat: list[float] = []
    qvecs: dict[tuple[str, int], np.ndarray] = {}
    raw_s = ingest_s = 0.0
    try:
        bus = _connect(data_dir, "mb_eval_locomo", shards, ranking)
        try:
            bus.embed(["warm up"])
            dia_of: dict[str, list[str]] = defaultdict(list)
            for c in progress(convs, "ingest (raw, bus)", len(convs), show_progress):
                texts = embedding_texts(probe_nodes[c.sample_id], ranking.contextual_text)
                _, rate = raw.encode_all(texts, "", False)
                raw_s += len(texts) / rate
                t0 = time.perf_counter()
                stored = bus.remember_many(items_of[c.sample_id], ctx_of[c.sample_id])
                ingest_s += time.perf_counter() - t0
                for t, node in zip(c.turns, stored, strict=True):
                    dia_of[node.id].append(t.dia_id)
            c0 = convs[0]
            for w in range(WARMUP):
                bus.recall(f"warm up question {w}", ctx_of[c0.sample_id], k=10, options=RecallOptions(touch=False))
            for c in progress(convs, "queries (raw, bus)", len(convs), show_progress):
                opts = RecallOptions(reference_time=c.last_time, touch=False)
                docs = doc_vecs[offsets[c.sample_id] : offsets[c.sample_id] + len(c.turns)]
                for j, q in enumerate(c.questions):
                    vec, sec = raw.query(q.text, docs)
                    qvecs[(c.sample_id, j)] = vec
                    raw_lat.append(sec)
                    t0 = time.perf_counter()
                    hits = bus.recall(q.text, ctx_of[c.sample_id], k=10, options=opts)
                    bus_lat.append(time.perf_counter() - t0)
                    ranked = dedupe(d for h in hits for d in dia_of[h.node.id])
                    per_q[label].append(_row_locomo(q, ranked))
        finally:
            _shutdown(bus)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
        raw.close()
    raw_rate = n_mem / max(1e-9, raw_s)

    # 3. baselines on the same memories
    for c in progress(convs, "baselines", len(convs), show_progress):
        docs = doc_vecs[offsets[c.sample_id] : offsets[c.sample_id] + len(c.turns)]
        bm25 = BM25([t.content for t in c.turns])
        for j, q in enumerate(c.questions):
            for method, order in rank_all(q.text, qvecs[(c.sample_id, j)], bm25, docs).items():
                per_q[method].append(_row_locomo(q, [c.turns[i].dia_id for i in order[:10]]))

    metrics = [f"{m}@{k}" for m in ("recall", "hit") for k in KS]
    groups = dict(locomo.CATEGORIES)
    result: dict[str, Any] = {
        "dataset": "locomo",
        "data": os.fspath(data),
        "conversations": [c.sample_id for c in convs],
        "memories": n_mem,
        "questions": n_q,
        "questions_dropped_no_gold": sum(c.dropped_questions for c in convs),
        "overall_categories": [locomo.CATEGORIES[c] for c in locomo.OVERALL],
        "methods": [label, *METHODS],
        "ranking": asdict(ranking),
    }
    for method, rows in per_q.items():
        result[method] = _summary(rows, "category", groups, locomo.OVERALL, metrics)
    bus_rate = n_mem / max(1e-9, ingest_s)
    result["speed"] = {
        "raw": {
            "encode_rate": raw_rate,
            "encode_rate_protocol_text": raw_rate_content,
            "query_ms": _percentiles(raw_lat),
        },
        label: {"ingest_rate": bus_rate, "recall_ms": _percentiles(bus_lat)},
        "ratios": {
            "ingest": bus_rate / raw_rate,
            "recall_p50": _percentiles(bus_lat)["p50"] / _percentiles(raw_lat)["p50"],
            "recall_p95": _percentiles(bus_lat)["p95"] / _percentiles(raw_lat)["p95"],
        },
    }
    result["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "loadavg": os.getloadavg()}
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "locomo.json", result)
    names = [locomo.CATEGORIES[c] for c in locomo.OVERALL] + ["overall"]
    plot_by_category(out_dir / "locomo_recall.png", result, [label, *METHODS], names, ["recall@5", "recall@10"],
                     "LoCoMo")  # fmt: skip
    return result


def _row_locomo(q: locomo.Question, ranked: Sequence[str]) -> dict[str, Any]:
    row: dict[str, Any] = {"category": q.category}
    for k in KS:
        row[f"recall@{k}"] = recall_at(ranked, q.gold, k)
        row[f"hit@{k}"] = hit_at(ranked, q.gold, k)
    return row


# ----------------------------------------------------------------- LongMemEval
def run_longmemeval(
    data: str | Path,
    out: str | Path,
    *,
    limit: int | None = None,
    shards: int = 2,
    ranking: RankingWeights | None = None,
    show_progress: bool = True,
    label: str = "memorybus",
    depth: int = 100,
) -> dict[str, Any]:
    """The LongMemEval_s session-level protocol (see :mod:`memorybus.evaluation.longmemeval`)."""
    from memorybus.retrieval.hybrid import RecallOptions
    from memorybus.scopes import Context

    ranking = ranking or RankingWeights()
    out_dir = Path(out)
    items, skipped = longmemeval.load(data)
    if limit:
        items = items[:limit]
    log(f"longmemeval: {len(items)} questions ({skipped} skipped: no user-side gold)")

    # baselines' session documents (the official protocol), embedded once per distinct session
    raw = RawModel(Config().resolved_model_path())
    docs: dict[str, str] = {s.session_id: s.document for it in items for s in it.sessions}
    doc_ids = list(docs)
    doc_vecs, _ = raw.encode_all([docs[d] for d in doc_ids], "raw encode (session docs)", show_progress)
    vec_of = {d: doc_vecs[i] for i, d in enumerate(doc_ids)}
    qvec = {it.question_id: raw.embedder.encode([it.question])[0] for it in items}
    raw.close()

    metrics = [f"{m}@{k}" for m in ("recall_any", "recall_all", "ndcg") for k in (5, 10)]
    per_q: dict[str, list[dict[str, Any]]] = {label: [], **{m: [] for m in METHODS}}
    for it in items:
        ids = [s.session_id for s in it.sessions]
        bm25 = BM25([s.document for s in it.sessions])
        mat = np.stack([vec_of[i] for i in ids])
        for method, order in rank_all(it.question, qvec[it.question_id], bm25, mat).items():
            per_q[method].append(_row_lme(it, [ids[i] for i in order]))

    data_dir = tempfile.mkdtemp(prefix="mb-eval-")
    n_mem = 0
    ingest_s = 0.0
    lat: list[float] = []
    try:
        bus = _connect(data_dir, "mb_eval_lme", shards, ranking)
        try:
            bus.embed(["warm up"])
            for it in progress(items, "bus ingest+recall", len(items), show_progress):
                ctx = Context(org="longmemeval", user=it.question_id)
                batch = [m for s in it.sessions for m in longmemeval.memory_items(s)]
                t0 = time.perf_counter()
                stored = bus.remember_many(batch, ctx)
                ingest_s += time.perf_counter() - t0
                n_mem += len(batch)
                session_of = {n.id: m["structured"]["session"] for n, m in zip(stored, batch, strict=True)}
                t0 = time.perf_counter()
                hits = bus.recall(it.question, ctx, k=depth, options=RecallOptions(reference_time=it.question_date,
                                                                                   touch=False))  # fmt: skip
                lat.append(time.perf_counter() - t0)
                ranked = dedupe(session_of[h.node.id] for h in hits if h.node.id in session_of)
                per_q[label].append(_row_lme(it, ranked))
        finally:
            _shutdown(bus)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)

    types = sorted({it.question_type for it in items})
    result: dict[str, Any] = {
        "dataset": "longmemeval_s",
        "data": os.fspath(data),
        "questions": len(items),
        "skipped_no_user_gold": skipped,
        "memories": n_mem,
        "methods": [label, *METHODS],
        "recall_depth": depth,
        "ranking": asdict(ranking),
    }
    for method, rows in per_q.items():
        result[method] = _summary(rows, "type", {t: t for t in types}, types, metrics)
    result["speed"] = {label: {"ingest_rate": n_mem / max(1e-9, ingest_s), "recall_ms": _percentiles(lat)}}
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "longmemeval.json", result)
    plot_by_category(out_dir / "longmemeval_recall.png", result, [label, *METHODS], [*types, "overall"],
                     ["recall_all@5", "ndcg@10"], "LongMemEval_s")  # fmt: skip
    return result


def _row_lme(it: longmemeval.Item, ranked: Sequence[str]) -> dict[str, Any]:
    row: dict[str, Any] = {"type": it.question_type}
    for k in (5, 10):
        row[f"recall_any@{k}"] = hit_at(ranked, it.gold, k)
        row[f"recall_all@{k}"] = recall_all_at(ranked, it.gold, k)
        row[f"ndcg@{k}"] = ndcg_at(ranked, it.gold, k)
    return row


def with_weights(base: RankingWeights | None, overrides: dict[str, Any]) -> RankingWeights:
    return replace(base or RankingWeights(), **overrides)


def summary_locomo(result: dict[str, Any]) -> str:
    methods = result["methods"]
    cats = [*result["overall_categories"], "overall"]
    lines = [
        f"LoCoMo: {result['questions']} questions, {result['memories']} memories ({', '.join(result['conversations'])})"
    ]
    for k in KS:
        lines.append(f"recall@{k:<3}" + "".join(f"{c[:11]:>12}" for c in cats))
        for m in methods:
            blocks = [result[m]["overall"] if c == "overall" else result[m]["by_category"][c] for c in cats]
            vals = [b[f"recall@{k}"] for b in blocks]
            lines.append(f"  {m:<9}" + "".join(f"{v:>12.3f}" for v in vals))
    sp = result["speed"]
    label = methods[0]
    lines.append(
        f"ingest: {sp[label]['ingest_rate']:.1f}/s vs raw {sp['raw']['encode_rate']:.1f}/s"
        f" (ratio {sp['ratios']['ingest']:.2f}); recall p50 {sp[label]['recall_ms']['p50']:.2f} ms vs raw"
        f" {sp['raw']['query_ms']['p50']:.2f} ms (ratio {sp['ratios']['recall_p50']:.2f}), p95"
        f" {sp[label]['recall_ms']['p95']:.2f} vs {sp['raw']['query_ms']['p95']:.2f} ms"
        f" (ratio {sp['ratios']['recall_p95']:.2f})"
    )
    return "\n".join(lines)


def summary_longmemeval(result: dict[str, Any]) -> str:
    lines = [f"LongMemEval_s: {result['questions']} questions ({result['skipped_no_user_gold']} skipped)"]
    keys = ["recall_any@5", "recall_all@5", "ndcg@5", "recall_any@10", "recall_all@10", "ndcg@10"]
    lines.append(" " * 11 + "".join(f"{k:>15}" for k in keys))
    for m in result["methods"]:
        lines.append(f"  {m:<9}" + "".join(f"{result[m]['overall'][k]:>15.3f}" for k in keys))
    return "\n".join(lines)
