"""Rules of the code itself, read from the source of ``memorybus/`` (issue 12).

- No module is longer than 400 lines (modules stay small and named for one job).
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "memorybus"
MAX_LINES = 400


def _modules() -> list[Path]:
    found = sorted(PACKAGE.rglob("*.py"))
    assert len(found) > 50  # the package is read, not an empty folder
    return found


def test_no_module_is_over_400_lines():
    sizes = {str(p.relative_to(PACKAGE.parent)): len(p.read_text().splitlines()) for p in _modules()}
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split them by job): {over}"
