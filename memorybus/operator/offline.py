"""Reading an embedded data directory straight from its files, when no bus holds it.

``memorybus ls|show|stats|export|top`` read through :class:`DirectReader` when no
running bus holds the data directory (no live holder of any ``LOCK`` in it, see
:mod:`memorybus.storage.dirlock`): no Ray, no actors, no model, in about a second
for 10,000 memories, where starting a bus takes tens of seconds. What it guarantees:

- **The operator boundary holds.** Reading a data directory directly needs its
  operator key: ``auth.sqlite`` in the data directory (mode 0600, readable only by
  its owner) must be readable by the caller and hold the operator's key; otherwise
  :class:`~memorybus.errors.NotAuthorized` and nothing else is opened. Whoever can
  read the key ring is the operator (see :mod:`memorybus.auth.keyring`).
- **Read-only.** The records files and the key ring are opened with SQLite's
  ``mode=ro``: no row, schema or checkpoint is written (SQLite may create the
  ``-wal``/``-shm`` side files it needs to read a WAL database). The one write is a
  full export's backup mark (``memorybus.operator.monitoring``), as the bus's own export makes.
- **The same answers as the bus.** Each shard's views are the shard's own functions
  (:mod:`memorybus.views`) over the same records, merged as the client merges them.
- **A snapshot.** The records are read once, when the reader opens; a bus that
  starts meanwhile is not seen (the bus refuses nothing: the reader takes no lock).
- **Light.** Importing this module imports neither Ray, nor torch, nor
  sentence-transformers (tests/unit/test_offline_imports.py checks it).
"""

from __future__ import annotations

import glob
import os
import re
import time
from typing import Any

from memorybus import views
from memorybus.errors import InvalidRequest, MemoryNotFound, NotAuthorized, StoreMismatch, StoreUnavailable
from memorybus.memory.model import RELATION_FIELDS, MemoryNode, evolve
from memorybus.retrieval.hits import DEFAULT_STATUSES
from memorybus.scopes import Scope
from memorybus.storage import dirlock
from memorybus.storage.sqlite import SqliteStore
from memorybus.views import Inspection, MemoryPage

AUTH_FILE = "auth.sqlite"
_PAGE = 500  # memories per export page, as the bus's export
_EVENTS_PAGE = 5000


def held(data_dir: str) -> list[tuple[str, str]]:
    """``(directory, holder)`` of every directory of ``data_dir`` a live process
    holds the lock of (a running bus's shard and hub actors); [] when none does."""
    root = os.path.abspath(data_dir)
    dirs = [root, *sorted(glob.glob(os.path.join(root, "shard-*"))), *sorted(glob.glob(os.path.join(root, "bus-*")))]
    return [(d, dirlock.holder(d)) for d in dirs if dirlock.is_locked(d)]


def holder_namespace(holder: str) -> str | None:
    """The bus namespace a lock's holder note names (``namespace=...``), if any."""
    found = re.search(r"namespace=(\S+)", holder)
    return found.group(1) if found else None


def has_key_ring(data_dir: str) -> bool:
    return os.path.exists(os.path.join(data_dir, AUTH_FILE))


def _shard_paths(data_dir: str) -> list[tuple[str, str]]:
    """``(shard name, records file)`` of every shard in ``data_dir``, in shard order."""
    found = []
    for path in glob.glob(os.path.join(data_dir, "shard-*", "records.sqlite")):
        name = os.path.basename(os.path.dirname(path))
        index = name.rsplit("-", 1)[1]
        if index.isdigit():
            found.append((int(index), name, path))
    return [(name, path) for _, name, path in sorted(found)]


def operator_secret(data_dir: str) -> bytes:
    """The operator's current secret from ``data_dir``'s key ring, read-only;
    NotAuthorized when the ring cannot be read or holds no operator key."""
    from memorybus.auth.credential import OPERATOR_ORG
    from memorybus.auth.keyring import KeyRing
    from memorybus.storage.kv import SqliteKV

    path = os.path.join(data_dir, AUTH_FILE)
    action = "read the data directory directly"
    if not os.access(path, os.R_OK):
        raise NotAuthorized(action, f"it needs the operator key: {path} is missing or not readable by this user")
    try:
        kv = SqliteKV(path, read_only=True)
    except StoreUnavailable as exc:
        raise NotAuthorized(action, f"it needs the operator key: {path} cannot be read ({exc})") from None
    try:
        key = KeyRing.load(kv).current(OPERATOR_ORG)
    finally:
        kv.close()
    if key is None:
        raise NotAuthorized(action, f"it needs the operator key: {path} holds none")
    return key.secret


class DirectReader:
    """The operator's read-only view of the data directory ``data_dir`` (see the module
    docstring), with the calls of :class:`~memorybus.client.MemoryBus` the operator
    commands use. InvalidRequest when the directory holds no shard store;
    NotAuthorized without the operator key; StoreUnavailable for an unreadable store."""

    def __init__(self, data_dir: str | os.PathLike[str], namespace: str | None = None, dim: int = 384) -> None:
        """``namespace``: the bus's, as its stores record it (default: whatever they
        record; another one is refused with StoreMismatch, as a bus would refuse it)."""
        self.data_dir = os.path.abspath(os.fspath(data_dir))
        self.namespace = namespace or ""
        self.dim = dim
        if not os.path.isdir(self.data_dir):
            raise InvalidRequest("--data-dir", f"{self.data_dir} does not exist (no bus stored there)")
        self._secret = operator_secret(self.data_dir)  # the boundary first: nothing else is opened without it
        self.shards: list[tuple[str, SqliteStore, dict[str, MemoryNode]]] = []
        self.reload()

    def reload(self) -> None:
        """Read the records again (``memorybus top`` refreshes this way)."""
        self.close()
        paths = _shard_paths(self.data_dir)
        if not paths:
            raise InvalidRequest("--data-dir", f"no shard-*/records.sqlite in {self.data_dir}")
        try:
            for name, path in paths:
                store = SqliteStore(path, read_only=True)
                nodes: dict[str, MemoryNode] = {}
                self.shards.append((name, store, nodes))
                self._check_namespace(name, store)
                for node in store.iter_all():
                    if node.embedding is not None:
                        self.dim = len(node.embedding)
                    nodes[node.id] = evolve(node, embedding=None)
        except BaseException:
            self.close()
            raise
        self.namespace = self.namespace or "memorybus"  # stores older than their namespace record

    def _check_namespace(self, shard: str, store: SqliteStore) -> None:
        recorded = store.meta().get("namespace")
        if recorded is None:
            return
        if not self.namespace:
            self.namespace = recorded
        elif recorded != self.namespace:
            raise StoreMismatch(shard, f"its store belongs to bus {recorded!r}, not {self.namespace!r}")

    # ------------------------------------------------------------------ life
    def close(self) -> None:
        for _, store, _ in self.shards:
            store.close()
        self.shards = []

    def __enter__(self) -> DirectReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reads
    def list_memories(self, context: None = None, *, scope: Scope | None = None, **listing: Any) -> MemoryPage:
        """:meth:`MemoryBus.list_memories` in the operator's view (``context=None``), with
        the same keyword filters (:class:`memorybus.views.Listing`)."""
        if context is not None:
            raise InvalidRequest("context", "reading a data directory directly is the operator's view: pass None")
        if scope is not None and not isinstance(scope, Scope):
            raise InvalidRequest("scope", "without a context, give a Scope")
        f = views.Listing(**listing).filters()
        limit = f["limit"]
        kind_set = frozenset(f["kinds"]) if f["kinds"] else None
        status_set = frozenset(f["statuses"]) if f["statuses"] else frozenset(DEFAULT_STATUSES)
        visible = None if scope is None else frozenset({scope.key})
        now = time.time()
        groups = [
            [evolve(n) for n in views.select(nodes.values(), now, visible=visible, key_prefix=f["key_prefix"],
                                             kinds=kind_set, statuses=status_set, after=f["after"],
                                             within=f["within"], since=f["since"], until=f["until"])[:limit]]
            for _, _, nodes in self.shards
        ]  # fmt: skip
        return views.merge_pages(groups, limit)

    def stats(self) -> dict[str, Any]:
        """:meth:`MemoryBus.stats` (each shard's counts, without the actor's ``process``)."""
        return views.merge_stats([views.shard_stats(name, nodes, store) for name, store, nodes in self.shards])

    def hub_stats(self) -> None:
        """No hub runs while no bus does: its figures exist only in a running bus."""
        return

    def inspect(self, memory_id: str) -> Inspection:
        """:meth:`MemoryBus.inspect`: one memory with its history and provenance."""
        if not isinstance(memory_id, str) or not memory_id:
            raise InvalidRequest("memory_id", "must be a non-empty string")
        for name, store, nodes in self.shards:
            hit = views.inspect(nodes, store, memory_id)
            if hit is None:
                continue
            node, history = hit
            named = {f: list(getattr(node, f)) for f in RELATION_FIELDS if getattr(node, f)}
            ids = sorted({i for values in named.values() for i in values})
            known = {n.id: n for _, _, other in self.shards for n in views.peek(other, ids)}
            links = {f: [known[i] for i in values if i in known] for f, values in named.items()}
            return Inspection(node, name, history, links, [i for i in ids if i not in known])
        raise MemoryNotFound(memory_id)

    # ------------------------------------------------------------------ export
    def export_key(self) -> bytes:
        """The key this bus seals its exports under by default (see ``client.identity.export_key``)."""
        from memorybus.auth.keyring import derive

        return derive(self._secret, "export seal")

    def export(self, path: str | os.PathLike[str], *, within: Scope | None = None,
               key: bytes | None = None) -> dict[str, int]:  # fmt: skip
        """:meth:`MemoryBus.export`: the same file, page by page from every shard; a full
        export is recorded as a backup (``memorybus.operator.monitoring.mark_backup``)."""
        from memorybus.transfer import ExportWriter, check_key

        if within is not None and not isinstance(within, Scope):
            raise InvalidRequest("within", "must be a Scope or None")
        key = check_key(key) if key is not None else self.export_key()
        header = {"namespace": self.namespace, "embedding_dim": self.dim,
                  "within": list(within.as_tuple()) if within else None}  # fmt: skip
        writer = ExportWriter(path, header, key=key)
        try:
            for _, store, nodes in self.shards:
                after: str | None = None
                while True:
                    blobs, after = views.export_nodes(nodes, store, within, after, _PAGE)
                    for blob in blobs:
                        writer.node(blob)
                    if after is None:
                        break
            for _, store, _ in self.shards:
                position: tuple[str | None, int] | None = (None, 0)
                while position is not None:
                    events, position = views.export_events(store, within, position[0], position[1], _EVENTS_PAGE)
                    for logged_scope, n, blob in events:
                        writer.event(logged_scope, n, blob)
            for _, store, _ in self.shards:
                for slot in views.export_slots(store, within):
                    writer.slot(*slot)
            counts = writer.finish()
        except BaseException:
            writer.abort()
            raise
        if within is None:
            from memorybus.config import Config
            from memorybus.operator.monitoring import mark_backup

            mark_backup(Config.embedded(self.data_dir, namespace=self.namespace), "export", time.time())
        return counts
