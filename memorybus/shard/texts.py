"""What a shard embeds for the memories it stores: the shard decides, not its caller.

A caller sends nodes; the shard picks each one's text (:class:`EmbeddingTexts`),
the embedder encodes it, and the shard stores the vector with the node. The
text is :func:`~memorybus.retrieval.structure.index_text` (the content without a
leading date stamp: dates live in ``valid_from``, not in the vector).

With ``RankingWeights.contextual_text`` (a quality option that costs model work:
the texts grow), an episodic memory of a declared thread is embedded after the
text of the episodic memory just before it in that thread, wherever that one
is: in the same call, in an earlier call whose text this shard has decided and
not yet settled (calls in flight, in the order their texts were decided), or in
the store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from memorybus.errors import InvalidMemory
from memorybus.memory.model import MemoryNode
from memorybus.retrieval.structure import RecallIndex, index_content, index_text, is_episodic, order_key, thread_of

#: the memory just before a node in its thread outside the call (None: none known)
Earlier = Callable[[MemoryNode], MemoryNode | None]


def _thread(node: MemoryNode) -> str | None:
    """The thread whose earlier turn gives ``node`` its context (episodic memories only)."""
    return thread_of(node) if is_episodic(node) else None


def embedding_texts(nodes: Sequence[MemoryNode], contextual_text: bool = False,
                    earlier: Earlier | None = None) -> list[str]:  # fmt: skip
    """What the embedder encodes for each of ``nodes`` (see the module docstring).

    ``earlier(node)``: the episodic memory just before ``node`` in its thread outside
    ``nodes`` (a shard answers from its store and its calls in flight); the later
    of it and the one before ``node`` within ``nodes`` gives the context."""
    texts = [index_text(n) for n in nodes]
    if not contextual_text:
        return texts
    out = list(texts)
    last: dict[str, MemoryNode] = {}
    for i in sorted(range(len(nodes)), key=lambda i: order_key(nodes[i])):
        node = nodes[i]
        thread = _thread(node)
        if thread is None:
            continue
        before = [n for n in (last.get(thread), earlier(node) if earlier else None) if n is not None]
        if before:
            out[i] = f"{index_text(max(before, key=order_key))}\n{texts[i]}"
        last[thread] = node
    return out


class EmbeddingTexts:
    """One shard's text policy: :func:`embedding_texts` with its store's threads and
    its calls in flight. Not thread-safe: the shard's state lock guards every call."""

    def __init__(self, contextual: bool, structure: RecallIndex, nodes: Mapping[str, MemoryNode]) -> None:
        self.contextual = contextual
        self._structure = structure
        self._nodes = nodes
        #: thread -> id -> node whose text was decided and whose write has not settled
        self._flight: dict[str, dict[str, MemoryNode]] = {}

    def texts(self, nodes: Sequence[MemoryNode]) -> list[str]:
        """The texts of new memories ``nodes`` (InvalidMemory for anything else)."""
        for node in nodes:
            if not isinstance(node, MemoryNode):
                raise InvalidMemory("node", f"must be a MemoryNode, got {type(node).__name__}")
            if not isinstance(node.content, str):
                raise InvalidMemory("content", "must be a string")
        return embedding_texts(nodes, self.contextual, self._earlier)

    @staticmethod
    def summary(text: str) -> list[str]:
        """The text of a summary stored as a new semantic memory (consolidation)."""
        if not isinstance(text, str):
            raise InvalidMemory("content", "must be a string")
        return [index_content(text)]

    def hold(self, nodes: Sequence[MemoryNode]) -> None:
        """``nodes``' texts are decided and their write is on its way: later calls'
        turns take their context from them until :meth:`settle`."""
        if self.contextual:
            for node in nodes:
                thread = _thread(node)
                if thread is not None:
                    self._flight.setdefault(thread, {})[node.id] = node

    def settle(self, nodes: Sequence[MemoryNode]) -> None:
        """The write of ``nodes`` is over (committed: the store has them now; or failed)."""
        for node in nodes:
            thread = _thread(node) if self._flight else None
            held = self._flight.get(thread) if thread is not None else None
            if held is not None and held.get(node.id) is node:
                del held[node.id]
                if not held:
                    del self._flight[thread]  # type: ignore[arg-type]

    def _earlier(self, node: MemoryNode) -> MemoryNode | None:
        key = order_key(node)
        found: list[MemoryNode] = []
        stored = self._structure.predecessor_of(node, self._stored_episodic)
        if stored is not None:
            found.append(self._nodes[stored])
        thread = _thread(node)
        for other in self._flight.get(thread, {}).values() if thread is not None else ():
            if other.id != node.id and order_key(other) < key:
                found.append(other)
        return max(found, key=order_key, default=None)

    def _stored_episodic(self, memory_id: str) -> bool:
        node = self._nodes.get(memory_id)
        return node is not None and is_episodic(node)
