"""Shared helpers for the memorybus benchmarks (no memorybus or Ray imports here).

Call :func:`prepare_env` before anything imports ``ray``: it points Ray at a
private temp directory and keeps every address on loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# --------------------------------------------------------------------- env


def prepare_env() -> str:
    """Set the environment Ray and the model need; returns the private RAY_TMPDIR.

    Must run before ``import ray`` or ``numpy`` (directly or through ``memorybus``): a
    benchmark runs the raw model beside the bus's actors, so it also sets
    ``memorybus.env.BESIDE_MODEL_ENV`` (idle threads sleep; the actors inherit it).
    """
    from memorybus import env

    ray_tmp = tempfile.mkdtemp(prefix="mbb-", dir="/tmp")
    os.environ["RAY_TMPDIR"] = ray_tmp
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # a Ray started here binds to loopback
    env.prepare(**env.BESIDE_MODEL_ENV)
    return ray_tmp


def parser(
    doc: str | None, *, data_dir: bool = False, out: bool = True, corpus: bool = False
) -> argparse.ArgumentParser:
    """A benchmark's argument parser: its docstring's first paragraph as description, and
    the options every benchmark shares (``--data-dir``, ``--out``) when asked for;
    ``corpus``: the synthetic corpus's size (``--n`` memories of :func:`make_texts` over
    ``--users`` users, ``--queries`` questions of :func:`make_queries`)."""
    p = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    if data_dir:
        p.add_argument("--data-dir", default=None, help="bus data dir (default: a fresh temp dir, removed after)")
    if out:
        p.add_argument("--out", default=None, help="write the results as JSON to this path")
    if corpus:
        p.add_argument("--n", type=int, default=100_000)
        p.add_argument("--users", type=int, default=10)
        p.add_argument("--queries", type=int, default=200)
    return p


def emit(result: Any, out: str | None) -> None:
    """Print ``result`` as JSON, and write it to ``out`` when given."""
    text = json.dumps(result, indent=2, default=float)
    print(text, flush=True)
    if out:
        Path(out).write_text(text + "\n")


def run_eval_cli(argv: list[str]) -> int:
    """``memorybus eval DATASET ARGS`` from a benchmark script (``argv``: DATASET ARGS)."""
    prepare_env()  # with the thread settings the raw model beside the bus needs
    from memorybus.cli import main

    return main(["eval", *argv])


# ---------------------------------------------------------------- progress


class Progress:
    """A tqdm-free progress line on stderr, printed about every 10%."""

    def __init__(self, label: str, total: int, steps: int = 10) -> None:
        self.label = label
        self.total = max(1, total)
        self.every = max(1, self.total // steps)
        self.start = time.perf_counter()
        self._next = self.every

    def update(self, done: int) -> None:
        if done >= self._next or done >= self.total:
            elapsed = time.perf_counter() - self.start
            rate = done / elapsed if elapsed > 0 else 0.0
            print(
                f"  [{self.label}] {done}/{self.total} ({100 * done / self.total:.0f}%)",
                f"{elapsed:.1f}s {rate:.1f}/s",
                file=sys.stderr,
                flush=True,
            )
            while self._next <= done:
                self._next += self.every


def process_cpu(pid: int) -> float:
    """Seconds of CPU (user + system) process ``pid`` has used, from ``/proc``; 0.0 once gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ stats


def percentiles_ms(seconds: list[float]) -> dict[str, float]:
    """p50 / p95 / mean / max of a list of durations, in milliseconds."""
    from memorybus.latency import summary_ms

    return summary_ms(seconds, with_max=True) or dict.fromkeys(("p50", "p95", "mean", "max"), float("nan"))


# ------------------------------------------------------------------ texts

# The synthetic corpus's words (benchmarks/corpus_words.json): people, relations, places,
# activities, times, feelings, preferences, months and verbs of saying.
_WORDS = json.loads((Path(__file__).with_name("corpus_words.json")).read_text(encoding="utf-8"))
PEOPLE, RELATIONS, PLACES, ACTIVITIES, WHENS, FEELINGS, PREFERENCES, MONTHS, SAYS = (
    tuple(_WORDS[name]) for name in ("people", "relations", "places", "activities", "whens", "feelings",
                                     "preferences", "months", "says")
)


def _stamp(rng: random.Random) -> str:
    hour = rng.randint(1, 12)
    minute = rng.randint(0, 59)
    ampm = rng.choice(("am", "pm"))
    day, month, year = rng.randint(1, 28), rng.choice(MONTHS), rng.randint(2021, 2024)
    return f"({hour}:{minute:02d} {ampm} on {day} {month}, {year})"


def _sentence(rng: random.Random) -> str:
    who = rng.choice(PEOPLE)
    verb = rng.choice(SAYS)
    form = rng.randrange(4)
    if form == 0:
        body = f"I {rng.choice(ACTIVITIES)} {rng.choice(WHENS)} {rng.choice(FEELINGS)}."
    elif form == 1:
        body = f"{rng.choice(RELATIONS).capitalize()} and I {rng.choice(ACTIVITIES)} at {rng.choice(PLACES)}."
    elif form == 2:
        body = f"I want to go back to {rng.choice(PLACES)} with {rng.choice(RELATIONS)} {rng.choice(WHENS)}."
    else:
        body = f"Just so you know, {rng.choice(RELATIONS)} {rng.choice(PREFERENCES)}."
    return f'{_stamp(rng)} {who} {verb}, "{body}"'


def make_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct chat-memory-like sentences, deterministic in ``seed``.

    Distinct matters, also without the leading date stamp: the bus's embedder
    caches by content hash, so repeats would flatter its throughput.
    """
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        s = _sentence(rng)
        body = s.split(") ", 1)[1]  # distinct without the date stamp too (the bus may embed it without)
        if body not in seen:
            seen.add(body)
            out.append(s)
    return out


def _question(rng: random.Random) -> str:
    who = rng.choice(PEOPLE)
    form = rng.randrange(6)
    if form == 0:
        return f"When was it that {who} {rng.choice(ACTIVITIES)}?"
    if form == 1:
        return f"What did {who} do at {rng.choice(PLACES)} with {rng.choice(RELATIONS)}?"
    if form == 2:
        return f"How did {who} feel after they {rng.choice(ACTIVITIES)}?"
    if form == 3:
        return f"Whose relative {rng.choice(PREFERENCES)}?"
    if form == 4:
        return f"Where does {who} want to go back to, and why?"
    return f"What happened {rng.choice(WHENS)} in {rng.choice(MONTHS)} with {who}?"


def make_queries(n: int, seed: int = 0, exclude: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """``n`` distinct questions over the same vocabulary, none in ``exclude``."""
    rng = random.Random(seed * 7919 + 17)
    out: list[str] = []
    seen: set[str] = set(exclude)
    attempts = 0
    while len(out) < n:
        attempts += 1
        q = _question(rng)
        if q in seen and attempts < 50 * (n + 10):
            continue
        if q in seen:  # vocabulary exhausted: make it unique
            q = f"{q} (variant {attempts})"
        seen.add(q)
        out.append(q)
    return out
