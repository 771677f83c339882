"""Probe: could a rerank of recall's own top 40 lift LoCoMo's multi-hop and open-domain questions?

An experiment, not a product stage (docs/retrieval.md, "Multi-hop and open-domain:
what was tried"). Each dev question is asked once through ``Shard.search`` with today's
defaults (``tune_recall.py``'s harness: real SQLite + Qdrant Edge, embeddings cached on
disk) for its top 40, then that list is reordered offline two ways and R@10 scored per
category:

- **bridge**: a candidate below the top ``m`` that shares rare words (idf over the
  conversation's turns at least ``rare``, not in the question) with the top ``m`` gets
  ``beta * min(1, shared idf / 10)`` on its score: the hop a multi-hop question would take
  from what matched it to what did not (pseudo-relevance feedback by entities);
- **mmr**: maximal marginal relevance over the memories' vectors,
  ``lam * score - (1 - lam) * max cosine to those already picked``: fewer near-duplicates
  in the top 10, more of the distinct sessions a multi-hop answer spans.

It also prints the error analysis behind them: R@10 and R@40, how many gold turns and
sessions a question has, and how many sessions its top 10 spans.

    python benchmarks/rerank_probe.py --data ../shared/data/locomo/locomo_dev.json
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import numpy as np  # noqa: E402

from benchmarks.tune_recall import CachedEncoder, harness  # noqa: E402

DEPTH = 40
CATS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def asked(data: str, mode: str, encoder: CachedEncoder) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every scored question's top ``DEPTH`` (dialogue ids, scores) and the conversations."""
    from memorybus.config import RankingWeights
    from memorybus.evaluation import locomo
    from memorybus.evaluation.metrics import dedupe

    convs = {c.sample_id: c for c in locomo.load(data)}
    out = []
    with harness(encoder, RankingWeights()) as h:
        for c in convs.values():
            ctx, dia_of = h.store_conversation(c, mode)
            for q in c.questions:
                if q.category not in CATS:
                    continue
                hits = h.ask(ctx, q.text, DEPTH, c.last_time)
                ranked = dedupe(d for hit in hits for d in dia_of[hit.node.id])
                scores = [x.score for x in hits] if len(ranked) == len(hits) else []
                out.append({"conv": c.sample_id, "cat": q.category, "q": q.text, "gold": q.gold, "ranked": ranked,
                            "scores": scores})  # fmt: skip
    return out, convs


def score(rows: list[dict[str, Any]], order: Callable[[dict[str, Any]], list[str]]) -> str:
    by: dict[int, list[float]] = defaultdict(list)
    for o in rows:
        g = set(o["gold"])
        by[o["cat"]].append(len(set(order(o)[:10]) & g) / len(g))
    cells = " ".join(f"{CATS[c]} {np.mean(by[c]):.3f}" for c in CATS)
    return f"{cells}  overall {np.mean([x for v in by.values() for x in v]):.3f}"


class Probe:
    """The reorderings, over one mode's questions: each turn's words and vector, and the
    document frequencies of each conversation's words."""

    def __init__(self, words: dict[tuple[str, str], set[str]], vecs: dict[tuple[str, str], np.ndarray],
                 df: dict[str, tuple[Counter[str], int]]) -> None:  # fmt: skip
        self.words, self.vecs, self.df = words, vecs, df

    def idf(self, cid: str, w: str) -> float:
        seen, n = self.df[cid]
        return math.log((n + 1) / (seen.get(w, 0) + 0.5))

    def bridge(self, o: dict[str, Any], beta: float, m: int, rare: float) -> list[str]:
        from memorybus.retrieval.text import tokens

        if not o["scores"]:
            return list(o["ranked"])
        cid, q, top = o["conv"], set(tokens(o["q"])), o["ranked"][:m]
        pool = {w for t in top for w in self.words[(cid, t)] - q if self.idf(cid, w) >= rare}
        lift = {d: min(1.0, sum(self.idf(cid, w) for w in (self.words[(cid, d)] - q) & pool) / 10.0)
                for d in o["ranked"][m:]}  # fmt: skip
        s = {d: o["scores"][i] + beta * lift.get(d, 0.0) for i, d in enumerate(o["ranked"])}
        return sorted(o["ranked"], key=lambda d: -s[d])

    def mmr(self, o: dict[str, Any], lam: float) -> list[str]:
        if not o["scores"]:
            return list(o["ranked"])
        cid, ranked = o["conv"], o["ranked"]
        picked: list[int] = []
        rest = list(range(len(ranked)))
        while rest and len(picked) < 10:
            def value(i: int) -> float:
                near = max((float(self.vecs[(cid, ranked[i])] @ self.vecs[(cid, ranked[j])]) for j in picked),
                           default=0.0)  # fmt: skip
                return float(lam * o["scores"][i] - (1 - lam) * near)
            best = max(rest, key=value)
            picked.append(best)
            rest.remove(best)
        return [ranked[i] for i in picked]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--modes", default="structured,plain")
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "memorybus-tune-cache"))
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from memorybus.retrieval.text import tokens

    encoder = CachedEncoder(args.cache)
    for mode in args.modes.split(","):
        rows, convs = asked(args.data, mode, encoder)
        words: dict[tuple[str, str], set[str]] = {}
        vecs: dict[tuple[str, str], np.ndarray] = {}
        df: dict[str, tuple[Counter[str], int]] = {}
        for cid, c in convs.items():
            seen: Counter[str] = Counter()
            for t, v in zip(c.turns, encoder.encode([t.content for t in c.turns]), strict=True):
                words[(cid, t.dia_id)] = set(tokens(f"{t.text} {t.caption}"))
                vecs[(cid, t.dia_id)] = v
                seen.update(words[(cid, t.dia_id)])
            df[cid] = (seen, len(c.turns))

        probe = Probe(words, vecs, df)
        print(f"== {mode}")
        for cat in (1, 3):
            sel = [o for o in rows if o["cat"] == cat]
            r40 = np.mean([len(set(o["ranked"]) & set(o["gold"])) / len(o["gold"]) for o in sel])
            golds = np.mean([len(o["gold"]) for o in sel])
            sess = np.mean([len({g.split(":")[0] for g in o["gold"]}) for o in sel])
            top = np.mean([len({d.split(":")[0] for d in o["ranked"][:10]}) for o in sel])
            print(f"{CATS[cat]}: {len(sel)} questions, R@{DEPTH} {r40:.3f}, gold turns {golds:.2f} in {sess:.2f} "
                  f"sessions, the top 10 spans {top:.2f} sessions")  # fmt: skip
        print(f"{'today':<28}{score(rows, lambda o: o['ranked'])}")

        for beta in (0.02, 0.05):
            for m in (1, 3):
                for rare in (2.0, 3.0):
                    order = partial(probe.bridge, beta=beta, m=m, rare=rare)
                    print(f"{f'bridge {beta} top{m} idf>={rare}':<28}{score(rows, order)}")
        for lam in (0.97, 0.95, 0.9, 0.8):
            print(f"{f'mmr {lam}':<28}{score(rows, partial(probe.mmr, lam=lam))}")
    encoder.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
