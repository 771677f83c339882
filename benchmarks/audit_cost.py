"""The audit trail's own work per committed write, measured apart from the noise of
a whole put_many: making the entry (content hashes) and chaining it inside the
write's SQLite transaction (read head, encode, hash, insert, move head).

    python benchmarks/audit_cost.py
"""

from __future__ import annotations

import sqlite3
import tempfile
import time

import numpy as np

from memorybus import ManualClock, MemoryNode, Scope
from memorybus.shard.auditing import AuditTrail
from memorybus.storage.base import WriteBatch
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.sqlite_audit import chain_audit


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        store = SqliteStore(f"{d}/r.sqlite")
        trail = AuditTrail(store, ManualClock(), lambda _id: None)
        scope = Scope("acme", "u1", "planner")
        for batch in (1, 10, 100):
            nodes = [MemoryNode(content=f"memory {i}: the build passed on node {i % 7}", scope=scope,
                                embedding=np.zeros(4, dtype=np.float32)) for i in range(batch)]  # fmt: skip
            wb = WriteBatch(puts=nodes)
            rounds = max(200, 20000 // batch)
            t = time.perf_counter()
            for _ in range(rounds):
                drafts = trail.write_drafts("put_many", "acme/u1/planner", wb)
            make = (time.perf_counter() - t) / rounds
            db = sqlite3.connect(f"{d}/r.sqlite", isolation_level=None)
            db.execute("BEGIN IMMEDIATE")
            t = time.perf_counter()
            for _ in range(rounds):
                chain_audit(db, drafts)
            append = (time.perf_counter() - t) / rounds
            db.execute("ROLLBACK")
            db.close()
            total = make + append
            print(f"batch {batch:>3}: entry {make * 1e6:7.1f} us + chain/insert {append * 1e6:6.1f} us per commit"
                  f" = {total / batch * 1e6:6.1f} us per memory")  # fmt: skip
        store.close()


if __name__ == "__main__":
    main()
