#!/usr/bin/env python
"""Fetch LangGraph's own store tests for the installed ``langgraph-checkpoint``.

The repository never holds LangGraph's test code. This script downloads the source
distribution of exactly the installed ``langgraph-checkpoint`` version from the package
registry (``pip download``), and extracts from it only ``tests/test_store.py`` and
``tests/embed_test_utils.py`` into a git-ignored cache,
``tests/integration/langgraph_upstream/_upstream/``, with a ``VERSION`` file naming the
version they came from. ``tests/integration/langgraph_upstream/`` runs them against
``MemoryBusStore``.

Usage: ``python scripts/fetch_langgraph_tests.py [--force]``. Nothing is done when the
cache already holds both files for the installed version. Exit status 0 when the cache
is ready, 1 (with the reason on stderr) when it could not be filled; a failed run leaves
the cache as it was (files are written to a temporary name and renamed).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path

DIST = "langgraph-checkpoint"
FILES = ("test_store.py", "embed_test_utils.py")
CACHE = Path(__file__).resolve().parent.parent / "tests" / "integration" / "langgraph_upstream" / "_upstream"


class FetchError(Exception):
    """The tests could not be fetched; the message says why."""


def installed_version() -> str:
    try:
        return metadata.version(DIST)
    except metadata.PackageNotFoundError:
        raise FetchError(f"{DIST} is not installed (pip install -e '.[langgraph]')") from None


def cached_version(cache: Path = CACHE) -> str | None:
    """The version the cache holds both files of, or None."""
    version_file = cache / "VERSION"
    if not version_file.is_file() or not all((cache / name).is_file() for name in FILES):
        return None
    return version_file.read_text(encoding="utf-8").strip() or None


def _download(version: str, into: Path, timeout: float) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
               f"{DIST}=={version}", "-d", str(into)]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise FetchError(f"pip download of {DIST}=={version} took over {timeout:.0f} s") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise FetchError(f"pip download of {DIST}=={version} failed: {' | '.join(tail)}")
    archives = sorted(into.glob("*.tar.gz"))
    if len(archives) != 1:
        raise FetchError(f"expected one source archive of {DIST}=={version}, got {[a.name for a in archives]}")
    return archives[0]


def _extract(archive: Path, cache: Path) -> None:
    with tarfile.open(archive, "r:gz") as tar:
        members = {}
        for member in tar.getmembers():
            parts = Path(member.name).parts  # <dist>-<version>/tests/<file>
            if len(parts) == 3 and parts[1] == "tests" and parts[2] in FILES and member.isfile():
                members[parts[2]] = member
        missing = [name for name in FILES if name not in members]
        if missing:
            raise FetchError(f"{archive.name} has no tests/{', tests/'.join(missing)}")
        cache.mkdir(parents=True, exist_ok=True)
        for name, member in members.items():
            source = tar.extractfile(member)
            if source is None:
                raise FetchError(f"cannot read {member.name} in {archive.name}")
            temporary = cache / f".{name}.{os.getpid()}"
            temporary.write_bytes(source.read())
            temporary.replace(cache / name)


def fetch(cache: Path = CACHE, *, force: bool = False, timeout: float = 300.0) -> str:
    """Fill ``cache`` for the installed version and return that version; raises FetchError."""
    version = installed_version()
    if not force and cached_version(cache) == version:
        return version
    with tempfile.TemporaryDirectory(prefix="lgtests") as scratch:
        archive = _download(version, Path(scratch), timeout)
        _extract(archive, cache)
    temporary = cache / f".VERSION.{os.getpid()}"
    temporary.write_text(version + "\n", encoding="utf-8")
    temporary.replace(cache / "VERSION")
    return version


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="download even when the cache is up to date")
    args = parser.parse_args(argv)
    try:
        version = fetch(force=args.force)
    except FetchError as exc:
        print(f"fetch_langgraph_tests: {exc}", file=sys.stderr)
        return 1
    print(f"LangGraph store tests of {DIST} {version} in {CACHE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
