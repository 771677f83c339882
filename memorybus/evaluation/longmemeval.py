"""The LongMemEval_s retrieval protocol, session level.

A session document is the user turns of the session joined; gold = the
question's answer sessions; questions with no user-side evidence (no user turn
marked ``has_answer`` in an answer session) are skipped. Metrics:
recall_any@k, recall_all@k and NDCG@k for k = 5, 10.

In memorybus each user turn is one episodic memory of its session (scoped to
the question's haystack), dated with the session date; a turn longer than
``MAX_CHARS`` is split into chunks of the same session. Sessions are ranked by
their best recalled memory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memorybus.retrieval.timeparse import parse_datetime

MAX_CHARS = 2000


@dataclass(slots=True)
class Session:
    session_id: str
    date: str
    when: float
    user_turns: list[str]

    @property
    def document(self) -> str:
        return "\n".join(self.user_turns)


@dataclass(slots=True)
class Item:
    question_id: str
    question_type: str
    question: str
    question_date: float
    gold: list[str]
    sessions: list[Session] = field(default_factory=list)


def _chunks(text: str, size: int = MAX_CHARS) -> list[str]:
    text = text.strip()
    if len(text) <= size:
        return [text] if text else []
    out, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            cut = text.rfind(" ", start + size // 2, end)
            end = cut if cut > start else end
        out.append(text[start:end].strip())
        start = end
    return [c for c in out if c]


def load(path: str | Path) -> tuple[list[Item], int]:
    """The evaluable questions and how many were skipped (no user-side gold)."""
    data = json.loads(Path(path).read_text())
    items: list[Item] = []
    skipped = 0
    for q in data:
        sessions: list[Session] = []
        user_gold = False
        for sid, date, turns in zip(
            q["haystack_session_ids"], q["haystack_dates"], q["haystack_sessions"], strict=True
        ):
            when = parse_datetime(date)
            if when is None:
                raise ValueError(f"{q['question_id']}: cannot parse {date!r}")
            users = [t["content"] for t in turns if t["role"] == "user" and t["content"].strip()]
            sessions.append(Session(sid, date, when, users))
            if sid in q["answer_session_ids"] and any(t["role"] == "user" and t.get("has_answer") for t in turns):
                user_gold = True
        if not user_gold:
            skipped += 1
            continue
        qdate = parse_datetime(q["question_date"]) or max(s.when for s in sessions)
        items.append(
            Item(q["question_id"], q["question_type"], q["question"], qdate, list(q["answer_session_ids"]), sessions)
        )
    return items, skipped


def memory_items(session: Session) -> list[dict[str, Any]]:
    """The ``remember_many`` items of one session's user turns."""
    out: list[dict[str, Any]] = []
    turn = 0
    for text in session.user_turns:
        for chunk in _chunks(text):
            out.append(
                {
                    "content": chunk,
                    "scope": "user",
                    "kind": "episodic",
                    "valid_from": session.when,
                    "created_at": session.when,
                    "source": "user",
                    "structured": {"session": session.session_id, "turn": turn},
                }
            )
            turn += 1
    return out
