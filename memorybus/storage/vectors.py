"""Vector indexes: derived from the store; trusted when a shard starts only if the
checkpoint saved beside them says they hold exactly what the store holds, else
rebuilt (see :meth:`memorybus.shard.index.SearchIndex.open`).

:class:`EdgeVectorIndex` embeds Qdrant Edge (one index directory per shard,
on the node's disk). :class:`QdrantClientIndex` talks to a Qdrant server
through qdrant-client (or to qdrant-client's local mode, meant for tests).
Both keep the payload fields ``scope``, ``kind`` and ``status`` so recall can
filter where the vectors live.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from memorybus.errors import IndexUnavailable
from memorybus.memory.model import MemoryKind, MemoryNode, MemoryStatus


class NearestIndex(Protocol):
    """What recall asks of a vector index: nearest neighbours within scopes."""

    def search(
        self,
        vector: np.ndarray,
        limit: int,
        *,
        scope_keys: Sequence[str],
        kinds: Sequence[MemoryKind] | None = None,
        statuses: Sequence[MemoryStatus] | None = None,
    ) -> list[tuple[str, float]]:
        """Top ``limit`` ``(id, cosine)`` among points whose scope is in ``scope_keys``."""
        ...


@runtime_checkable
class VectorIndex(NearestIndex, Protocol):
    backend: str

    def upsert(self, nodes: Sequence[MemoryNode]) -> None:
        """Insert or replace the vectors of ``nodes`` (each must have an embedding)."""
        ...

    def set_status(self, ids: Sequence[str], status: MemoryStatus) -> None: ...

    def delete(self, ids: Sequence[str]) -> None: ...

    def count(self) -> int: ...

    def reset(self) -> None:
        """Drop every point (before a rebuild from the store)."""
        ...

    def checkpoint(self) -> str | None:
        """The digest saved with :meth:`save_checkpoint` (None: none, or an index that
        keeps none, such as a server shared by others)."""
        ...

    def save_checkpoint(self, digest: str) -> None:
        """Make every change so far durable, then record ``digest`` (what the index
        holds) beside it."""
        ...

    def drop_checkpoint(self) -> None:
        """Forget the saved digest (before the index changes again)."""
        ...

    def close(self) -> None: ...


def point_payload(node: MemoryNode) -> dict[str, Any]:
    """What a memory's point carries beside its vector: what searches filter on, and its
    version (a new vector always comes with a new version, so a point whose payload
    matches its record's holds that record's vector)."""
    return {
        "scope": node.scope.key,
        "kind": MemoryKind(node.kind).value,
        "status": MemoryStatus(node.status).value,
        "version": int(node.version),
    }


def _filter(
    m: Any, scope_keys: Sequence[str], kinds: Sequence[MemoryKind] | None, statuses: Sequence[MemoryStatus] | None
) -> Any:
    """The payload filter of a search; ``m`` is the module with Qdrant's filter types
    (``qdrant_edge`` and ``qdrant_client.models`` name them alike)."""
    must = [m.FieldCondition(key="scope", match=m.MatchAny(any=list(scope_keys)))]
    if kinds:
        must.append(m.FieldCondition(key="kind", match=m.MatchAny(any=[MemoryKind(k).value for k in kinds])))
    if statuses:
        must.append(m.FieldCondition(key="status", match=m.MatchAny(any=[MemoryStatus(s).value for s in statuses])))
    return m.Filter(must=must)


def _vector(node: MemoryNode) -> list[float]:
    if node.embedding is None:
        raise IndexUnavailable("vectors", f"node {node.id} has no embedding")
    return np.asarray(node.embedding, dtype=np.float32).tolist()


class _Qdrant(ABC):
    """What both Qdrant flavours share: the calls that change nothing on empty input, the
    query vector's form and the payload filter. Each flavour writes its four calls;
    ``_m`` is the module with its point and filter types."""

    _m: Any

    @abstractmethod
    def _upsert(self, nodes: Sequence[MemoryNode]) -> None: ...

    @abstractmethod
    def _set_payload(self, ids: list[str], payload: dict[str, Any]) -> None: ...

    @abstractmethod
    def _delete(self, ids: list[str]) -> None: ...

    @abstractmethod
    def _nearest(self, query: list[float], limit: int, flt: Any) -> list[tuple[str, float]]: ...

    def upsert(self, nodes: Sequence[MemoryNode]) -> None:
        if nodes:
            self._upsert(nodes)

    def set_status(self, ids: Sequence[str], status: MemoryStatus) -> None:
        if ids:
            self._set_payload(list(ids), {"status": status.value})

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            self._delete(list(ids))

    def search(self, vector: np.ndarray, limit: int, *, scope_keys: Sequence[str],
               kinds: Sequence[MemoryKind] | None = None,
               statuses: Sequence[MemoryStatus] | None = None) -> list[tuple[str, float]]:  # fmt: skip
        if not scope_keys or limit <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32).tolist()
        return self._nearest(query, limit, _filter(self._m, scope_keys, kinds, statuses))


class EdgeVectorIndex(_Qdrant):
    """A Qdrant Edge shard in ``path`` (cosine distance, keyword payload indexes)."""

    backend = "qdrant-edge"

    def __init__(self, path: str | os.PathLike[str], dim: int) -> None:
        import qdrant_edge as qe

        self._m = qe
        self.path = os.fspath(path)
        self.dim = dim
        self._shard = self._open()

    def _config(self) -> Any:
        qe = self._m
        return qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=self.dim, distance=qe.Distance.Cosine))

    def _open(self) -> Any:
        qe = self._m
        try:
            if os.path.isdir(self.path) and os.listdir(self.path):
                return qe.EdgeShard.load(self.path)
            shard = qe.EdgeShard.create(self.path, self._config())
            for name in ("scope", "kind", "status"):
                shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
            return shard
        except Exception as exc:  # qdrant_edge raises plain Exception for every failure
            raise IndexUnavailable(self.backend, f"{self.path}: {exc}") from None

    def _call(self, method: str, *args: Any) -> Any:
        """A call of the Qdrant Edge shard; its failures as IndexUnavailable."""
        try:
            return getattr(self._shard, method)(*args)
        except Exception as exc:  # qdrant_edge raises plain Exception for every failure
            raise IndexUnavailable(self.backend, str(exc)) from None

    def _upsert(self, nodes: Sequence[MemoryNode]) -> None:
        points = [self._m.Point(n.id, _vector(n), point_payload(n)) for n in nodes]
        self._call("update", self._m.UpdateOperation.upsert_points(points))

    def _set_payload(self, ids: list[str], payload: dict[str, Any]) -> None:
        self._call("update", self._m.UpdateOperation.set_payload(ids, payload))

    def _delete(self, ids: list[str]) -> None:
        self._call("update", self._m.UpdateOperation.delete_points(ids))

    def _nearest(self, query: list[float], limit: int, flt: Any) -> list[tuple[str, float]]:
        req = self._m.SearchRequest(query=self._m.Query.Nearest(query), limit=limit, filter=flt,
                                    with_payload=False, with_vector=False)  # fmt: skip
        return [(str(h.id), float(h.score)) for h in self._call("search", req)]

    def count(self) -> int:
        return int(self._call("count", self._m.CountRequest(exact=True)))

    def payloads(self, page: int = 5000) -> dict[str, dict[str, Any]]:
        """Every point's id and payload (no vectors), read page by page: what a start after
        a crash checks against the store instead of rebuilding the index."""
        out: dict[str, dict[str, Any]] = {}
        offset = None
        while True:
            req = self._m.ScrollRequest(offset=offset, limit=page, with_payload=True, with_vector=False)
            records, offset = self._call("scroll", req)
            for r in records:
                out[str(r.id)] = dict(r.payload or {})
            if offset is None or not records:
                return out

    def optimize(self) -> bool:
        """Build HNSW / merge segments now, in this process. It holds the interpreter
        lock until done (see :mod:`memorybus.storage.edge_build`): a serving shard
        builds a copy in another process instead (:meth:`copy_to`, :meth:`swap_in`)."""
        return bool(self._call("optimize"))

    def copy_to(self, dest: str) -> None:
        """Flush and copy the index directory to ``dest`` (no change may run meanwhile)."""
        self.flush()
        try:
            shutil.copytree(self.path, dest)
        except OSError as exc:
            shutil.rmtree(dest, ignore_errors=True)
            raise IndexUnavailable(self.backend, f"cannot copy {self.path}: {exc}") from None

    def swap_in(self, built: str) -> None:
        """Serve from the index directory ``built`` from now on: it replaces this one
        (the old directory is removed). Drop the checkpoint first: a crash in between
        leaves an index the next start does not trust, and rebuilds."""
        old = f"{os.path.normpath(self.path)}.old"
        shutil.rmtree(old, ignore_errors=True)
        self.close()
        try:
            os.replace(self.path, old)
            os.replace(built, self.path)
        except OSError as exc:
            raise IndexUnavailable(self.backend, f"cannot swap in {built}: {exc}") from None
        finally:
            self._shard = self._open()
        shutil.rmtree(old, ignore_errors=True)

    def flush(self) -> None:
        self._call("flush")

    def reset(self) -> None:
        self.drop_checkpoint()
        self.close()
        shutil.rmtree(self.path, ignore_errors=True)
        self._shard = self._open()

    # a checkpoint: a file beside the index directory (not inside: that is Qdrant's)
    def _checkpoint_path(self) -> str:
        return os.path.normpath(self.path) + ".checkpoint"

    def checkpoint(self) -> str | None:
        try:
            with open(self._checkpoint_path(), encoding="utf-8") as f:
                return f.read().strip() or None
        except OSError:
            return None

    def save_checkpoint(self, digest: str) -> None:
        self.flush()
        path = self._checkpoint_path()
        try:
            with open(path + ".tmp", "w", encoding="utf-8") as f:
                f.write(digest)
                f.flush()
                os.fsync(f.fileno())
            os.replace(path + ".tmp", path)
        except OSError as exc:
            raise IndexUnavailable(self.backend, f"cannot write its checkpoint: {exc}") from None

    def drop_checkpoint(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._checkpoint_path())

    def close(self) -> None:
        with contextlib.suppress(Exception):  # qdrant_edge raises plain Exception (closed twice)
            self._shard.close()


class QdrantClientIndex(_Qdrant):
    """A Qdrant collection through qdrant-client: a server URL, or local mode at a path."""

    backend = "qdrant-client"

    def __init__(self, collection: str, dim: int, *, url: str | None = None, path: str | None = None) -> None:
        from qdrant_client import QdrantClient, models
        from qdrant_client.http.exceptions import ApiException

        #: what qdrant-client raises: its API errors (a server's answers, a failed
        #: connection), and ValueError/RuntimeError/OSError from local mode's files
        self._errors = (ApiException, ValueError, RuntimeError, OSError)
        self._m = models
        self.collection = collection
        self.dim = dim
        self._local = not url
        try:
            self._client = QdrantClient(url=url) if url else QdrantClient(path=path or ":memory:")
            if not self._client.collection_exists(collection):
                self._create()
        except self._errors as exc:
            raise IndexUnavailable(self.backend, str(exc)) from None

    def _create(self) -> None:
        m = self._m
        self._client.create_collection(
            self.collection,
            vectors_config=m.VectorParams(size=self.dim, distance=m.Distance.COSINE),
        )
        if self._local:  # local mode has no payload indexes (it filters by scanning)
            return
        for name in ("scope", "kind", "status"):
            self._client.create_payload_index(self.collection, name, field_schema=m.PayloadSchemaType.KEYWORD)

    def _do(self, fn: Any, *args: Any, **kw: Any) -> Any:
        try:
            return fn(*args, **kw)
        except self._errors as exc:
            raise IndexUnavailable(self.backend, str(exc)) from None

    def _upsert(self, nodes: Sequence[MemoryNode]) -> None:
        points = [self._m.PointStruct(id=n.id, vector=_vector(n), payload=point_payload(n)) for n in nodes]
        self._do(self._client.upsert, self.collection, points=points, wait=True)

    def _set_payload(self, ids: list[str], payload: dict[str, Any]) -> None:
        self._do(self._client.set_payload, self.collection, payload=payload, points=ids, wait=True)

    def _delete(self, ids: list[str]) -> None:
        selector = self._m.PointIdsList(points=ids)
        self._do(self._client.delete, self.collection, points_selector=selector, wait=True)

    def _nearest(self, query: list[float], limit: int, flt: Any) -> list[tuple[str, float]]:
        res = self._do(self._client.query_points, self.collection, query=query, limit=limit,
                       query_filter=flt, with_payload=False)  # fmt: skip
        return [(str(p.id), float(p.score)) for p in res.points]

    def count(self) -> int:
        return int(self._do(self._client.count, self.collection, exact=True).count)

    def reset(self) -> None:
        self._do(self._client.delete_collection, self.collection)
        self._do(self._create)

    # a server may be shared and changed by others: it is never trusted, always rebuilt
    def checkpoint(self) -> str | None:
        return None

    def save_checkpoint(self, digest: str) -> None:
        return None

    def drop_checkpoint(self) -> None:
        return None

    def close(self) -> None:
        with contextlib.suppress(*self._errors):
            self._client.close()
