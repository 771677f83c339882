"""Pluggable hooks the tests name by import path (``"tests.hooks:tagged_summary"``), as a
user names an LLM summarizer or contradiction judge in their Config."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def tagged_summary(members: Sequence[Any]) -> str:
    """A summarizer whose text shows it ran: the count and the first member's text."""
    first = sorted(m.content for m in members)[0]
    return f"Summary of {len(members)} notes: {first}"


def always_contradicts(a: Any, b: Any) -> bool:
    """A judge that calls every similar pair a contradiction."""
    return True


def broken_summary(members: Sequence[Any]) -> str:
    """A summarizer with a bug: raises TypeError."""
    return "Summary: " + len(members)  # type: ignore[operator]


def garbage_summary(members: Sequence[Any]) -> Any:
    """A summarizer that returns no text."""
    return {"not": "text"}
