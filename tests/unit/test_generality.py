"""The product is not shaped by the evaluation files: outside ``memorybus/evaluation/`` (the
harness that loads them), no module names their fields, their speakers or their session
keys. Ranking reads declared fields only (``test_retrieval_ranking`` checks the behaviour;
this checks the source)."""

from __future__ import annotations

import re
from pathlib import Path

import memorybus

ROOT = Path(memorybus.__file__).parent

# field names of the LoCoMo and LongMemEval files, and the speakers of the LoCoMo dev conversations
FORBIDDEN = re.compile(
    r"\b(dia_id|blip_caption|speaker_a|speaker_b|haystack_\w+|has_answer|answer_session_ids|question_date"
    r"|Caroline|Melanie|Gina|Joanna|Nate|Jon|John|Tim|Maria)\b"
    r"|session_(\d+|N)\b"
)


def product_sources() -> list[Path]:
    return [p for p in sorted(ROOT.rglob("*.py")) if "evaluation" not in p.relative_to(ROOT).parts]


def test_no_module_outside_the_evaluation_harness_names_the_evaluation_data():
    sources = product_sources()
    assert len(sources) > 50 and ROOT / "retrieval" / "ranking.py" in sources
    found = [
        f"{p.relative_to(ROOT)}:{n}: {m.group(0)}"
        for p in sources
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        for m in [FORBIDDEN.search(line)]
        if m
    ]
    assert found == []


def test_the_check_finds_what_it_looks_for():
    assert FORBIDDEN.search('turn["dia_id"]') and FORBIDDEN.search("Melanie: hi") and FORBIDDEN.search("session_3")
    assert not FORBIDDEN.search("the user's session and thread") and not FORBIDDEN.search("Johnson")
