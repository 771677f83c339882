"""LoCoMo or LongMemEval_s retrieval through memorybus, with BM25 / dense / RRF baselines in the same run.

Same as ``memorybus eval {locomo,longmemeval} --data PATH --out DIR``; see
:mod:`memorybus.evaluation.runner` for what is measured.

Example::

    python benchmarks/eval_retrieval.py locomo --data ../shared/data/locomo/locomo_dev.json --out results/
    python benchmarks/eval_retrieval.py longmemeval --data ../shared/data/longmemeval/longmemeval_s_dev48.json \
        --out results/
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import run_eval_cli  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_eval_cli(sys.argv[1:]))
