"""Concurrent calls sharing one piece of work: a leader runs the group, the rest wait.

A call queues its slot. While ``max_running`` groups are running the queue fills; a
call that finds fewer running leads: it takes what is queued (up to ``max_group``, in
arrival order), runs it as one group, and goes on until its own slot was carried, then
hands the lead on. Every slot of a group is ``done`` once the group ran, whatever the run
raised; what each call gets back (an answer, an error) is for ``run`` to put on its
slot. Used by the shard's group commit of single assertions
(:mod:`memorybus.shard.factgroup`) and the ingest actor's shared embedding requests.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

A = TypeVar("A")


class Slot(Protocol[A]):
    """A queued call: ``done`` once a group that carried it ran, with its ``answer`` or
    its ``error`` (put there by the group's run)."""

    done: bool
    answer: A | None
    error: BaseException | None


S = TypeVar("S", bound="Slot[Any]")


class Grouped(Generic[S]):
    """The queue and the leads. ``cond`` guards ``queue`` and ``running``.

    ``max_running``: how many groups may run at once. One where groups must follow each
    other (a store commit); more where the work behind them merges requests itself (the
    embedder batches concurrent requests): then a call that finds a group out does not
    wait for it before asking, and calls still share a request once that many are out."""

    def __init__(self, run: Callable[[list[S]], None], max_group: int | None = None, max_running: int = 1) -> None:
        if max_running < 1:
            raise ValueError("max_running must be at least 1")
        self._run = run
        self.max_group = max_group
        self.max_running = max_running
        self.cond = threading.Condition()
        self.queue: list[S] = []
        self.running = 0

    @property
    def leading(self) -> bool:
        """Whether some call leads a group now."""
        return self.running > 0

    def wait(self, me: S) -> None:
        """Queue ``me``; return once a group carrying it ran (led by this call or another)."""
        with self.cond:
            self.queue.append(me)
            while not me.done and self.running >= self.max_running:
                self.cond.wait()
            lead = not me.done
            if lead:
                self.running += 1
        if not lead:
            return
        leads = True
        try:
            while True:
                with self.cond:
                    if me.done:
                        return
                    group = self.queue[: self.max_group]
                    del self.queue[: self.max_group]
                    if not group:  # another lead took this call's slot: its group carries it
                        self.running -= 1
                        leads = False
                        self.cond.notify_all()
                        while not me.done:
                            self.cond.wait()
                        return
                try:
                    self._run(group)
                finally:
                    with self.cond:
                        for slot in group:
                            slot.done = True
                        self.cond.notify_all()
        finally:
            if leads:
                with self.cond:
                    self.running -= 1
                    self.cond.notify_all()


def answer_of(slot: Slot[A], unanswered: BaseException) -> A:
    """A done slot's answer; else its error, or ``unanswered`` when the run left neither."""
    if slot.answer is None:
        raise slot.error or unanswered
    return slot.answer
