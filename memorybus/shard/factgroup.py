"""Group commit of single keyed-fact assertions: one store transaction for many calls.

Each ``assert_fact`` call asserts one value; committed one by one, each costs a store
transaction (SQLite: one fsync). :class:`FactGroups` lets concurrent calls share one.
A call first checks its assertion (bad input fails that call alone, before it
waits), then queues it. While a commit is in flight the queue fills; a call that
finds none in flight leads: it takes what is queued (up to ``max_group``, in arrival
order) and commits it as one group, resolved in that order exactly as
:meth:`~memorybus.shard.facts.Facts.assert_facts` of the list would be, each call
with its own operation record, events, audit entry and answer (see
:meth:`~memorybus.shard.ops.Commits.commit_group`). Then it hands the lead on.

A call whose operation had committed before (a re-execution) is answered from its
record and leaves the group; the rest is resolved again. A group that fails
otherwise (a conflict that outlasts the retries, a put clashing with a stored
record) is committed again call by call, so an error reaches only its own caller.
An unknown outcome (the store failed during the commit) is every member's, each
told its own operation id. A store without ``group_ops`` (Redis: one operation
record per script) commits the calls one by one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from memorybus.bus.conflicts import Strategy
from memorybus.errors import OutcomeUnknown, StoreUnavailable
from memorybus.memory.model import MemoryNode
from memorybus.scopes import Context
from memorybus.shard.facts import Assertion
from memorybus.shard.grouping import Grouped, answer_of
from memorybus.shard.ops import OpCall, Recorded, check_op
from memorybus.shard.results import FactResult

if TYPE_CHECKING:
    from memorybus.shard.facts import Facts

#: the most calls one group commits (a bigger queue is taken in turns)
MAX_GROUP = 256


@dataclass(slots=True)
class _Waiting:
    """A queued call: its assertion and operation id; its answer once ``done``."""

    item: Assertion
    op: str | None
    done: bool = False
    answer: FactResult | None = None
    error: BaseException | None = None


class FactGroups:
    """The shard's queue of single assertions and its group commits. ``commits`` and
    ``calls`` count the store commits made and the calls they answered."""

    def __init__(self, facts: Facts, max_group: int = MAX_GROUP) -> None:
        self.facts = facts
        self.core = facts.core
        self.max_group = max_group
        self._groups: Grouped[_Waiting] = Grouped(self._commit, max_group)
        self.commits = 0
        self.calls = 0

    def counts(self) -> dict[str, int]:
        """``{"calls": ..., "commits": ...}``: calls answered, store commits made."""
        with self._groups.cond:
            return {"calls": self.calls, "commits": self.commits}

    def queued(self) -> tuple[bool, list[str]]:
        """Whether a call leads a commit now, and the ids of the assertions queued."""
        with self._groups.cond:
            return self._groups.leading, [w.item.node.id for w in self._groups.queue]

    def assert_fact(self, context: Context, node: MemoryNode, vector: np.ndarray | None = None,
                    strategy: Strategy | str | None = None, *, op: str | None = None) -> FactResult:
        """:meth:`~memorybus.shard.facts.Facts.assert_fact` (same arguments), group-committed
        with the calls queued beside it. Call it holding no lock of the shard's gate."""
        check_op(op)
        with self.core.gate.read():
            context = self.core.check_context(context)
            chosen = Strategy.parse(strategy or self.core.policy.strategy)
            now = self.core.clock.now()
            row = None if vector is None else np.asarray(vector, dtype=np.float32)
            new = self.facts.prepare(context, node, row, now)
        me = _Waiting(Assertion(context, new, chosen, now, 0), op)
        self._groups.wait(me)
        return answer_of(me, StoreUnavailable("shard", "the group commit gave no answer"))

    def _commit(self, group: list[_Waiting]) -> None:
        """Commit ``group`` (as one, or call by call); every member done after."""
        try:
            with self.core.gate.write():
                self._run(group)
        except BaseException as exc:  # whatever stopped the group is its waiting callers': each raises it
            for w in group:
                if w.answer is None and w.error is None:
                    w.error = exc

    def _run(self, group: list[_Waiting]) -> None:
        calls = [self.core.op_call("assert", w.item.context, w.op) for w in group]
        pending = list(zip(group, calls, strict=True))
        together = bool(getattr(self.core.store, "group_ops", False))
        together = together and len({w.item.node.id for w in group}) == len(group)
        while together and len(pending) > 1:
            try:
                answers = self.facts.commit_calls(
                    [c for _, c in pending], [dataclasses.replace(w.item, part=i) for i, (w, _) in enumerate(pending)]
                )
            except Recorded as done:  # a re-execution: its first answer; the rest again without it
                w, _ = pending.pop(done.index)
                w.answer = _first(done.answer)
                continue
            except OutcomeUnknown as exc:
                for w, _ in pending:
                    w.error = OutcomeUnknown(exc.backend, exc.detail, w.op or "")
                self._count(1, len(pending))
                return
            except Exception:  # a call's own error sank the group: each call alone tells whose
                break
            for (w, _), answer in zip(pending, answers, strict=True):
                w.answer = answer[0]
            self._count(1, len(pending))
            return
        for w, call in pending:
            self._alone(w, call)

    def _alone(self, w: _Waiting, call: OpCall) -> None:
        try:
            w.answer = self.facts.commit_calls([call], [w.item])[0][0]
        except Recorded as done:
            w.answer = _first(done.answer)
        except Exception as exc:  # this call's own error, handed to its waiting caller
            w.error = exc
        self._count(1, 1)

    def _count(self, commits: int, calls: int) -> None:
        with self._groups.cond:
            self.commits += commits
            self.calls += calls


def _first(answer: Any) -> FactResult:
    """A recorded answer of an assertion call (a list of results): its first."""
    return cast(FactResult, answer[0])
