#!/usr/bin/env bash
# Install everything the tests need, lint, type-check, and run the whole suite.
# Usage: ./scripts/test.sh [--quick] [pytest args]
#   --quick: leave out the tests marked slow (faults injected, clusters, whole simulations,
#            scripts with a Ray of their own): for the edit-test loop; CI runs everything
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=()
if [ "${1:-}" = "--quick" ]; then
  shift
  QUICK=(-m "not slow")
fi

if ! command -v redis-server >/dev/null 2>&1; then
  echo "== installing redis-server (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q && apt-get install -y -q redis-server
fi

if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing chromium (apt) for the inspector's browser test"
  (export DEBIAN_FRONTEND=noninteractive; apt-get install -y -q chromium) \
    || echo "   chromium not installed: the browser test will be skipped"
fi

echo "== installing python packages"
# torch first: the CPU build on this disk, instead of a multi-GB CUDA download
python -m pip install -q torch==2.13.0
python -m pip install -q -e '.[test,bench,langgraph,mcp,docs,ui,openai-agents]'

echo "== ruff"
ruff check memorybus tests benchmarks
echo "== mypy"
mypy

echo "== LangGraph's store tests (fetched from the package registry; the tests skip, saying why, without them)"
python scripts/fetch_langgraph_tests.py || echo "   not fetched: tests/integration/langgraph_upstream will try again, else skip"

echo "== CrewAI venv (CrewAI conflicts with the mcp extra: it gets a venv of its own, .venv-crewai/)"
python -m tests.integration.crewai_venv || echo "   not built: tests/integration/test_crewai_storage.py will try again, else skip"

echo "== pytest"
export HF_HUB_OFFLINE=1
# bytecode for every module the tests import: where PYTHONDONTWRITEBYTECODE is set (this
# image, and CI's), no process writes it, and each of the ~450 Ray workers a run starts
# would compile memorybus from source again (importing the shard and the client: 1.1-1.3 s
# of CPU without bytecode, 0.9 s with; docs/testing.md)
python -m compileall -q -j 2 memorybus tests benchmarks >/dev/null
# Three workers (pytest-xdist; each takes a whole test file at a time, or a whole group of
# the files on the shared Ray, tests/shared_ray.py), on 2 cores too: the third fills the
# time the others spend waiting on Ray, servers and subprocesses (555 s against 608 s for
# two, the same code one run after the other: docs/testing.md). A test that fails beside
# the other workers' load runs again alone, and must pass there; the log shows both runs.
# MEMORYBUS_TEST_WORKERS=<n> sets the count; 0 runs the suite in one process.
WORKERS="${MEMORYBUS_TEST_WORKERS:-3}"
if [ "$WORKERS" -le 1 ]; then
  exec python -m pytest ${QUICK[@]+"${QUICK[@]}"} "$@"
fi
if python -m pytest -n "$WORKERS" --dist loadgroup ${QUICK[@]+"${QUICK[@]}"} "$@"; then
  exit 0
fi
echo "== pytest: running the tests that failed under $WORKERS workers again, in one worker"
# one worker, same grouping: the failed tests' ids carry their group (test.py::name@group)
python -m pytest -n 1 --dist loadgroup --last-failed --last-failed-no-failures none ${QUICK[@]+"${QUICK[@]}"} "$@"
