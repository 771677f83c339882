"""The LoCoMo retrieval protocol: loading, gold normalisation, one memory per turn.

One memory per turn, scoped to its conversation, with the text
``<speaker>: <text>`` plus `` [shares <caption>]`` when the turn has an image
caption; the session date is the memory's event time (``valid_from`` and
``created_at``). Two modes, both stored through the public ``remember_many``:
*structured* gives each turn its declared conversation fields (thread =
conversation and session, position = turn index, speaker); *plain* stores the
same texts and times with no conversation fields at all. Query = the question;
gold = its evidence ids, normalised (``D8:6; D9:17`` is two ids, ``D:11:26`` is
``D11:26``, ``D30:05`` is ``D30:5``), ids that do not exist dropped, questions
left with no gold skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def parse_date(text: str) -> float | None:
    """The dataset's own session date format, ``1:56 pm on 8 May, 2023`` (UTC), or None."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC).timestamp()
    except (ValueError, AttributeError):
        return None

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
OVERALL = (1, 2, 3, 4)


@dataclass(slots=True)
class Turn:
    dia_id: str
    session: int
    index: int
    speaker: str
    date: str
    when: float
    text: str
    caption: str = ""

    @property
    def content(self) -> str:
        shares = f" [shares {self.caption}]" if self.caption else ""
        return f"{self.speaker}: {self.text}{shares}"

    @property
    def dataset_text(self) -> str:
        """The turn as LoCoMo's own retrieval code embeds it (task_eval/dpr_qa.py in
        snap-research/locomo): the session date in brackets, then the speaker's words
        quoted after "said", then the image caption, if any. The ``dense_dated``
        baseline embeds this; memories keep :attr:`content`."""
        shares = f" [shares {self.caption}]" if self.caption else ""
        return f'({self.date}) {self.speaker} said, "{self.text}"{shares}'


@dataclass(slots=True)
class Question:
    text: str
    category: int
    gold: list[str]
    answer: Any = None


@dataclass(slots=True)
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    dropped_questions: int = 0

    @property
    def last_time(self) -> float:
        return max(t.when for t in self.turns)


def normalise_ids(evidence: Any) -> list[str]:
    """``D8:6; D9:17`` -> two ids; ``D:11:26`` -> ``D11:26``; ``D30:05`` -> ``D30:5``."""
    out: list[str] = []
    for part in re.split(r"[;,\s]+", str(evidence)):
        m = re.fullmatch(r"D:?(\d+):0*(\d+)", part.strip())
        if m:
            out.append(f"D{int(m.group(1))}:{int(m.group(2))}")
    return out


def load(path: str | Path) -> list[Conversation]:
    data = json.loads(Path(path).read_text())
    convs: list[Conversation] = []
    for sample in data:
        c = sample["conversation"]
        conv = Conversation(sample["sample_id"], (c["speaker_a"], c["speaker_b"]))
        sessions = sorted(int(k.split("_")[1]) for k in c if re.fullmatch(r"session_\d+", k))
        for s in sessions:
            date = c[f"session_{s}_date_time"]
            when = parse_date(date)
            if when is None:
                raise ValueError(f"{conv.sample_id}: cannot parse session date {date!r}")
            for i, t in enumerate(c[f"session_{s}"]):
                turn = Turn(t["dia_id"], s, i, t["speaker"], date, when, t["text"], t.get("blip_caption") or "")
                conv.turns.append(turn)
        known = {t.dia_id for t in conv.turns}
        for q in sample["qa"]:
            gold = list(dict.fromkeys(g for e in q.get("evidence", []) for g in normalise_ids(e) if g in known))
            if not gold:
                conv.dropped_questions += 1
                continue
            conv.questions.append(Question(q["question"], int(q["category"]), gold, q.get("answer")))
        convs.append(conv)
    return convs


MODES = ("structured", "plain")


def memory_item(conv: Conversation, turn: Turn, mode: str) -> dict[str, Any]:
    """The ``remember_many`` item of one turn.

    Both modes: the text and the session date as event time. Structured adds the
    declared conversation fields: ``thread`` (conversation and session),
    ``position`` (turn index) and ``speaker``.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}")
    item: dict[str, Any] = {"content": turn.content, "scope": "user", "kind": "episodic", "valid_from": turn.when,
                            "created_at": turn.when}  # fmt: skip
    if mode == "structured":
        item |= {"thread": f"{conv.sample_id}/session_{turn.session}", "position": turn.index,
                 "speaker": turn.speaker}  # fmt: skip
    return item
