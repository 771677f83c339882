"""The LongMemEval_s retrieval protocol, session level.

A session document is the user turns of the session joined; gold = the
question's answer sessions; questions with no user-side evidence (no user turn
marked ``has_answer`` in an answer session) are skipped. Metrics:
recall_any@k, recall_all@k and NDCG@k for k = 5, 10.

In memorybus each user turn is one episodic memory (scoped to the question's
haystack), dated with the session date; a turn longer than ``MAX_CHARS`` is
split into chunks. Two modes, both stored through the public ``remember_many``:
*structured* gives each memory its declared conversation fields (thread = the
session, position = chunk index, speaker = ``user``); *plain* stores the same
texts and times with no conversation fields. Sessions are ranked by their best recalled memory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def parse_date(text: str) -> float | None:
    """The dataset's own date format, ``2023/05/20 (Sat) 07:47`` (UTC), or None."""
    try:
        return datetime.strptime(text.strip(), "%Y/%m/%d (%a) %H:%M").replace(tzinfo=UTC).timestamp()
    except (ValueError, AttributeError):
        return None

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
            when = parse_date(date)
            if when is None:
                raise ValueError(f"{q['question_id']}: cannot parse {date!r}")
            users = [t["content"] for t in turns if t["role"] == "user" and t["content"].strip()]
            sessions.append(Session(sid, date, when, users))
            if sid in q["answer_session_ids"] and any(t["role"] == "user" and t.get("has_answer") for t in turns):
                user_gold = True
        if not user_gold:
            skipped += 1
            continue
        qdate = parse_date(q["question_date"]) or max(s.when for s in sessions)
        items.append(
            Item(q["question_id"], q["question_type"], q["question"], qdate, list(q["answer_session_ids"]), sessions)
        )
    return items, skipped


def texts(session: Session) -> list[str]:
    """The memory texts of one session: its user turns, long ones in chunks."""
    return [chunk for text in session.user_turns for chunk in _chunks(text)]


def items(item: Item, mode: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The ``remember_many`` items of the question's haystack and the session id of each.

    Structured: each with its declared conversation fields (``thread`` = the
    session, ``position``, ``speaker="user"``); plain: text and event time only.
    """
    if mode not in ("structured", "plain"):
        raise ValueError(f"unknown mode {mode!r}")
    out: list[dict[str, Any]] = []
    session_ids: list[str] = []
    for s in item.sessions:
        for i, t in enumerate(texts(s)):
            m: dict[str, Any] = {"content": t, "scope": "user", "kind": "episodic", "valid_from": s.when,
                                 "created_at": s.when}  # fmt: skip
            if mode == "structured":
                m |= {"thread": s.session_id, "position": i, "speaker": "user"}
            out.append(m)
            session_ids.append(s.session_id)
    return out, session_ids
