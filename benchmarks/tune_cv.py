"""Cross-validated tuning: which ranking weights hold on questions they were not chosen on.

Every weight set is scored once per question (the shard's own search, as in
``tune_recall.py``: real SQLite + Qdrant Edge, embeddings cached on disk, so the
model runs once for all sets). Then the questions are split into folds:

- LoCoMo: tune on 3 conversations, score the other 2, over all 10 ways of
  choosing the 3 (each conversation is unseen in 4 folds);
- LongMemEval: ``--folds`` folds of questions, each question type spread evenly
  over them; tune on all folds but one, score that one, rotating.

For each weight set it prints its score on the folds it would be tuned on and
on the unseen folds (mean over folds) and the gap between them, and how often
it beats the defaults on an unseen fold. Then the selection itself is
cross-validated: in each fold the set with the best tuned score (the mean of
the modes, structured and plain) is picked and scored on the unseen folds; the
"selected" row is the honest estimate of what tuning on these files buys.
For LoCoMo it also prints the per-category unseen R@10 of the defaults and of
the per-fold selection, beside the baselines (which have nothing to tune).

Caveat: the defaults were themselves tuned on these dev files, so their unseen
figures here are unseen only with respect to the choice among these sets.

Examples::

    python benchmarks/tune_cv.py locomo --data ../shared/data/locomo/locomo_dev.json
    python benchmarks/tune_cv.py longmemeval --data ../shared/data/longmemeval/longmemeval_s_dev48.json
    python benchmarks/tune_cv.py locomo --data ... --grid neighbor=0.5,0.7 --no-ablations
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import numpy as np  # noqa: E402

from benchmarks.common import log  # noqa: E402
from benchmarks.tune_recall import CachedEncoder, harness, lme_baselines, tuning_parser  # noqa: E402

#: each ranking rule switched off (or to its plainest form), one set each: does it earn its place?
ABLATIONS: dict[str, dict[str, Any]] = {
    "no thread lift": {"thread": 0.0},
    "no thread neighbours": {"neighbor": 0.0, "thread_members": 0},
    "no speaker": {"speaker": 0.0},
    "no time": {"time": 0.0},
    "no answer form": {"answer": 0.0},
    "no named thing": {"named": 0.0},
    "no name check": {"name_check": False},
    "no length prior": {"length": 0.0},
    "no thread centroid": {"thread_centroid": 0.0},
    "no context mix": {"context_mix": 0.0},
    "keyword 0.8": {"keyword": 0.8},
    "neighbor 0.5": {"neighbor": 0.5},
}


@dataclass
class Scores:
    """Per-question scores of one weight set: ``rows[mode][i]`` is question i's metric."""

    label: str
    overrides: dict[str, Any]
    rows: dict[str, list[float]] = field(default_factory=dict)


# ------------------------------------------------------------------ scoring
def locomo_questions(data: str) -> tuple[list[Any], list[tuple[str, int, list[str]]]]:
    from memorybus.evaluation import locomo

    convs = locomo.load(data)
    qs = [(c.sample_id, q.category, q.gold) for c in convs for q in c.questions if q.category in locomo.OVERALL]
    return convs, qs


def locomo_scores(convs: list[Any], encoder: CachedEncoder, ranking: Any, mode: str) -> list[float]:
    """R@10 of every question of categories 1-4, in :func:`locomo_questions` order."""
    from memorybus.evaluation import locomo
    from memorybus.evaluation.metrics import dedupe, recall_at

    out: list[float] = []
    with harness(encoder, ranking) as h:
        for c in convs:
            ctx, dia_of = h.store_conversation(c, mode)
            for q in c.questions:
                if q.category not in locomo.OVERALL:
                    continue
                hits = h.ask(ctx, q.text, 10, c.last_time)
                out.append(recall_at(dedupe(d for x in hits for d in dia_of[x.node.id]), q.gold, 10))
    return out


def locomo_baselines(convs: list[Any], encoder: CachedEncoder) -> dict[str, list[float]]:
    """Every baseline's R@10 per question (nothing to tune: the same on every fold)."""
    from memorybus.evaluation import locomo
    from memorybus.evaluation.baselines import Corpus
    from memorybus.evaluation.metrics import recall_at

    out: dict[str, list[float]] = defaultdict(list)
    for c in convs:
        corpus = Corpus([t.content for t in c.turns], encoder.encode([t.content for t in c.turns]),
                        {"dense_dated": encoder.encode([t.dataset_text for t in c.turns])})  # fmt: skip
        qs = [q for q in c.questions if q.category in locomo.OVERALL]
        for q, v in zip(qs, encoder.encode([q.text for q in qs]), strict=True):
            for name, order in corpus.rank_all(q.text, v).items():
                out[name].append(recall_at([c.turns[i].dia_id for i in order[:10]], q.gold, 10))
    encoder.save()
    return out


def lme_scores(items: list[Any], encoder: CachedEncoder, ranking: Any, mode: str) -> list[float]:
    """recall_all@5 of every question, in ``items`` order."""
    from memorybus.evaluation.metrics import dedupe, recall_all_at

    out: list[float] = []
    with harness(encoder, ranking) as h:
        for it in items:
            ctx, sid = h.store_sessions(it, mode)
            hits = h.ask(ctx, it.question, 100, it.question_date)
            out.append(recall_all_at(dedupe(sid[x.node.id] for x in hits if x.node.id in sid), it.gold, 5))
    return out


# ------------------------------------------------------------------- folds
def locomo_folds(groups: Sequence[str], tune: int = 3) -> list[tuple[list[int], list[int]]]:
    """(tuned, unseen) question indices for every way of tuning on ``tune`` conversations."""
    names = list(dict.fromkeys(groups))
    folds = []
    for chosen in itertools.combinations(names, tune):
        tuned = [i for i, g in enumerate(groups) if g in chosen]
        folds.append((tuned, [i for i, g in enumerate(groups) if g not in chosen]))
    return folds


def stratified_folds(kinds: Sequence[str], k: int) -> list[tuple[list[int], list[int]]]:
    """``k`` folds with each kind dealt round-robin over them; (all but one, that one)."""
    fold_of: dict[int, int] = {}
    seen: dict[str, int] = defaultdict(int)
    for i, kind in enumerate(kinds):
        fold_of[i] = seen[kind] % k
        seen[kind] += 1
    return [([i for i in fold_of if fold_of[i] != f], [i for i in fold_of if fold_of[i] == f]) for f in range(k)]


def _mean(rows: Sequence[float], idx: Sequence[int]) -> float:
    return float(np.mean([rows[i] for i in idx])) if idx else float("nan")


def cross_validate(sets: list[Scores], modes: Sequence[str], folds: list[tuple[list[int], list[int]]]
                   ) -> dict[str, Any]:  # fmt: skip
    """Per set: tuned and unseen score per mode (mean over folds), the gap, wins over the
    defaults (``sets[0]``) on unseen folds; and the per-fold selection by tuned score."""

    def joint(s: Scores, idx: Sequence[int]) -> float:
        return float(np.mean([_mean(s.rows[m], idx) for m in modes]))

    per_set = []
    for s in sets:
        entry: dict[str, Any] = {"label": s.label, "overrides": s.overrides}
        for m in modes:
            tuned = [_mean(s.rows[m], t) for t, _ in folds]
            unseen = [_mean(s.rows[m], u) for _, u in folds]
            base = [_mean(sets[0].rows[m], u) for _, u in folds]
            entry[m] = {"dev": _mean(s.rows[m], range(len(s.rows[m]))), "tuned": float(np.mean(tuned)),
                        "unseen": float(np.mean(unseen)), "gap": float(np.mean(tuned) - np.mean(unseen)),
                        "unseen_wins": sum(u > b + 1e-9 for u, b in zip(unseen, base, strict=True)),
                        "unseen_losses": sum(u < b - 1e-9 for u, b in zip(unseen, base, strict=True))}  # fmt: skip
        entry["unseen_joint"] = float(np.mean([entry[m]["unseen"] for m in modes]))
        per_set.append(entry)
    picks = []
    for tuned, unseen in folds:
        best = max(range(len(sets)), key=lambda j: (joint(sets[j], tuned), -j))  # ties: the earlier set
        picks.append({"set": sets[best].label, "unseen_idx": unseen} | {
            m: {"tuned": _mean(sets[best].rows[m], tuned), "unseen": _mean(sets[best].rows[m], unseen)} for m in modes})
    selected = {m: {"tuned": float(np.mean([p[m]["tuned"] for p in picks])),
                    "unseen": float(np.mean([p[m]["unseen"] for p in picks]))} for m in modes}  # fmt: skip
    for m in modes:
        selected[m]["gap"] = selected[m]["tuned"] - selected[m]["unseen"]
    best_unseen = max(per_set, key=lambda e: e["unseen_joint"])
    return {"sets": per_set, "picks": picks, "selected": selected, "best_by_unseen": best_unseen["label"],
            "n_folds": len(folds)}  # fmt: skip


def selected_rows(sets: list[Scores], cv: dict[str, Any], mode: str, n: int) -> list[float]:
    """Each question's score under the set selected in the folds where it was unseen (mean)."""
    by_label = {s.label: s for s in sets}
    acc: dict[int, list[float]] = defaultdict(list)
    for p in cv["picks"]:
        for i in p["unseen_idx"]:
            acc[i].append(by_label[p["set"]].rows[mode][i])
    return [float(np.mean(acc[i])) for i in range(n)]


# ------------------------------------------------------------------ output
def cv_table(cv: dict[str, Any], modes: Sequence[str], metric: str) -> str:
    head = f"{'weight set':<26}" + "".join(f"  {m + ': dev/tuned/unseen, gap, unseen wins/losses':<46}" for m in modes)
    lines = [f"{metric}, {cv['n_folds']} folds (tuned = the folds it would be tuned on, unseen = the others; "
             "wins/losses: unseen folds where it beats / trails the defaults)", head]
    for e in cv["sets"]:
        cells = ""
        for m in modes:
            r = e[m]
            cells += f"  {r['dev']:.3f}/{r['tuned']:.3f}/{r['unseen']:.3f} {r['gap']:+.3f}"
            cells += f" {r['unseen_wins']:>2}/{r['unseen_losses']:<2}{'':<17}"
        lines.append(f"{e['label'][:26]:<26}{cells}")
    sel = cv["selected"]
    lines.append("selected per fold by tuned score: " + ", ".join(
        f"{m} tuned {sel[m]['tuned']:.3f} unseen {sel[m]['unseen']:.3f} gap {sel[m]['gap']:+.3f}" for m in modes))
    picked: dict[str, int] = defaultdict(int)
    for p in cv["picks"]:
        picked[p["set"]] += 1
    lines.append("picked: " + ", ".join(f"{k} x{v}" for k, v in sorted(picked.items(), key=lambda kv: -kv[1])))
    lines.append(f"best mean unseen score: {cv['best_by_unseen']}")
    return "\n".join(lines)


def by_category(cats: Sequence[int], columns: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Each column's mean per LoCoMo category, and overall."""
    from memorybus.evaluation.locomo import CATEGORIES

    out = {}
    for label, rows in columns.items():
        out[label] = {CATEGORIES[cat]: float(np.mean([r for r, c in zip(rows, cats, strict=True) if c == cat]))
                      for cat in sorted(set(cats))} | {"overall": float(np.mean(rows))}  # fmt: skip
    return out


def category_table(table: dict[str, dict[str, float]]) -> str:
    names = list(next(iter(table.values())))
    lines = [f"{'unseen R@10 by category':<34}" + "".join(f"{n[:11]:>12}" for n in names)]
    for label, per in table.items():
        lines.append(f"{label[:34]:<34}" + "".join(f"{per[n]:>12.3f}" for n in names))
    return "\n".join(lines)


# -------------------------------------------------------------------- main
def weight_sets(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    from memorybus.cli import _weights

    sets: list[tuple[str, dict[str, Any]]] = [("defaults", {})]
    if not args.no_ablations:
        sets += list(ABLATIONS.items())
    grid = [(g.partition("=")[0], g.partition("=")[2].split(",")) for g in args.grid]
    for combo in itertools.product(*[v for _, v in grid]) if grid else []:
        over = _weights([f"{n}={v}" for (n, _), v in zip(grid, combo, strict=True)])
        sets.append((",".join(f"{k}={v}" for k, v in over.items()), over))
    return sets


def main(argv: list[str] | None = None) -> int:
    p = tuning_parser(__doc__)
    p.add_argument("--no-ablations", action="store_true", help="only the defaults and the --grid sets")
    p.add_argument("--folds", type=int, default=4, help="LongMemEval: folds of questions")
    args = p.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from memorybus.config import RankingWeights

    known = {f.name for f in fields(RankingWeights)}
    for _, over in ABLATIONS.items():
        assert set(over) <= known, over
    encoder = CachedEncoder(args.cache, model=args.model)
    t0 = time.perf_counter()
    if args.dataset == "locomo":
        convs, qs = locomo_questions(args.data)
        folds = locomo_folds([g for g, _, _ in qs])
        base = locomo_baselines(convs, encoder)
        score = lambda r, m: locomo_scores(convs, encoder, r, m)  # noqa: E731
    else:
        from memorybus.evaluation import longmemeval

        items, _ = longmemeval.load(args.data)
        folds = stratified_folds([it.question_type for it in items], args.folds)
        base = lme_baselines(items, encoder)
        score = lambda r, m: lme_scores(items, encoder, r, m)  # noqa: E731
    sets: list[Scores] = []
    for label, over in weight_sets(args):
        s = Scores(label, over)
        for m in modes:
            s.rows[m] = score(replace(RankingWeights(), **over), m)
        log(f"{label}: " + ", ".join(f"{m} {np.mean(s.rows[m]):.3f}" for m in modes)
            + f" ({time.perf_counter() - t0:.0f} s)")  # fmt: skip
        sets.append(s)
    cv = cross_validate(sets, modes, folds)
    metric = "LoCoMo R@10 (categories 1-4)" if args.dataset == "locomo" else "LongMemEval recall_all@5"
    print(cv_table(cv, modes, metric))
    n = len(sets[0].rows[modes[0]])
    print("baselines (nothing tuned): " + ", ".join(f"{k} {np.mean(v):.3f}" for k, v in base.items()))
    result: dict[str, Any] = {"dataset": args.dataset, "cv": cv, "baselines": {k: float(np.mean(v))
                                                                               for k, v in base.items()}}
    if args.dataset == "locomo":
        cats = [c for _, c, _ in qs]
        columns: dict[str, list[float]] = {}
        for m in modes:
            columns[f"{m} defaults"] = sets[0].rows[m]
            columns[f"{m} selected per fold"] = selected_rows(sets, cv, m, n)
        columns |= {f"baseline {k}": v for k, v in base.items()}
        result["by_category"] = by_category(cats, columns)
        print(category_table(result["by_category"]))
    log(f"{time.perf_counter() - t0:.1f} s")
    if args.out:
        for p_ in cv["picks"]:
            p_.pop("unseen_idx")
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
