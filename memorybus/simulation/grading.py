"""Grading answers against the ground truth, and checking what agents saw.

An answer is correct when a text names the question's subject (its markers)
and the true value, as whole words. A scope leak is any memory, pushed event
or prompt line that reached a context the visibility rule keeps it from:
judged by the scope the memory was written with (the runner's registry of
acknowledged writes), not by what the bus says about it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from memorybus.scopes import Context, Scope
from memorybus.simulation.plan import Truth
from memorybus.simulation.tasks import Answer, Hit, Question, Received

ScopeTuple = tuple[str, str, str, str]


@lru_cache(maxsize=4096)
def _pattern(phrase: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(phrase.casefold()) + r"(?!\w)")


def names(text: str, phrase: str) -> bool:
    """``phrase`` occurs in ``text`` as whole words (case-insensitive)."""
    return bool(_pattern(phrase).search(text.casefold()))


def states(text: str | None, truth: Truth) -> bool:
    """``text`` names the question's subject and its true value."""
    return bool(text) and names(text or "", truth.value) and all(names(text or "", m) for m in truth.markers)


def visible(scope: ScopeTuple, asker: ScopeTuple) -> bool:
    return Scope(*scope).visible_to(Context(*asker))


@dataclass
class Grader:
    """Grades each step's answers and keeps the rows the report is built from."""

    registry: dict[str, ScopeTuple] = field(default_factory=dict)  # node id -> scope it was written with
    tokens: dict[str, str] = field(default_factory=dict)  # canary token -> owning agent
    rows: list[dict[str, Any]] = field(default_factory=list)
    leaks: list[dict[str, Any]] = field(default_factory=list)
    first_correct: dict[tuple[str, int], dict[str, float]] = field(default_factory=dict)
    wrong: list[dict[str, Any]] = field(default_factory=list)  # examples of wrong top-1 recall answers
    errors: int = 0

    def register(self, node: str, scope: ScopeTuple) -> None:
        self.registry.setdefault(node, scope)

    # ------------------------------------------------------------------ leaks
    def _check(self, where: str, hit: Hit | Received, asker: ScopeTuple, agent: str) -> None:
        written = self.registry.get(hit.id if isinstance(hit, Hit) else hit.node, hit.scope)
        if not visible(written, asker) or not visible(hit.scope, asker):
            self.leaks.append({"where": where, "agent": agent, "memory": hit.id if isinstance(hit, Hit) else hit.node,
                               "scope": list(written), "reported_scope": list(hit.scope), "asker": list(asker)})

    def check_text(self, where: str, text: str, agent: str) -> None:
        for token, owner in self.tokens.items():
            if owner != agent and token in text:
                self.leaks.append({"where": where, "agent": agent, "token": token, "owner": owner})

    def check_received(self, agent: str, org: str, events: Iterable[Received]) -> None:
        for ev in events:
            self._check("event", ev, (org, ev.user, agent, ""), agent)

    # ---------------------------------------------------------------- answers
    def grade(self, step: int, day: float, wall: float, q: Question, t: Truth, a: Answer) -> list[dict[str, Any]]:
        """Grade one answer (every method it was answered with); check it for leaks."""
        hits = list(a.recall or []) + list(a.context_hits) + ([a.fact] if a.fact else [])
        for h in hits:
            self._check(q.kind, h, t.scope, t.agent)
        if a.context:
            self.check_text("context", a.context, t.agent)
        self.errors += len(a.errors)
        if q.kind == "canary":
            return []
        base = {"step": step, "day": day, "question": q.id, "kind": q.kind, "category": t.category,
                "agent": t.agent, "asker_observed": t.asker_observed}
        rows = []
        if a.recall is not None or "recall" in q.methods:
            recall = a.recall or []
            rows.append({**base, "method": "recall", "top1": bool(recall) and states(recall[0].content, t),
                         "top5": any(states(h.content, t) for h in recall[:5])})
            if not rows[-1]["top1"] and len(self.wrong) < 50:
                self.wrong.append({"question": q.text, "kind": q.kind, "truth": t.value, "step": step,
                                   "asker_observed": t.asker_observed, "errors": a.errors,
                                   "top": [h.content for h in recall[:3]]})
        if "fact" in q.methods:
            ok = a.fact is not None and states(a.fact.content, t)
            rows.append({**base, "method": "current_fact", "top1": ok, "top5": ok})
        if "context" in q.methods:
            ok = any(states(line, t) for line in (a.context or "").splitlines())
            rows.append({**base, "method": "context_for", "top1": ok, "top5": ok})
        if q.kind == "finding":  # found by another agent: alone, the asker cannot know it
            rows.append({**base, "method": "no_bus", "top1": False, "top5": False})
        if q.key:
            rows.append({**base, "method": "no_bus", "top1": bool(a.notebook) and a.notebook[0] == t.value,
                         "top5": t.value in a.notebook[:5]})
        if q.kind == "current" and q.key:
            ok = states(a.pushed, t)
            rows.append({**base, "method": "pushed", "top1": ok, "top5": ok})
        answered = any(r["top1"] for r in rows if r["method"] in ("recall", "current_fact"))
        if q.kind == "current" and t.version and not t.asker_observed and answered:
            self.first_correct.setdefault(t.version, {"wall": a.at, "day": day})
        self.rows.extend(rows)
        return rows


def accuracy(rows: Iterable[dict[str, Any]], method: str, measure: str = "top1", **where: Any) -> float | None:
    """The share of rows answered correctly by ``method`` (None when there are none)."""
    sel = [r for r in rows if r["method"] == method and all(r.get(k) == v for k, v in where.items())]
    return sum(bool(r[measure]) for r in sel) / len(sel) if sel else None
