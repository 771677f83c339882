"""LongMemEval_s session-level retrieval through memorybus, with BM25 / dense / RRF baselines.

Same as ``memorybus eval longmemeval --data PATH --out DIR``; see
:mod:`memorybus.evaluation.runner` for what is measured.

Example::

    python benchmarks/eval_longmemeval.py --data ../shared/data/longmemeval/longmemeval_s_dev48.json --out results/
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import run_eval_cli  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_eval_cli("longmemeval", sys.argv[1:]))
