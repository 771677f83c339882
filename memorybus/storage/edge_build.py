"""Build a Qdrant Edge index's HNSW graph in a process of its own.

``python -m memorybus.storage.edge_build DIR`` opens the Qdrant Edge shard in ``DIR``
(a copy the shard made, see :meth:`memorybus.shard.index.SearchIndex.begin_build`),
optimizes it (HNSW graph, merged segments), flushes and closes it. It runs apart
from the shard because Qdrant Edge's ``optimize`` holds the Python interpreter lock
for the whole build (measured 2026-12-05 with qdrant-edge on 2 cores: 107 s for
100,000 384-dimension vectors, during which no other thread of the process ran).
Exit status 0: the copy is ready (it prints ``optimized`` when Qdrant built or merged
anything, ``unchanged`` when the index was below its indexing threshold); anything
else: the copy is not to be used.
"""

from __future__ import annotations

import sys


def build(path: str) -> bool:
    """Optimize the Qdrant Edge shard in ``path``; whether it ended optimized."""
    import qdrant_edge as qe

    shard = qe.EdgeShard.load(path)
    try:
        done = bool(shard.optimize())
        shard.flush()
    finally:
        shard.close()
    return done


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m memorybus.storage.edge_build DIR", file=sys.stderr)
        return 2
    print("optimized" if build(argv[0]) else "unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
