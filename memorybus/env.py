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


def prepare(**extra: str) -> None:
    """Set :data:`RAY_ENV`, :data:`MODEL_ENV` and ``extra`` as defaults of this process's
    environment (a variable already set keeps its value). Call it before Ray is imported."""
    for name, value in {**RAY_ENV, **MODEL_ENV, **extra}.items():
        os.environ.setdefault(name, value)
