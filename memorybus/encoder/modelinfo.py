"""What a sentence-transformers model is, read from its files without loading it.

A model is named by ``Config.model_path``: a local directory saved by
sentence-transformers, or a model name (``"BAAI/bge-small-en-v1.5"``) found in
the local Hugging Face cache (nothing is downloaded: the bus runs with
``HF_HUB_OFFLINE=1``). This module answers, from the model's files alone (no
torch, a few milliseconds):

- :func:`model_dimension`: the length of the vectors it makes (the transformer's
  hidden size, times the pooling modes it concatenates, or the last ``Dense``
  layer's output size);
- :func:`model_fingerprint`: a short digest that differs between two models whose
  vectors are not comparable: it covers the module list, every module's
  configuration, and the weights files' names, sizes and their first and last
  MiB (a fine-tune of the same architecture changes those bytes). The same files
  at another path give the same fingerprint.

Errors: :class:`~memorybus.errors.EmbeddingError` naming the model when its files
cannot be found or read.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from typing import Any

from memorybus.errors import EmbeddingError

#: pooling modes of sentence-transformers' Pooling module; the output concatenates every mode that is on
_POOLING_MODES = ("pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
                  "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens",
                  "pooling_mode_lasttoken")  # fmt: skip
_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.onnx")
_SAMPLE = 1 << 20


@functools.lru_cache(maxsize=32)
def model_dir(model: str) -> str:
    """The local directory of ``model``: the path itself, or a name resolved in the local
    Hugging Face cache (also as ``sentence-transformers/<name>``). EmbeddingError if neither."""
    path = os.path.abspath(os.path.expanduser(model))
    if os.path.isdir(path):
        return path
    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # pragma: no cover - sentence-transformers depends on it
        raise EmbeddingError(f"model {model!r}: no such directory, and huggingface_hub is missing") from None
    names = [model] + ([f"sentence-transformers/{model}"] if "/" not in model else [])
    for name in names:
        try:
            return str(snapshot_download(name, local_files_only=True))
        except (OSError, ValueError):  # not in the local cache (LocalEntryNotFoundError), or not a repo name
            continue
    raise EmbeddingError(f"model {model!r}: no such directory, and not in the local Hugging Face cache "
                         "(nothing is downloaded: copy the model there or name its directory)")


def _json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            value = json.load(fh)
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"cannot read {path}: {exc}") from None
    if not isinstance(value, dict):
        raise EmbeddingError(f"{path} is not a JSON object")
    return value


def _modules(root: str) -> list[dict[str, Any]]:
    path = os.path.join(root, "modules.json")
    if not os.path.exists(path):  # a plain transformers checkpoint: s-t adds mean pooling
        return [{"path": "", "type": "sentence_transformers.models.Transformer"}]
    try:
        with open(path, encoding="utf-8") as fh:
            mods = json.load(fh)
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"cannot read {path}: {exc}") from None
    if not isinstance(mods, list) or not all(isinstance(m, dict) for m in mods):
        raise EmbeddingError(f"{path} is not a list of modules")
    return mods


@functools.lru_cache(maxsize=32)
def model_dimension(model: str) -> int:
    """The dimension of ``model``'s vectors, from its configuration files."""
    root = model_dir(model)
    dim = 0
    for mod in _modules(root):
        kind = str(mod.get("type", "")).rsplit(".", 1)[-1]
        where = os.path.join(root, str(mod.get("path", "")))
        if kind == "Transformer":
            cfg = _json(os.path.join(where, "config.json"))
            dim = int(cfg.get("hidden_size") or cfg.get("d_model") or cfg.get("dim") or 0)
        elif kind == "Pooling":
            cfg = _json(os.path.join(where, "config.json"))
            modes = sum(bool(cfg.get(m)) for m in _POOLING_MODES) or 1
            dim = int(cfg.get("word_embedding_dimension") or dim) * modes
        elif kind == "Dense":
            dim = int(_json(os.path.join(where, "config.json")).get("out_features") or 0)
        elif kind not in ("Normalize", "Dropout", "LayerNorm"):
            raise EmbeddingError(f"model {model!r}: cannot tell the dimension through a {kind} module "
                                 "(set Config.embedding_dim)")
    if dim < 1:
        raise EmbeddingError(f"model {model!r}: its files name no embedding dimension (set Config.embedding_dim)")
    return dim


@functools.lru_cache(maxsize=32)
def model_fingerprint(model: str) -> str:
    """A 16-hex-digit digest of ``model``'s modules, configurations and weights (see the module doc)."""
    root = model_dir(model)
    h = hashlib.blake2b(digest_size=8)
    for mod in _modules(root):
        h.update(json.dumps(mod, sort_keys=True).encode())
        where = os.path.join(root, str(mod.get("path", "")))
        for name in ("config.json", "sentence_bert_config.json"):
            path = os.path.join(where, name)
            if os.path.exists(path):
                h.update(json.dumps(_json(path), sort_keys=True).encode())
        for name in _WEIGHTS:
            path = os.path.join(where, name)
            if not os.path.exists(path):
                continue
            size = os.path.getsize(path)
            h.update(f"{name}:{size}".encode())
            try:
                with open(path, "rb") as fh:
                    h.update(fh.read(_SAMPLE))
                    fh.seek(max(0, size - _SAMPLE))
                    h.update(fh.read(_SAMPLE))
            except OSError as exc:
                raise EmbeddingError(f"cannot read {path}: {exc}") from None
    return h.hexdigest()
