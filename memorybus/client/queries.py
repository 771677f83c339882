"""Recall, prompt context and embedding: the client's query operations.

Operation generators of :class:`~memorybus.client.MemoryBus` (see
:mod:`memorybus.client.operation`). A recall fans out, in parallel, to the shards
that own the scopes the caller may see, and merges their hits by score.

The client embeds queries (here or on the embedder actor) and the texts
:func:`embed` is given; both are asked for, never stored. What is embedded for a
memory that is stored is decided by the shard that stores it (see
:mod:`memorybus.shard.texts`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from memorybus.actors import runtime
from memorybus.actors.direct import Direct, DirectCall
from memorybus.actors.runtime import Op
from memorybus.client.channels import channels
from memorybus.client.operation import check_context, enums
from memorybus.errors import InvalidRequest
from memorybus.memory.model import MemoryKind, MemoryStatus
from memorybus.prompt import ContextBlock, ContextBuilder
from memorybus.retrieval import DEFAULT_STATUSES, RecallHit, merge_hits
from memorybus.retrieval.options import RecallOptions
from memorybus.retrieval.query import query_texts
from memorybus.retrieval.wire import RecallRequest, pack_request, unpack_hits, vector_bytes
from memorybus.scopes import Context
from memorybus.validation import check_text

if TYPE_CHECKING:
    from memorybus.client.handle import BusHandle


def recall(
    bus: BusHandle,
    query: str,
    context: Context,
    *,
    k: int | None = None,
    kinds: Sequence[MemoryKind | str] | None = None,
    statuses: Sequence[MemoryStatus | str] | None = None,
    include_archived: bool = False,
    include_deprecated: bool = False,
    as_of: float | None = None,
    start: float | None = None,
    end: float | None = None,
    min_relevance: float | None = None,
    options: RecallOptions | None = None,
) -> Op[list[RecallHit]]:
    """The ``k`` memories visible to ``context`` that best answer ``query``.

    Hybrid recall in every shard that owns a visible scope (dense + keyword,
    thread, speaker and time aware; see :mod:`memorybus.retrieval.ranking`),
    merged by score. Deprecated (superseded) and archived memories are
    excluded unless asked for; ``as_of`` (epoch seconds) recalls the state
    valid at that time; ``start``/``end`` keep memories whose event time
    (``valid_from``) is in ``[start, end)``. ``options``
    (:class:`~memorybus.retrieval.RecallOptions`) adds thread neighbours and
    relation-linked memories after the ``k`` hits, sets the reference time of
    relative expressions ("last week"), or makes the recall read-only
    (``touch=False``).

    Each hit's ``relevance`` (0..1) says how well it matches the query and
    its ``score`` (0..1) orders the hits (see
    :class:`~memorybus.retrieval.RecallHit`). Memories whose relevance is
    below ``min_relevance`` (default ``config.ranking.min_relevance``) are
    not returned: a query nothing answers returns ``[]``. A query that names someone or
    something is embedded twice, as asked and without its names
    (:func:`~memorybus.retrieval.query.query_texts`), so that a memory sharing only the
    name is not taken for an answer.
    """
    check_context(context)
    if not isinstance(query, str) or not query.strip():
        raise InvalidRequest("query", "must be a non-empty string")
    check_text("query", query, InvalidRequest)
    if len(query) > bus.config.max_content_chars:
        raise InvalidRequest("query", "is longer than max_content_chars")
    k = bus.config.default_recall_k if k is None else k
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
        raise InvalidRequest("k", "must be an int between 1 and 1000")
    kind_list = enums(MemoryKind, kinds, "kinds")
    status_list = enums(MemoryStatus, statuses, "statuses") or list(DEFAULT_STATUSES)
    if include_archived:
        status_list.append(MemoryStatus.ARCHIVED)
    if include_deprecated:
        status_list.append(MemoryStatus.DEPRECATED)
    if options is not None and not isinstance(options, RecallOptions):
        raise InvalidRequest("options", "must be a RecallOptions")
    opts = options or RecallOptions()
    opts = replace(
        opts,
        as_of=opts.as_of if as_of is None else as_of,
        start=opts.start if start is None else start,
        end=opts.end if end is None else end,
        min_relevance=opts.min_relevance if min_relevance is None else min_relevance,
    ).validate()
    handles = bus._shard_handles()
    owners = bus._owners_narrowest_first(context)
    encoder = bus._local_encoder() if bus._encodes_queries_here(runtime.blocking()) else None
    # embedded here, in the caller's process (no embedder round trip), the vector in the
    # packed request; or the vector's ref beside it: Ray starts the shards' searches once
    # the embedder has it, with the vector inlined in the call (no fetch back from here)
    request = RecallRequest(context, k, kind_list or None, status_list, query, opts)
    if encoder is not None:  # over the shards' direct channels where it can (through Ray when awaited)
        found = yield from channels(bus, owners)
        blob = pack_request(replace(request, vector=vector_bytes(encoder.encode(query_texts(query)))))
        groups = yield Direct([DirectCall(c, blob, partial(handles[i].recall.remote, blob))
                               for i, c in zip(owners, found, strict=True)])
    else:
        blob, vector = pack_request(request), bus._embedder().encode.remote(query_texts(query))
        groups = yield [handles[i].recall.remote(blob, vector) for i in owners]
    by_shard = sorted(zip(owners, groups, strict=True))  # merged in shard order, whatever order they were called in
    return merge_hits([unpack_hits(g) for _, g in by_shard], k)


def context_for(
    bus: BusHandle,
    query: str,
    context: Context,
    token_budget: int = 1000,
    *,
    k: int = 20,
    min_relevance: float | None = None,
    options: RecallOptions | None = None,
) -> Op[ContextBlock]:
    """A prompt-ready block for ``query``: core memory (memories tagged ``pinned`` or
    ``core``, most important first), then the recalled memories grouped by
    thread (or session) and dated. Recalled memories pass the same relevance
    floor as :meth:`recall` (``min_relevance``, default
    ``config.ranking.min_relevance``): a query nothing answers adds none. Its
    text never exceeds ``token_budget`` tokens of the embedding model's
    tokenizer; what did not fit is listed in ``dropped``. ``options`` as for
    :meth:`recall` (e.g. ``RecallOptions(neighbors=1)`` to bring the turns
    around each hit).
    """
    if isinstance(token_budget, bool) or not isinstance(token_budget, int) or token_budget < 1:
        raise InvalidRequest("token_budget", "must be a positive int")
    hits = yield from recall(bus, query, context, k=k, min_relevance=min_relevance, options=options)
    owners = bus._owners(context)
    handles = bus._shard_handles()
    pinned_groups = yield [handles[i].pinned.remote(context) for i in owners]
    builder = ContextBuilder([n for g in pinned_groups for n in g], hits, token_budget)
    texts = builder.texts_to_count()
    embedder = bus._embedder()
    (counted,) = yield [embedder.count_tokens.remote(texts)]
    counts = dict(zip(texts, counted, strict=True))
    block = builder.build(counts)
    while True:
        (total,) = yield [embedder.count_tokens.remote([block.text])]
        block.tokens = int(total[0]) if block.text else 0
        if block.tokens <= token_budget:
            return block
        block = builder.shrink(block, counts)


def embed(bus: BusHandle, texts: Sequence[str] | str) -> Op[np.ndarray]:
    """Embed texts with the bus's model (through the batching embedder): one row per
    text; a single string is one text (one row), never its characters. The vectors are
    the caller's: nothing is stored (a stored memory's vector is its shard's choice)."""
    items = [texts] if isinstance(texts, str) else texts
    if isinstance(items, bytes | dict) or not isinstance(items, Iterable):
        raise InvalidRequest("texts", "must be a string or a list of strings")
    items = list(items)
    for t in items:
        check_text("texts", t, InvalidRequest)
    (vectors,) = yield [bus._embedder().encode.remote(items)]
    return vectors
