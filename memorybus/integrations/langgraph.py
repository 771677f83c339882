"""A LangGraph ``BaseStore`` over the bus: ``pip install memorybus[langgraph]``.

``MemoryBusStore(bus, context, template=..., level=...)`` stores each LangGraph item as
one memory of the bus, so a graph's long-term memory is shared with every other agent
of the bus, ranked by its recall, and subject to its visibility rule:

- **Where an item lives.** A namespace names its scope through ``template``: position
  ``i`` of the template says which scope field label ``i`` of a namespace sets
  (``"org"``, ``"user"``, ``"agent"``, ``"session"``) or ``"*"`` (a label that is only a
  path). Fields the template does not set come from the bound context, widened to
  ``level`` (default: ``"user"`` when the context has a user, else ``"org"``). With
  ``template=("*", "user")`` and a context of user ``alice``, ``("memories", "alice")``
  is alice's user scope; ``("memories", "bob")`` is bob's, which alice's context may not
  see: a put there raises :class:`~memorybus.ScopeViolation` (the bus refuses it in the
  shard), a get raises the same, and searches and listings never return it.
- **Identity of an item.** The whole namespace and the key form the memory's fact key
  (``lgstore/<label>/.../<label>//<key>``), one current memory per key and scope; a put
  of an existing item updates that memory in place with compare-and-set.
- **Search.** With a query: the bus's recall restricted to the namespace prefix (key
  prefix at label boundaries), with no relevance floor (every item ranks, the least
  related last), then ``filter``; without one: the items under the prefix
  in creation order, then ``filter``. Filters: equality, nested dicts, dotted paths, and
  ``$eq $ne $gt $gte $lt $lte``.
- **Indexing.** The memory's text is the text at the indexed paths (``index=[paths]``
  of the put, else ``index={"fields": [...]}`` of the store, else the whole value as
  JSON), joined; ``put(..., index=False)`` runs no model (a fixed placeholder text).
  Without an ``embed`` in the store's ``index``, a query search is the bus's recall (one
  vector per item) and never ranks an unindexed item. With ``index={"dims", "embed",
  "fields"}`` it keeps LangGraph's contract (:mod:`lgvectors`): one vector per path text
  from that embedder, kept with the item; score = the best cosine over them; unindexed
  items last with score None; a scan of the prefix. ``index_config`` says which.
- **TTL** (``supports_ttl``): minutes, as in LangGraph; the memory's ``expires_at``.
  Expired items are never returned and the bus's decay sweep deletes them; reads
  refresh the expiry (``ttl_config["refresh_on_read"]``, default true).

- **Which memories are items.** The store reads only memories it wrote for the
  namespace and scope they are in: the memory key is exactly the item's key, its
  ``structured["langgraph"]`` carries the store's mark (:data:`lgmatch.MARK`) and the
  scope key it was written for, which must be the memory's own scope (a copy of an item
  in another scope, e.g. broadcast to the org, is not an item there); and every scope
  field the template takes from the namespace must be the memory's (an org-level
  memory is never an item of ``("memories", "alice")`` under ``template=("*", "user")``,
  whoever wrote it). A namespace that names no scope field is shared: items written
  for it at a wider level the context sees (e.g. an org-level store's) are read too.
  Anything else under the ``lgstore/`` keys — a plain ``remember`` with such a key, a
  malformed or foreign item — is skipped, never raised, and counted in
  :attr:`MemoryBusStore.skipped` (``"malformed"``: not an item the store wrote;
  ``"foreign"``: an item of another scope).

Items are semantic memories with ``decay_rate=0`` (never archived by decay). A batch
runs its reads first, against the state before the batch, then its writes, one per
``(namespace, key)`` (the last wins; ``value=None`` deletes).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
)

import memorybus as mb
from memorybus.integrations import lgmatch, lgvectors
from memorybus.integrations.lgdriver import Driver, Steps
from memorybus.integrations.lgdriver import call as _call

_FIELDS = ("org", "user", "agent", "session")
_UNINDEXED = "(unindexed LangGraph store item)"
_UNINDEXED_TAG = "lgstore:unindexed"
_MAX_CAS = 8
_PAGE = 500
_EMBEDDER_CALLS = ("embed_documents", "embed_query")  # the store's own embedder, not the bus

def _check_labels(namespace: Any, *, allow_empty: bool) -> tuple[str, ...]:
    if not isinstance(namespace, tuple | list):
        raise InvalidNamespaceError(f"Namespace must be a tuple of strings, got {type(namespace).__name__}")
    if not namespace and not allow_empty:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise InvalidNamespaceError(f"Namespace labels must be non-empty strings, got {label!r} in {namespace}")
        if "." in label or "\x00" in label:
            raise InvalidNamespaceError(f"Namespace label {label!r} in {namespace} contains '.' or NUL")
    return tuple(namespace)


class MemoryBusStore(BaseStore):
    """LangGraph's ``BaseStore`` on a :class:`memorybus.MemoryBus`, bound to one context."""

    supports_ttl: bool = True

    def __init__(
        self,
        bus: mb.MemoryBus,
        context: mb.Context,
        *,
        template: Sequence[str] = (),
        level: mb.Level | str | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        if not isinstance(context, mb.Context):
            raise mb.InvalidRequest("context", "must be a memorybus.Context")
        template = tuple(template)
        for name in template:
            if name != "*" and name not in _FIELDS:
                raise mb.InvalidRequest("template", f"entries are scope fields {_FIELDS} or '*', got {name!r}")
        level = mb.Level(level) if level is not None else (mb.Level.USER if context.user else mb.Level.ORG)
        self.bus = bus
        self.context = context
        self.template = template
        self.base = context.resolve_scope(level)
        fields = list((index or {}).get("fields") or ["$"])
        self.index_fields = fields
        #: the embedder of ``index["embed"]`` (then queries are scored by path vectors,
        #: see :mod:`lgvectors`); None: the bus's own model and recall rank them
        self.embeddings: Embeddings | None = None
        if index and index.get("embed") is not None:
            self.embeddings = ensure_embeddings(index["embed"])
            self.index_config: IndexConfig = {**index, "fields": fields}
        else:
            self.index_config = {"dims": bus.config.vector_dim(), "fields": fields}
        self.ttl_config: TTLConfig = ttl or {"refresh_on_read": True}
        #: memories under the store's keys that reads skipped: ``"malformed"`` (not an
        #: item the store wrote) and ``"foreign"`` (an item of another scope)
        self.skipped: Counter[str] = Counter()

    # ------------------------------------------------------------------ mapping
    def scope_for(self, namespace: Sequence[str]) -> mb.Scope:
        """The scope the items of ``namespace`` live in (see the module docstring)."""
        fields = dict(zip(_FIELDS, self.base.as_tuple(), strict=True))
        for position, name in enumerate(self.template):
            if name != "*" and position < len(namespace):
                fields[name] = namespace[position]
        return mb.Scope(**fields)

    def _text(self, value: dict[str, Any], index: Any) -> str | None:
        if index is False:
            return None
        texts: list[str] = []
        for path in index if isinstance(index, list) else self.index_fields:
            whole = path == "$" and json.dumps(value, ensure_ascii=False, sort_keys=True)
            texts += [whole] if whole else lgvectors.path_texts(value, [path])
        return "\n".join(texts) or None

    def _vectors(self, value: dict[str, Any], index: Any) -> Steps:
        """``{"vectors", "dims"}`` of an item's path texts, embedded by the store's own
        embedder (empty without one, with ``index=False``, or with no text to embed)."""
        if self.embeddings is None or index is False:
            return {}
        texts = lgvectors.path_texts(value, index if isinstance(index, list) else self.index_fields)
        if not texts:
            return {}
        vectors = yield _call("embed_documents", texts)
        if len(vectors) != len(texts):
            raise mb.InvalidRequest("index", f"the embedder returned {len(vectors)} vectors for {len(texts)} texts")
        blob, dims = lgvectors.pack(vectors, self.index_config.get("dims"))
        return {"vectors": blob, "dims": dims}

    def _owns(self, scope: mb.Scope, item: lgmatch.ParsedItem) -> bool:
        """Whether an item in ``scope`` is one this store reads (see the module docstring)."""
        if item.scope != scope.key:
            return False
        named = dict(zip(_FIELDS, scope.as_tuple(), strict=True))
        return all(name == "*" or position >= len(item.namespace) or named[name] == item.namespace[position]
                   for position, name in enumerate(self.template))  # fmt: skip

    def _parsed(self, node: mb.MemoryNode) -> lgmatch.ParsedItem | None:
        """The item ``node`` holds for this store, or None (counted in ``skipped``)."""
        item = lgmatch.parse_item(node.key, node.structured)
        if isinstance(item, str):
            self.skipped["malformed"] += 1
            return None
        if not self._owns(node.scope, item):
            self.skipped["foreign"] += 1
            return None
        return item

    def _item_of(self, node: mb.MemoryNode, score: float | None = None, *, search: bool = False) -> Item | None:
        item = self._parsed(node)
        if item is None:
            return None
        created = datetime.fromtimestamp(node.created_at, tz=UTC)
        updated = datetime.fromtimestamp(item.updated_at, tz=UTC)
        if search:
            return SearchItem(item.namespace, item.key, item.value, created, updated, score)
        return Item(value=item.value, key=item.key, namespace=item.namespace, created_at=created, updated_at=updated)

    # ---------------------------------------------------------------- the ops
    def _steps(self, ops: Iterable[Op]) -> Steps:
        ops = list(ops)
        for op in ops:
            if isinstance(op, GetOp | PutOp):
                _check_labels(op.namespace, allow_empty=False)
            elif isinstance(op, SearchOp):
                _check_labels(op.namespace_prefix, allow_empty=True)
                lgmatch.check_filter(op.filter)
            elif isinstance(op, ListNamespacesOp):
                for cond in op.match_conditions or ():
                    _check_labels(cond.path, allow_empty=True)
            else:
                raise mb.InvalidRequest("op", f"unknown operation {type(op).__name__}")
        results: list[Result] = [None] * len(ops)
        writes: dict[tuple[tuple[str, ...], str], PutOp] = {}
        refresh: list[mb.MemoryNode] = []
        for i, op in enumerate(ops):  # reads first: they see the state before this batch
            if isinstance(op, GetOp):
                node = yield from self._get(op)
                results[i] = None if node is None else self._item_of(node)
                if node is not None and op.refresh_ttl:
                    refresh.append(node)
            elif isinstance(op, SearchOp):
                found = yield from self._search(op)
                results[i] = [item for _, item in found]
                refresh += [n for n, _ in found] if op.refresh_ttl else []
            elif isinstance(op, ListNamespacesOp):
                results[i] = yield from self._namespaces(op)
            elif isinstance(op, PutOp):
                writes.pop((tuple(op.namespace), str(op.key)), None)
                writes[(tuple(op.namespace), str(op.key))] = op
        for node in {n.id: n for n in refresh}.values():
            yield from self._refresh(node)
        for op in writes.values():
            yield from self._put(op)
        return results

    def _get(self, op: GetOp) -> Steps:
        scope = self.scope_for(op.namespace)
        node = yield _call("current_fact", lgmatch.item_key(op.namespace, str(op.key)), self.context, scope=scope)
        if node is None or self._item_of(node) is None:
            return None
        if node.expires_at is not None and node.expires_at <= time.time():
            return None
        return node

    def _refresh(self, node: mb.MemoryNode) -> Steps:
        item = lgmatch.parse_item(node.key, node.structured)  # an item read by this batch
        minutes = None if isinstance(item, str) else item.ttl
        if minutes is None:
            return
        # written or deleted meanwhile: that write set its own expiry
        with contextlib.suppress(mb.VersionConflict, mb.MemoryNotFound):
            yield _call("update", node.id, self.context, expected_version=node.version,
                        expires_at=time.time() + float(minutes) * 60.0)  # fmt: skip

    def _search(self, op: SearchOp) -> Steps:
        prefix = lgmatch.prefix_key(op.namespace_prefix)
        want = max(0, op.offset) + max(0, op.limit)
        found: list[tuple[mb.MemoryNode, Item]] = []
        if want == 0:
            return found
        if op.query and op.query.strip() and self.embeddings is not None:
            found = yield from self._search_by_path_vectors(op, prefix)
        elif op.query and op.query.strip():
            k = min(1000, want * (8 if op.filter else 1))
            # a store search ranks every item under the prefix (LangGraph's contract), so no
            # relevance floor: the least related items come last, they are not dropped
            options = mb.RecallOptions(key_prefix=prefix, touch=False, min_relevance=0.0)
            hits = yield _call("recall", op.query, self.context, k=k, options=options)
            for hit in hits:
                item = self._item_of(hit.node, hit.score, search=True)
                if item is not None and _UNINDEXED_TAG not in hit.node.tags and lgmatch.passes(item.value, op.filter):
                    found.append((hit.node, item))
        else:
            found = yield from self._listing(prefix, op.filter, want)
        return found[max(0, op.offset) : want]

    def _listing(self, prefix: str, flt: dict[str, Any] | None, want: int | None) -> Steps:
        """The items under ``prefix`` that pass ``flt``, in creation order (``want`` of
        them at least when there are that many; None: all)."""
        found: list[tuple[mb.MemoryNode, Item]] = []
        cursor: str | None = None
        while want is None or len(found) < want:
            page = yield _call("list_memories", self.context, key_prefix=prefix, limit=_PAGE, cursor=cursor)
            for node in page.memories:
                item = self._item_of(node, search=True)
                if item is not None and lgmatch.passes(item.value, flt):
                    found.append((node, item))
            if page.cursor is None:
                break
            cursor = page.cursor
        return found

    def _search_by_path_vectors(self, op: SearchOp, prefix: str) -> Steps:
        """A query search with the store's own embedder: every item under the prefix
        that passes the filter, scored by its best path vector (:mod:`lgvectors`), the
        unscored last with score None. A scan of the prefix, as LangGraph's in-memory store."""
        found = yield from self._listing(prefix, op.filter, None)
        if not found:
            return found
        query = lgvectors.query_vector((yield _call("embed_query", op.query)))
        scored = [(lgvectors.item_score(query, lgmatch.parse_item(n.key, n.structured)), (n, i)) for n, i in found]
        for score, (_, item) in scored:
            item.score = score  # a SearchItem (made by _listing)
        return [entry for _, entry in lgvectors.rank(scored)]

    def _namespaces(self, op: ListNamespacesOp) -> Steps:
        seen: set[tuple[str, ...]] = set()
        cursor: str | None = None
        while True:
            page = yield _call("list_memories", self.context, key_prefix=lgmatch.KEY_ROOT + "/", limit=_PAGE,
                               cursor=cursor)  # fmt: skip
            for node in page.memories:
                item = self._item_of(node)
                if item is not None:
                    seen.add(item.namespace)
            if page.cursor is None:
                break
            cursor = page.cursor
        conds = op.match_conditions or ()
        chosen = [ns for ns in seen if all(lgmatch.matches(c.path, ns, c.match_type) for c in conds)]
        if op.max_depth is not None:
            chosen = list({ns[: op.max_depth] for ns in chosen})
        return sorted(chosen)[op.offset : op.offset + op.limit]

    def _put(self, op: PutOp) -> Steps:
        namespace, key = tuple(op.namespace), str(op.key)
        scope = self.scope_for(namespace)
        fact_key = lgmatch.item_key(namespace, key)
        vectors: dict[str, Any] = {}
        text: str | None = None
        if op.value is not None:  # embedded once, before (never inside) the compare-and-set loop
            text = self._text(dict(op.value), op.index)
            vectors = yield from self._vectors(dict(op.value), op.index)
        last: mb.VersionConflict | None = None
        for _ in range(_MAX_CAS):
            current = yield _call("current_fact", fact_key, self.context, scope=scope)
            if op.value is None:
                if current is None:
                    return
                try:
                    yield _call("forget", current.id, self.context, expected_version=current.version)
                    return
                except mb.MemoryNotFound:
                    return
                except mb.VersionConflict as exc:
                    last = exc
                    continue
            value = dict(op.value)
            now = time.time()
            meta = {"store": lgmatch.MARK, "scope": scope.key, "namespace": list(namespace), "key": key,
                    "value": value, "updated_at": now, "ttl": op.ttl, **vectors}
            fields: dict[str, Any] = {
                "structured": {"langgraph": meta},
                "tags": () if text is not None else (_UNINDEXED_TAG,),
            }
            seconds = None if op.ttl is None else float(op.ttl) * 60.0
            if current is None:
                if seconds is not None:
                    fields["ttl"] = seconds
                yield _call("assert_fact", fact_key, text or _UNINDEXED, self.context, scope=scope,
                            strategy="recency", kind="semantic", decay_rate=0.0, **fields)  # fmt: skip
                return
            try:
                yield _call("update", current.id, self.context, expected_version=current.version,
                            content=text or _UNINDEXED, expires_at=None if seconds is None else now + seconds,
                            **fields)  # fmt: skip
                return
            except mb.VersionConflict as exc:
                last = exc
        if last is None:  # no attempt was made (_MAX_CAS < 1)
            raise mb.VersionConflict(fact_key, None, None)
        raise last

    # ---------------------------------------------------------------- drivers
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        run = Driver(self._steps(ops))
        for name, args, kwargs in run:
            run.settle(getattr(self.embeddings, name) if name in _EMBEDDER_CALLS else getattr(self.bus, name),
                       args, kwargs)  # fmt: skip
        return run.results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        run = Driver(self._steps(ops))
        for name, args, kwargs in run:
            local = name in _EMBEDDER_CALLS
            method = getattr(self.embeddings, "a" + name) if local else getattr(self.bus, name + "_async")
            await run.settle_async(method, args, kwargs)
        return run.results
