"""The pure core imports in a Python where Ray and redis cannot be imported.

Each check runs in a fresh interpreter whose first act is to install a meta-path
finder that refuses ``ray`` and ``redis`` (as if they were not installed), so a
module that needs either at import time fails there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BLOCKER = textwrap.dedent(
    """
    import sys

    class _Hidden:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("ray", "redis"):
                raise ImportError(f"{name} is hidden in this test")
            return None

    sys.meta_path.insert(0, _Hidden())
    """
)

#: modules that may need Ray (the Ray layer and what drives it) or redis (its store)
NEEDS_RAY_OR_REDIS = ("memorybus.actors", "memorybus.client", "memorybus.simulation", "memorybus.storage.redis")


def _run(code: str, tmp_path: Path) -> dict:
    script = tmp_path / "probe.py"
    script.write_text(BLOCKER + textwrap.dedent(code))
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(script)], check=False, cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_blocker_hides_ray_and_redis(tmp_path):
    out = _run(
        """
        import json
        hidden = []
        for name in ("ray", "redis"):
            try:
                __import__(name)
            except ImportError:
                hidden.append(name)
        print(json.dumps(hidden))
        """,
        tmp_path,
    )
    assert out == ["ray", "redis"]


def test_pure_core_imports_without_ray_or_redis(tmp_path):
    out = _run(
        """
        import json, sys
        import memorybus
        import memorybus.scopes, memorybus.memory.model, memorybus.retrieval, memorybus.config
        import memorybus.bus.conflicts, memorybus.prompt, memorybus.bus.hub, memorybus.storage.kv
        names = [memorybus.Context, memorybus.Scope, memorybus.MemoryNode, memorybus.RecallOptions,
                 memorybus.Config, memorybus.Strategy, memorybus.salience]
        try:
            memorybus.MemoryBus  # the client drives Ray: it must fail here
            client = "imported"
        except ImportError as exc:
            client = str(exc)
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("ray", "redis"))
        print(json.dumps({"names": len(names), "client": client, "loaded": loaded}))
        """,
        tmp_path,
    )
    assert out["names"] == 7 and out["loaded"] == []
    assert "ray" in out["client"] and "hidden" in out["client"]


def test_only_the_ray_layer_needs_ray(tmp_path):
    """Every module outside the Ray layer, the client and the simulation imports without
    Ray or redis (only ``memorybus.storage.redis`` needs redis)."""
    out = _run(
        """
        import importlib, json, pkgutil
        import memorybus
        failed = {}
        for mod in pkgutil.walk_packages(memorybus.__path__, "memorybus."):
            try:
                importlib.import_module(mod.name)
            except ImportError as exc:
                failed[mod.name] = str(exc)
        print(json.dumps(failed))
        """,
        tmp_path,
    )
    assert out, "the blocker hid nothing: the client must need Ray"
    assert all(name.startswith(NEEDS_RAY_OR_REDIS) for name in out), out
    assert "memorybus.scopes" not in out and "memorybus.storage.kv" not in out


def test_embedded_key_value_store_works_without_redis(tmp_path):
    out = _run(
        f"""
        import json
        from memorybus.storage.kv import SqliteKV
        kv = SqliteKV({str(tmp_path / "kv.sqlite")!r})
        kv.put_many({{"sub:a": b"1", "sub:b": b"2", "cur:a": b"3"}})
        kv.delete("sub:b")
        got = [kv.get("sub:a").decode(), kv.get("sub:b"), [k for k, _ in kv.scan("sub:")]]
        kv.close()
        print(json.dumps(got))
        """,
        tmp_path,
    )
    assert out == ["1", None, ["sub:a"]]
