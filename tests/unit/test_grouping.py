"""The leader/follower grouping behind group commit and shared embedding requests."""

from __future__ import annotations

import threading
import time

import pytest

from memorybus.shard.grouping import Grouped


class _Slot:
    def __init__(self, n: int) -> None:
        self.n = n
        self.done = False
        self.answer: int | None = None
        self.error: BaseException | None = None


def _calls(groups: Grouped[_Slot], n: int) -> list[_Slot]:
    slots = [_Slot(i) for i in range(n)]

    def call(slot: _Slot) -> None:
        try:
            groups.wait(slot)
        except BaseException as exc:  # the test reads what reached each caller
            slot.error = exc

    threads = [threading.Thread(target=call, args=(s,)) for s in slots]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads), "a caller never returned"
    return slots


def test_concurrent_calls_share_groups_and_each_gets_its_own_answer():
    sizes: list[int] = []

    def run(group: list[_Slot]) -> None:
        time.sleep(0.02)  # calls queue while one group runs
        sizes.append(len(group))
        for s in group:
            s.answer = s.n * 10

    slots = _calls(Grouped(run), 40)
    assert [s.answer for s in slots] == [s.n * 10 for s in slots]
    assert sum(sizes) == 40
    assert len(sizes) < 40, "no two calls ever shared a group"


def test_a_group_is_never_larger_than_max_group():
    sizes: list[int] = []

    def run(group: list[_Slot]) -> None:
        time.sleep(0.01)
        sizes.append(len(group))
        for s in group:
            s.answer = s.n

    slots = _calls(Grouped(run, max_group=3), 30)
    assert all(s.answer == s.n for s in slots)
    assert max(sizes) <= 3 and sum(sizes) == 30


def test_a_run_that_raises_releases_every_member_and_the_lead():
    calls = 0

    def run(group: list[_Slot]) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("the first group fails")
        for s in group:
            s.answer = s.n

    groups: Grouped[_Slot] = Grouped(run)
    first = _Slot(0)
    with pytest.raises(RuntimeError, match="first group"):
        groups.wait(first)
    assert first.done and first.answer is None
    assert not groups.leading and not groups.queue
    # the next call leads again and is answered
    later = _Slot(7)
    groups.wait(later)
    assert later.answer == 7
