"""Seeded, generic vocabulary for simulated worlds: invented names and plain words.

Names are built from syllables, so every seed yields different people, orgs and
projects; the word pools are ordinary workplace vocabulary. Nothing here comes
from, or is shaped like, any evaluation dataset.
"""

from __future__ import annotations

import random

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kr", "st", "th", "sh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ei", "ou")
_CODAS = ("", "", "n", "r", "l", "s", "m", "nd", "rt", "x")

TEAMS = ("platform", "payments", "search", "data", "security", "mobile", "growth", "support", "infrastructure",
         "research", "billing", "identity")
TITLES = ("engineer", "senior engineer", "analyst", "designer", "product manager", "team lead", "data scientist",
          "technical writer", "site reliability engineer", "architect")
POLICY_TOPICS = ("remote access", "expense approval", "code review", "data retention", "travel booking",
                 "vendor onboarding", "incident response", "password rotation", "open source use", "laptop refresh")
PREFERENCES: dict[str, tuple[str, ...]] = {
    "summary format": ("bullet points", "short paragraphs", "tables", "one-line digests"),
    "meeting slot": ("early mornings", "late mornings", "early afternoons", "late afternoons"),
    "reply language": ("English", "Spanish", "German", "French", "Portuguese"),
    "notification channel": ("email", "chat", "phone", "a weekly digest"),
    "report cadence": ("daily", "twice a week", "weekly", "monthly"),
    "code style": ("tabs", "two spaces", "four spaces"),
}
SMALL_TALK = ("the weather", "a long commute", "weekend plans", "a new coffee place", "a football match",
              "a book they are reading", "the office plants", "a cooking experiment")
TOOLS = ("the test runner", "the log search", "the cost report", "the dependency scanner", "the uptime probe",
         "the ticket tracker")


class Namer:
    """Invents unique, pronounceable names from a seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: tuple[int, int] = (2, 3)) -> str:
        for _ in range(1000):
            n = self.rng.randint(*syllables)
            parts = [self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS) for _ in range(n)]
            text = ("".join(parts) + self.rng.choice(_CODAS)).capitalize()
            if text not in self.used and 4 <= len(text) <= 12:
                self.used.add(text)
                return text
        raise RuntimeError("name space exhausted")  # pragma: no cover - 20*8 syllables per slot

    def person(self) -> str:
        return f"{self.word((1, 2))} {self.word((2, 3))}"

    def token(self) -> str:
        """A random marker word (not a name): canaries of private notes."""
        return "".join(self.rng.choice("bcdfghjklmnpqrstvwxz") + self.rng.choice("aeiou") for _ in range(4))
