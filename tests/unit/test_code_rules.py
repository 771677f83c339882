"""Rules of the code itself, read from the source of ``memorybus/`` (issue 12).

- No module is longer than 400 lines (modules stay small and named for one job).
- Only the exception types that can occur are caught: no bare ``except:``, no
  ``except Exception`` / ``except BaseException`` and no ``contextlib.suppress(Exception)``,
  except (a) a handler that only cleans up and raises the same error again (it ends in a
  bare ``raise``) and (b) the few places where a catch-all is the point, listed in
  ``BROAD`` with why, each carrying a comment on its ``except`` line.
- ``assert`` is not used for runtime checks: the package has no ``assert`` at all (a check
  raises a MemoryBusError subclass; a type is narrowed with ``if``/``isinstance``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "memorybus"
MAX_LINES = 400

#: (module, function) -> why a catch-all is meant there
BROAD = {
    ("bus/pushing.py", "_pushing"): "delivery runs the subscriber's own method (user code, any error): "
    "recorded in the subscription's stats and replayed, the loop lives on",
    ("client/subscriptions.py", "_deliver"): "the subscription callback is the caller's code: every "
    "failure is recorded and retried per policy, then surfaced as sub.failed",
    ("client/loading.py", "run"): "the model loader thread keeps whatever loading raised; the joiner raises it",
    ("encoder/embedding.py", "_run"): "the batching worker hands whatever the model raised to every waiting "
    "caller's future; catching less would leave them waiting forever",
    ("actors/direct.py", "_answer"): "a direct read hands whatever the shard's recall raised to its "
    "caller, who raises it as the Ray call would",
    ("storage/vectors.py", "_open"): "qdrant_edge raises plain Exception for every failure",
    ("actors/gauges.py", "_read_slow"): "a monitoring sample reads Redis INFO or a marks file: whatever "
    "fails becomes StoreUnavailable, counted as a store error, and the timer goes on",
    ("actors/hub.py", "_sample_loop"): "a failed delivery-lag sample must never end the timer (the gauges "
    "would vanish); it is logged",
    ("operator/monitoring.py", "mark_backup"): "the backup itself succeeded: failing to record its time for "
    "monitoring is logged and never fails the backup",
    ("client/exit.py", "at_exit"): "closing at interpreter exit: whatever close raises must not mask "
    "the exit status",
    ("hooks.py", "call_hook"): "a judge or summariser hook is the caller's code (any error): it becomes "
    "HookFailed naming the hook, before anything is written",
    ("storage/vectors.py", "_call"): "qdrant_edge raises plain Exception for every failure",
    ("storage/vectors.py", "close"): "qdrant_edge raises plain Exception (a shard closed twice)",
    ("shard/factgroup.py", "_commit"): "the group's leader hands whatever stopped the group to every "
    "caller waiting on it; catching less would leave them waiting forever",
    ("shard/factgroup.py", "_run"): "an error of one call sinks its group: the calls are committed again "
    "one by one, so the error reaches its own caller only",
    ("shard/factgroup.py", "_alone"): "a call committed for a waiting caller: whatever it raised is that "
    "caller's, raised on its thread",
    ("actors/ingest.py", "_one_request"): "one embedding request serves several waiting calls: whatever it "
    "raised is handed to each; catching less would leave them waiting forever",
}
_BROAD_NAMES = {"Exception", "BaseException"}


def _modules() -> list[Path]:
    found = sorted(PACKAGE.rglob("*.py"))
    assert len(found) > 50  # the package is read, not an empty folder
    return found


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


def _broad(expr: ast.expr | None) -> bool:
    if expr is None:
        return True  # a bare except
    names = expr.elts if isinstance(expr, ast.Tuple) else [expr]
    return any(isinstance(n, ast.Name) and n.id in _BROAD_NAMES for n in names)


def _reraises(handler: ast.ExceptHandler) -> bool:
    last = handler.body[-1]
    return isinstance(last, ast.Raise) and last.exc is None


def _broad_catches(path: Path) -> list[tuple[str, int, str]]:
    """(function, line, source line) of every catch-all in ``path`` that does not re-raise."""
    source = path.read_text()
    lines = source.splitlines()
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else func
            if isinstance(child, ast.ExceptHandler) and _broad(child.type) and not _reraises(child):
                found.append((func, child.lineno, lines[child.lineno - 1]))
            if (isinstance(child, ast.Call) and ast.unparse(child.func).endswith("suppress")
                    and any(_broad(a) for a in child.args)):  # fmt: skip
                found.append((func, child.lineno, lines[child.lineno - 1]))
            visit(child, inner)

    visit(ast.parse(source), "<module>")
    return found


def test_no_module_is_over_400_lines():
    sizes = {_name(p): len(p.read_text().splitlines()) for p in _modules()}
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split them by job): {over}"


def test_only_the_listed_places_catch_everything():
    found = {(_name(p), func): (line, text) for p in _modules() for func, line, text in _broad_catches(p)}
    unlisted = {f"{mod}:{line} ({func}): {text.strip()}" for (mod, func), (line, text) in found.items()
                if (mod, func) not in BROAD}  # fmt: skip
    assert not unlisted, "catch the exception types that can occur there, or list the place in BROAD with why"
    undocumented = [f"{mod}:{line}" for (mod, _), (line, text) in found.items() if "#" not in text]
    assert not undocumented, "a deliberate catch-all says why on its except line"
    stale = sorted(set(BROAD) - set(found))
    assert not stale, f"listed in BROAD but no longer catching everything: {stale}"


def test_the_package_has_no_assert():
    asserts = [f"{_name(p)}:{n.lineno}" for p in _modules() for n in ast.walk(ast.parse(p.read_text()))
               if isinstance(n, ast.Assert)]  # fmt: skip
    assert not asserts, "raise a MemoryBusError subclass (or narrow the type with if) instead of assert"


def test_the_rules_see_what_they_forbid(tmp_path):
    """The checks find a catch-all, a suppress(Exception) and a cleanup that re-raises apart."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import contextlib\n"
        "def swallow():\n    try:\n        pass\n    except Exception:\n        return None\n"
        "def bare():\n    try:\n        pass\n    except:\n        pass\n"
        "def tupled():\n    try:\n        pass\n    except (OSError, BaseException):\n        pass\n"
        "def quiet():\n    with contextlib.suppress(Exception):\n        pass\n"
        "def cleanup():\n    try:\n        pass\n    except BaseException:\n        print('undo')\n        raise\n"
        "def narrow():\n    try:\n        pass\n    except (OSError, ValueError):\n        pass\n"
    )
    assert [f for f, _, _ in _broad_catches(probe)] == ["swallow", "bare", "tupled", "quiet"]
