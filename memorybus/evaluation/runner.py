"""Evaluation runs through the real bus (Ray actors, SQLite + Qdrant Edge, the embedder).

Each run measures, in one process and on identical memory texts:

1. recall quality in two modes (:data:`MODES`): *structured* (each turn stored
   with its declared thread, position and speaker) and *plain* (the same texts
   and event times, no conversation fields), each in its own org of the same
   bus; LoCoMo also runs a second bus whose shards always search the vector
   index (``exact_dense_limit=0``) instead of the exact in-RAM path, and
   reports both (labels ``memorybus_<mode>`` and ``memorybus_<mode>_index``);
2. the baselines (:mod:`memorybus.evaluation.baselines`: English BM25, plain
   BM25, dense brute force with the bus's vectors, RRF) on the same texts;
3. speed against the raw model (:mod:`memorybus.evaluation.raw`), every raw
   timing paired with its bus timing under the same load: the raw model encodes
   a conversation's texts right before the bus ingests them, and encodes each
   question and brute-forces the conversation's vectors (exactly what the bus
   may return for it) right before the bus recalls it. The bus's embedder
   cache is off (``embed_cache_size=0``) so both modes do the model work.
   Recall is read-only (``touch=False``) so questions do not change each
   other's salience.

Writes ``<dataset>.json`` and ``<dataset>_recall.png`` into the output dir.
"""

from __future__ import annotations

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
from memorybus.evaluation.baselines import BASELINES, Corpus
from memorybus.evaluation.metrics import dedupe, hit_at, mean, ndcg_at, recall_all_at, recall_at
from memorybus.evaluation.raw import RawModel, percentiles
from memorybus.evaluation.report import log, plot_by_category, progress, write_json

KS = (1, 5, 10)
MODES = ("structured", "plain")
WARMUP = 5


def _connect(data_dir: str, namespace: str, shards: int, ranking: RankingWeights, threads: int = 2,
             model: str | None = None) -> Any:  # fmt: skip
    """The bus on this machine with the raw model's budget: one embedder with ``threads``
    torch threads (as the raw model has), shards beside it, no embedding cache; ``model``:
    ``Config.model_path`` (None: the default MiniLM)."""
    import memorybus

    cfg = Config.embedded(data_dir, num_shards=shards, namespace=namespace, ranking=ranking,
                          embedder_num_cpus=float(threads), embed_cache_size=0, model_path=model)  # fmt: skip
    bus = memorybus.connect(cfg, num_cpus=threads + 1, include_dashboard=False, log_to_driver=False)
    bus.warm_up()  # the query model of this process (loaded behind connect): timed recalls embed here
    return bus


def _on_ray() -> bool:
    """Is this process on a Ray already? A run that is joins it and leaves it running
    (:func:`_leave_ray`); one that is not starts a local Ray at its first ``connect``."""
    from memorybus.actors import runtime

    return runtime.is_connected()


def _leave_ray(joined: bool) -> None:
    """At the end of a run: stop the local Ray it started (once for the whole run, not
    after each bus: every bus of a run shares it)."""
    from memorybus.actors import runtime

    if not joined and runtime.is_connected():
        runtime.shutdown()


def _summary(rows: list[dict[str, Any]], key: str, groups: dict[Any, str], overall: Sequence[Any],
             metrics: Sequence[str]) -> dict[str, Any]:  # fmt: skip
    by: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by[row[key]].append(row)
    out: dict[str, Any] = {"by_category": {}}
    for g, name in groups.items():
        sel = by.get(g, [])
        out["by_category"][name] = {m: mean([r[m] for r in sel]) for m in metrics} | {"n": len(sel)}
    sel = [r for g in overall for r in by.get(g, [])]
    out["overall"] = {m: mean([r[m] for r in sel]) for m in metrics} | {"n": len(sel)}
    return out


def _machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "loadavg": os.getloadavg()}


# ---------------------------------------------------------------------- LoCoMo
def run_locomo(
    data: str | Path,
    out: str | Path,
    *,
    conversations: Sequence[str] | None = None,
    shards: int = 2,
    ranking: RankingWeights | None = None,
    show_progress: bool = True,
    index_path: bool = True,
    model: str | None = None,
) -> dict[str, Any]:
    """The LoCoMo protocol (see :mod:`memorybus.evaluation.locomo`); returns and writes the result.
    ``model``: the sentence-transformers model of the bus and of every baseline (None: MiniLM)."""
    from memorybus.memory.items import build_memory
    from memorybus.retrieval.options import RecallOptions
    from memorybus.scopes import Context
    from memorybus.shard.texts import embedding_texts

    ranking = ranking or RankingWeights()
    convs = locomo.load(data)
    if conversations:
        convs = [c for c in convs if c.sample_id in set(conversations)]
        if not convs:
            raise SystemExit(f"no conversation among {list(conversations)}")
    n_mem = sum(len(c.turns) for c in convs)
    n_q = sum(len(c.questions) for c in convs)
    log(f"locomo: {len(convs)} conversations, {n_mem} memories, {n_q} questions")
    raw = RawModel(Config(model_path=model).resolved_model_path())
    doc_vecs = {c.sample_id: raw.encode_all([t.content for t in c.turns])[0] for c in convs}
    # the dense baseline again, over the texts the dataset's own retrieval code embeds
    dated_vecs = {c.sample_id: raw.encode_all([t.dataset_text for t in c.turns])[0] for c in convs}
    _, st_rate = raw.encode_all([t.content for c in convs for t in c.turns], "st", "raw encode (s-t path)",
                                show_progress)  # fmt: skip
    paths = [("", ranking)] + ([("_index", replace(ranking, exact_dense_limit=0))] if index_path else [])
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    speed: dict[str, Any] = {}
    raw_lat: list[float] = []
    raw_lat_st: list[float] = []
    raw_enc = [0.0, 0.0]  # texts, seconds (lean path, paired with each ingest)
    qvecs: dict[tuple[str, int], np.ndarray] = {}
    joined = _on_ray()
    try:
        for suffix, weights in paths:
            data_dir = tempfile.mkdtemp(prefix="mb-eval-")
            try:
                bus = _connect(data_dir, f"mb_eval_locomo{suffix}", shards, weights, model=model)
            except BaseException:
                shutil.rmtree(data_dir, ignore_errors=True)  # a bus that did not start leaves nothing
                raise
            try:
                bus.embed(["warm up"])
                for mode in MODES:
                    label = f"memorybus_{mode}{suffix}"
                    ctx = {c.sample_id: Context(org=f"locomo-{mode}", user=c.sample_id) for c in convs}
                    ingest_s = 0.0
                    dia_of: dict[str, list[str]] = defaultdict(list)
                    for c in progress(convs, f"ingest {label}", len(convs), show_progress):
                        items = [locomo.memory_item(c, t, mode) for t in c.turns]
                        probe = [build_memory(i, ctx[c.sample_id], 0.0) for i in items]
                        texts = embedding_texts(probe, weights.contextual_text)  # what the bus embeds
                        _, rate = raw.encode_all(texts)
                        raw_enc[0] += len(texts)
                        raw_enc[1] += len(texts) / rate
                        t0 = time.perf_counter()
                        stored = bus.remember_many(items, ctx[c.sample_id])
                        ingest_s += time.perf_counter() - t0
                        for t, node in zip(c.turns, stored, strict=True):
                            dia_of[node.id].append(t.dia_id)
                    c0 = convs[0].sample_id
                    for w in range(WARMUP):
                        bus.recall(f"warm up question {w}", ctx[c0], k=10, options=RecallOptions(touch=False))
                    lat: list[float] = []
                    for c in progress(convs, f"queries {label}", len(convs), show_progress):
                        opts = RecallOptions(reference_time=c.last_time, touch=False)
                        docs = doc_vecs[c.sample_id]  # the caller's visible memories
                        for j, q in enumerate(c.questions):
                            vec, sec = raw.query(q.text, docs)
                            raw_lat.append(sec)
                            if (c.sample_id, j) not in qvecs:
                                qvecs[(c.sample_id, j)] = vec
                                raw_lat_st.append(raw.query(q.text, docs, path="st")[1])
                            t0 = time.perf_counter()
                            hits = bus.recall(q.text, ctx[c.sample_id], k=10, options=opts)
                            lat.append(time.perf_counter() - t0)
                            rows[label].append(_row_locomo(q, dedupe(d for h in hits for d in dia_of[h.node.id])))
                    speed[label] = {"ingest_rate": n_mem / max(1e-9, ingest_s), "recall_ms": percentiles(lat)}
            finally:
                bus.shutdown()  # its actors; Ray stays up for the run (_leave_ray)
                shutil.rmtree(data_dir, ignore_errors=True)
    finally:
        _leave_ray(joined)
        raw.close()

    for c in convs:
        corpus = Corpus([t.content for t in c.turns], doc_vecs[c.sample_id],
                        {"dense_dated": dated_vecs[c.sample_id]})  # fmt: skip
        for j, q in enumerate(c.questions):
            for method, order in corpus.rank_all(q.text, qvecs[(c.sample_id, j)]).items():
                rows[method].append(_row_locomo(q, [c.turns[i].dia_id for i in order[:10]]))

    ours = [f"memorybus_{m}{s}" for s, _ in paths for m in MODES]
    metrics = [f"{m}@{k}" for m in ("recall", "hit") for k in KS]
    result: dict[str, Any] = {
        "dataset": "locomo", "data": os.fspath(data), "conversations": [c.sample_id for c in convs],
        "memories": n_mem, "questions": n_q, "questions_dropped_no_gold": sum(c.dropped_questions for c in convs),
        "overall_categories": [locomo.CATEGORIES[c] for c in locomo.OVERALL],
        "methods": [*ours, *BASELINES, "dense_dated"], "ranking": asdict(ranking),
        "model": Config(model_path=model).model_label(),
        "baseline_texts": {"dense": "<speaker>: <text> (the memories' own text)",
                           "dense_dated": "(<session date>) <speaker> said, \"<text>\" (LoCoMo's retrieval code)"},
    }  # fmt: skip
    for method in result["methods"]:
        result[method] = _summary(rows[method], "category", dict(locomo.CATEGORIES), locomo.OVERALL, metrics)
    raw_rate = raw_enc[0] / max(1e-9, raw_enc[1])
    raw_ms, raw_st_ms = percentiles(raw_lat), percentiles(raw_lat_st)
    result["speed"] = {
        "raw": {
            "encode_rate": raw_rate,
            "query_ms": raw_ms,
            "sentence_transformers_path": {"encode_rate": st_rate, "query_ms": raw_st_ms},
        },
        **speed,
        "ratios": {
            label: {
                "ingest": s["ingest_rate"] / raw_rate,
                "recall_p50": s["recall_ms"]["p50"] / raw_ms["p50"],
                "recall_p95": s["recall_ms"]["p95"] / raw_ms["p95"],
                "recall_p50_vs_sentence_transformers_path": s["recall_ms"]["p50"] / raw_st_ms["p50"],
            }
            for label, s in speed.items()
        },
        "note": "raw side: the bus's encoder path (lean); the sentence-transformers path is reported apart",
    }
    result["machine"] = _machine()
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "locomo.json", result)
    names = [locomo.CATEGORIES[c] for c in locomo.OVERALL] + ["overall"]
    shown = [f"memorybus_{m}" for m in MODES] + list(BASELINES) + ["dense_dated"]
    plot_by_category(out_dir / "locomo_recall.png", result, shown, names, ["recall@5", "recall@10"], "LoCoMo")
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
    depth: int = 100,
    model: str | None = None,
) -> dict[str, Any]:
    """The LongMemEval_s session-level protocol (see :mod:`memorybus.evaluation.longmemeval`).
    ``model``: the sentence-transformers model of the bus and of every baseline (None: MiniLM)."""
    from memorybus.retrieval.options import RecallOptions
    from memorybus.scopes import Context

    ranking = ranking or RankingWeights()
    items, skipped = longmemeval.load(data)
    if limit:
        items = items[:limit]
    log(f"longmemeval: {len(items)} questions ({skipped} skipped: no user-side gold)")
    raw = RawModel(Config(model_path=model).resolved_model_path())
    docs: dict[str, str] = {s.session_id: s.document for it in items for s in it.sessions}
    doc_ids = list(docs)
    doc_vecs, _ = raw.encode_all([docs[d] for d in doc_ids], "lean", "raw encode (session docs)", show_progress)
    vec_of = {d: doc_vecs[i] for i, d in enumerate(doc_ids)}
    qvec = {it.question_id: raw.lean.encode([it.question])[0] for it in items}
    raw.close()

    metrics = [f"{m}@{k}" for m in ("recall_any", "recall_all", "ndcg") for k in (5, 10)]
    rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for it in items:
        ids = [s.session_id for s in it.sessions]
        corpus = Corpus([s.document for s in it.sessions], np.stack([vec_of[i] for i in ids]))
        for method, order in corpus.rank_all(it.question, qvec[it.question_id]).items():
            rows[method].append(_row_lme(it, [ids[i] for i in order]))

    data_dir = tempfile.mkdtemp(prefix="mb-eval-")
    speed: dict[str, Any] = {}
    joined = _on_ray()
    try:
        bus = _connect(data_dir, "mb_eval_lme", shards, ranking, model=model)
        try:
            bus.embed(["warm up"])
            for mode in MODES:
                label = f"memorybus_{mode}"
                n_mem, ingest_s, lat = 0, 0.0, []
                for it in progress(items, f"ingest+recall {label}", len(items), show_progress):
                    ctx = Context(org=f"longmemeval-{mode}", user=it.question_id)
                    batch, session_ids = longmemeval.items(it, mode)
                    t0 = time.perf_counter()
                    stored = bus.remember_many(batch, ctx)
                    ingest_s += time.perf_counter() - t0
                    n_mem += len(batch)
                    session_of = {n.id: s for n, s in zip(stored, session_ids, strict=True)}
                    opts = RecallOptions(reference_time=it.question_date, touch=False)
                    t0 = time.perf_counter()
                    hits = bus.recall(it.question, ctx, k=depth, options=opts)
                    lat.append(time.perf_counter() - t0)
                    ranked = dedupe(session_of[h.node.id] for h in hits if h.node.id in session_of)
                    rows[label].append(_row_lme(it, ranked))
                speed[label] = {"memories": n_mem, "ingest_rate": n_mem / max(1e-9, ingest_s),
                                "recall_ms": percentiles(lat)}  # fmt: skip
        finally:
            bus.shutdown()  # its actors; Ray stays up for the run (_leave_ray)
    finally:
        _leave_ray(joined)
        shutil.rmtree(data_dir, ignore_errors=True)

    types = sorted({it.question_type for it in items})
    ours = [f"memorybus_{m}" for m in MODES]
    result: dict[str, Any] = {
        "dataset": "longmemeval_s", "data": os.fspath(data), "questions": len(items),
        "skipped_no_user_gold": skipped, "methods": [*ours, *BASELINES], "recall_depth": depth,
        "ranking": asdict(ranking), "model": Config(model_path=model).model_label(),
    }  # fmt: skip
    for method in result["methods"]:
        result[method] = _summary(rows[method], "type", {t: t for t in types}, types, metrics)
    result["speed"] = speed
    result["machine"] = _machine()
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "longmemeval.json", result)
    plot_by_category(out_dir / "longmemeval_recall.png", result, result["methods"], [*types, "overall"],
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


# --------------------------------------------------------------------- summary
def summary_locomo(result: dict[str, Any]) -> str:
    cats = [*result["overall_categories"], "overall"]
    lines = [f"LoCoMo: {result['questions']} questions, {result['memories']} memories"
             f" ({', '.join(result['conversations'])})"]  # fmt: skip
    for k in (5, 10):
        lines.append(f"recall@{k:<3}{'':<22}" + "".join(f"{c[:11]:>12}" for c in cats))
        for m in result["methods"]:
            blocks = [result[m]["overall"] if c == "overall" else result[m]["by_category"][c] for c in cats]
            lines.append(f"  {m:<30}" + "".join(f"{b[f'recall@{k}']:>12.3f}" for b in blocks))
    sp = result["speed"]
    raw = sp["raw"]
    lines.append(f"raw (bus encoder path): encode {raw['encode_rate']:.1f}/s, query p50 {raw['query_ms']['p50']:.2f}"
                 f" p95 {raw['query_ms']['p95']:.2f} ms; sentence-transformers path: encode"
                 f" {raw['sentence_transformers_path']['encode_rate']:.1f}/s, query p50"
                 f" {raw['sentence_transformers_path']['query_ms']['p50']:.2f} ms")  # fmt: skip
    for label, r in sp["ratios"].items():
        s = sp[label]
        lines.append(f"{label}: ingest {s['ingest_rate']:.1f}/s (x{r['ingest']:.2f} raw), recall p50"
                     f" {s['recall_ms']['p50']:.2f} ms (x{r['recall_p50']:.2f}), p95 {s['recall_ms']['p95']:.2f} ms"
                     f" (x{r['recall_p95']:.2f})")  # fmt: skip
    return "\n".join(lines)


def summary_longmemeval(result: dict[str, Any]) -> str:
    lines = [f"LongMemEval_s: {result['questions']} questions ({result['skipped_no_user_gold']} skipped)"]
    keys = ["recall_any@5", "recall_all@5", "ndcg@5", "recall_any@10", "recall_all@10", "ndcg@10"]
    lines.append(" " * 22 + "".join(f"{k:>15}" for k in keys))
    for m in result["methods"]:
        lines.append(f"  {m:<20}" + "".join(f"{result[m]['overall'][k]:>15.3f}" for k in keys))
    return "\n".join(lines)
