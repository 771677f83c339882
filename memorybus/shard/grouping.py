"""Concurrent calls sharing one piece of work: a leader runs the group, the rest wait.

A call queues its slot. While a group is running the queue fills; a call that finds
none running leads: it takes what is queued (up to ``max_group``, in arrival order),
runs it as one group, and goes on until its own slot was carried, then hands the
lead on. Every slot of a group is ``done`` once the group ran, whatever the run
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
    """The queue and the lead. ``cond`` guards ``queue`` and ``leading``."""

    def __init__(self, run: Callable[[list[S]], None], max_group: int | None = None) -> None:
        self._run = run
        self.max_group = max_group
        self.cond = threading.Condition()
        self.queue: list[S] = []
        self.leading = False

    def wait(self, me: S) -> None:
        """Queue ``me``; return once a group carrying it ran (led by this call or another)."""
        with self.cond:
            self.queue.append(me)
            while not me.done and self.leading:
                self.cond.wait()
            lead = not me.done
            self.leading = self.leading or lead
        if not lead:
            return
        try:
            while not me.done:
                with self.cond:
                    group = self.queue[: self.max_group]
                    del self.queue[: self.max_group]
                try:
                    self._run(group)
                finally:
                    with self.cond:
                        for slot in group:
                            slot.done = True
                        self.cond.notify_all()
        finally:
            with self.cond:
                self.leading = False
                self.cond.notify_all()


def answer_of(slot: Slot[A], unanswered: BaseException) -> A:
    """A done slot's answer; else its error, or ``unanswered`` when the run left neither."""
    if slot.answer is None:
        raise slot.error or unanswered
    return slot.answer
