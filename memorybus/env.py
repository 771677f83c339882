"""The process environment the bus wants, set in one place before Ray or the model load.

Entry points (the command line, the MCP server, the simulation, the benchmarks) call
:func:`prepare` before anything imports Ray; the actors that load the model get
:data:`MODEL_ENV` as their Ray runtime environment. Only defaults are set: a value
the caller's environment already has is kept.
"""

from __future__ import annotations

import os

#: the model is shipped with the package: never reach the Hugging Face hub; no
#: tokenizer thread pools fighting the embedder's
MODEL_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

#: no usage reports from a Ray this process starts
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}

#: for a process that runs a model beside the bus's actors on the same cores (``memorybus
#: eval``, the benchmarks): idle threads sleep instead of spinning, or each side slows the
#: other down. OpenMP's (torch) sleep at once; OpenBLAS's (numpy) after a few microseconds
#: instead of ~0.1 s after every large product (measured on a 2-core machine: 0.105 s of
#: CPU in the 0.2 s after one 10,000 x 384 product by default, 0.005 s with the timeout;
#: the product itself 0.20 -> 0.23 ms). Read when torch and numpy load: set them before.
BESIDE_MODEL_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "10"}


def prepare(**extra: str) -> None:
    """Set :data:`RAY_ENV`, :data:`MODEL_ENV` and ``extra`` as defaults of this process's
    environment (a variable already set keeps its value). Call it before Ray is imported."""
    for name, value in {**RAY_ENV, **MODEL_ENV, **extra}.items():
        os.environ.setdefault(name, value)
