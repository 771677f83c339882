"""One curated public API: what the README and docs/ use comes from ``memorybus`` itself.

The README and docs/ are the user's map: every ``mb.X`` / ``memorybus.X`` name they use, every
policy class a ``Config`` field holds, and the types a public call returns must be
importable from the top-level package, and everything exported must resolve.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import memorybus
from memorybus.config import Config

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def test_every_exported_name_resolves_and_nothing_private_is_exported():
    assert sorted(memorybus.__all__) == sorted(memorybus._EXPORTS)
    for name in memorybus.__all__:
        assert not name.startswith("_")
        assert getattr(memorybus, name) is not None


def test_every_name_the_docs_use_is_importable_from_memorybus():
    text = "\n".join(p.read_text() for p in [README, *DOCS])
    used = set(re.findall(r"\b(?:mb|memorybus)\.([A-Z][A-Za-z]+|connect|new_id|derived_id)\b", text))
    used |= set(re.findall(r"`((?:[A-Z][a-z]+)+(?:Policy|Weights|Options|Block|Page|Hit|Result))\b", text))
    assert {"Config", "Context", "RecallOptions", "BusPolicy", "RankingWeights"} <= used
    missing = sorted(n for n in used if n not in memorybus.__all__)
    assert missing == [], missing


def test_every_policy_a_config_holds_is_exported():
    for f in dataclasses.fields(Config):
        kind = type(getattr(Config(), f.name))
        if dataclasses.is_dataclass(kind):
            assert getattr(memorybus, kind.__name__) is kind, f.name


def test_what_public_calls_return_is_exported():
    from memorybus.client import MemoryBus

    returns = {"context_for": "ContextBlock", "inspect": "Inspection", "list_memories": "MemoryPage",
               "assert_fact": "FactResult", "subscribe": "Subscription", "remember": "MemoryNode"}  # fmt: skip
    for method, name in returns.items():
        assert getattr(MemoryBus, method).__signature__.return_annotation == name
        assert name in memorybus.__all__


def _architecture() -> set[str]:
    """The module paths docs/architecture.md lists (one line per module)."""
    text = ARCHITECTURE.read_text()
    block = text.split("```")[1]
    listed: set[str] = set()
    package = ""
    for line in block.splitlines():
        name = line.strip().split(" ")[0] if line.strip() else ""
        if line.startswith("  ") and not line.startswith("    ") and name:
            package = name if name.endswith("/") else ""
            if not package:
                listed.add(name)
        elif line.startswith("    ") and package and name.endswith(".py"):
            listed.add(package + name)
    return listed


def test_the_architecture_page_lists_every_module_once():
    root = ROOT / "memorybus"
    modules = {str(p.relative_to(root)) for p in root.rglob("*.py") if p.name != "__init__.py"}
    listed = _architecture()
    assert sorted(modules - listed) == [], "modules missing from docs/architecture.md"
    assert sorted(n for n in listed - modules if not n.endswith("__init__.py")) == []
