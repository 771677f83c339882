"""A venv with CrewAI beside the shared environment, for test_crewai_storage.py.

CrewAI pins ``mcp``, ``openai`` and ``pydantic`` below the versions memorybus's ``mcp``
extra needs, so it is never installed into the shared environment. The venv is built
once per pinned version under ``.venv-crewai/<version>/`` (git-ignored): it sees the
shared environment's packages (memorybus's core, Ray, torch, the model) through a
``.pth`` file, and its own CrewAI, pydantic, mcp and openai come first on ``sys.path``.

``python -m tests.integration.crewai_venv`` builds it (scripts/test.sh does, where the
package registry is reachable); exits non-zero, saying why, when it cannot.
"""

from __future__ import annotations

import fcntl
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

CREWAI_VERSION = "1.15.30"
ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / ".venv-crewai" / CREWAI_VERSION


def python() -> Path:
    return HOME / "bin" / "python"


def build(timeout: float = 900.0) -> str | None:
    """Build the venv unless it is there; None when ready, else why it is not."""
    HOME.parent.mkdir(parents=True, exist_ok=True)
    with open(HOME.parent / f".{CREWAI_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder; the others wait for its venv
        if (HOME / ".ready").exists():
            return None
        shutil.rmtree(HOME, ignore_errors=True)
        try:
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(HOME)], check=True,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
            inner = subprocess.run([str(python()), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
            # the shared environment, even when it is itself a venv (then --system-site-packages misses it)
            shared = dict.fromkeys([*site.getsitepackages(), sysconfig.get_paths()["purelib"]])
            Path(inner, "memorybus-shared.pth").write_text("".join(f"{p}\n" for p in shared))
            pip = subprocess.run([str(python()), "-m", "pip", "install", "-q", f"crewai=={CREWAI_VERSION}"],
                                 check=False, capture_output=True, text=True, timeout=timeout)  # fmt: skip
        except (OSError, subprocess.SubprocessError) as exc:
            return f"could not build the CrewAI venv: {exc}"
        if pip.returncode != 0:
            tail = "\n".join(line for line in pip.stderr.splitlines() if not line.startswith("WARNING"))[-1500:]
            return f"pip could not install crewai=={CREWAI_VERSION} (no package registry?): {tail}"
        (HOME / ".ready").write_text(CREWAI_VERSION)
        return None


if __name__ == "__main__":
    why = build()
    print(why or f"CrewAI {CREWAI_VERSION} venv ready: {HOME}")
    sys.exit(1 if why else 0)
