#!/usr/bin/env bash
# Smoke test on another Python: a fresh venv, the package installed from this checkout
# (not editable), and a small run of the main job (`memorybus simulate`).
# Usage: ./scripts/smoke_other_python.sh [VERSION] [VENV_DIR]    (default 3.12, a temp dir)
# The interpreter comes from uv (`uv python find`), else pyenv (`pyenv prefix`), else
# `pythonVERSION` on PATH. Exit status: the simulate run's (non-zero when anything fails).
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-3.12}"
venv="${2:-$(mktemp -d)/venv-$version}"

python=""
if command -v uv >/dev/null 2>&1; then
  python="$(uv python find "$version" 2>/dev/null || true)"
fi
if [[ -z "$python" ]] && command -v pyenv >/dev/null 2>&1; then
  prefix="$(pyenv prefix "$version" 2>/dev/null | head -n1 || true)"
  [[ -n "$prefix" && -x "$prefix/bin/python$version" ]] && python="$prefix/bin/python$version"
fi
if [[ -z "$python" ]] && command -v "python$version" >/dev/null 2>&1; then
  python="$(command -v "python$version")"
fi
if [[ -z "$python" ]]; then
  echo "no Python $version found (tried uv, pyenv, python$version on PATH)" >&2
  exit 2
fi

echo "== $("$python" --version) at $python; venv $venv"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q)
start=$(date +%s)
# torch first, the CPU build when PyTorch's CPU index answers (as scripts/test.sh installs
# it); else PyPI's Linux wheel, the CUDA build (GBs of CUDA libraries, runs on a CPU too)
"${pip[@]}" --upgrade pip
"${pip[@]}" --timeout 15 --retries 0 --index-url=https://download.pytorch.org/whl/cpu torch==2.13.0 \
  || "${pip[@]}" torch==2.13.0
"${pip[@]}" .
echo "== installed in $(( $(date +%s) - start )) s"

out="$(mktemp -d)"
export HF_HUB_OFFLINE=1 RAY_USAGE_STATS_ENABLED=0
cd "$out"  # run from outside the checkout: the installed package, not the source tree
"$venv/bin/memorybus" simulate --agents 4 --users 2 --orgs 1 --days 2 --seed 7 --out "$out/sim" --no-progress
test -s "$out/sim/simulation.json"
echo "== simulate on Python $version: ok ($out/sim/simulation.json)"
