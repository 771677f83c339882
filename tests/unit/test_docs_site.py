"""The documentation: a short README that points into docs/, and an MkDocs site that
builds with --strict (broken links and anchors, pages missing from the nav, API
reference entries that do not resolve all fail the build)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_is_short_and_links_only_to_pages_that_exist():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    links = re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)(?:#[\w-]+)?\)", text)
    assert links, "the README points into docs/"
    assert [link for link in links if not (ROOT / link).exists()] == []


def _nav_pages(nav) -> set[str]:
    found: set[str] = set()
    for entry in nav:
        for value in (entry.values() if isinstance(entry, dict) else [entry]):
            found |= _nav_pages(value) if isinstance(value, list) else {value}
    return found


def test_every_docs_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert _nav_pages(config["nav"]) == pages


def test_the_site_builds_strict(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          check=False, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    reference = (tmp_path / "site" / "reference" / "index.html").read_text()
    assert "remember_many" in reference and "VersionConflict" in reference  # docstrings were rendered
