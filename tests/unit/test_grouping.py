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


def _counting_run(delay: float, seen: list[int], answered: list[int]):
    """A run that records how many groups run at once and each slot it answers."""
    lock = threading.Lock()
    now = [0]

    def run(group: list[_Slot]) -> None:
        with lock:
            now[0] += 1
            seen.append(now[0])
        time.sleep(delay)
        with lock:
            now[0] -= 1
            answered.extend(s.n for s in group)
        for s in group:
            s.answer = s.n

    return run


@pytest.mark.parametrize("max_running", [1, 2, 4])
def test_at_most_max_running_groups_run_at_once_and_every_call_is_answered_once(max_running):
    seen: list[int] = []
    answered: list[int] = []
    groups: Grouped[_Slot] = Grouped(_counting_run(0.02, seen, answered), max_running=max_running)
    slots = _calls(groups, 48)
    assert [s.answer for s in slots] == [s.n for s in slots]
    assert sorted(answered) == list(range(48)), "a call ran twice or never"
    assert max(seen) <= max_running
    # 48 callers against groups of 20 ms: the bound is reached (calls do not wait for a lead
    # while fewer groups than the bound run), and calls still share groups
    assert max(seen) == max_running
    assert len(answered) == 48 and len(seen) < 48
    assert groups.running == 0 and not groups.leading and not groups.queue


def test_a_lead_whose_slot_another_lead_took_waits_for_that_group_and_leaves_the_lead():
    # groups of at most 2 and two leads: a call queued behind a long queue can see its slot
    # taken by the other lead's group; it must then neither run an empty group nor return
    # before its slot's group ran
    seen: list[int] = []
    answered: list[int] = []
    groups: Grouped[_Slot] = Grouped(_counting_run(0.005, seen, answered), max_group=2, max_running=2)
    empty: list[int] = []
    inner = groups._run

    def run(group: list[_Slot]) -> None:
        if not group:
            empty.append(1)
        inner(group)

    groups._run = run
    for _ in range(5):
        slots = _calls(groups, 30)
        assert all(s.done and s.answer == s.n for s in slots)
    assert not empty, "a lead ran an empty group"
    assert sorted(answered) == sorted(list(range(30)) * 5)
    assert max(seen) <= 2 and groups.running == 0


def test_max_running_below_one_is_refused():
    with pytest.raises(ValueError, match="max_running"):
        Grouped(lambda group: None, max_running=0)


def test_a_call_that_finds_an_embedding_request_out_asks_without_waiting_for_it():
    # the regression this guards: with one request out at a time, an assert_fact that came
    # just after another's request waited for that answer before asking for its own (the
    # simulation's assert_fact p50 rose about 18% against the bus before shared requests)
    import numpy as np

    from memorybus.actors.ingest import Together

    release = threading.Event()
    out = [0]
    most = [0]
    lock = threading.Lock()

    def encode(texts: list[str]) -> np.ndarray:
        with lock:
            out[0] += 1
            most[0] = max(most[0], out[0])
        release.wait(10)
        with lock:
            out[0] -= 1
        return np.array([[float(len(t))] for t in texts], dtype=np.float32)

    together = Together(encode)
    got: dict[str, np.ndarray] = {}
    first = threading.Thread(target=lambda: got.setdefault("a", together.encode(["a"])))
    first.start()
    deadline = time.monotonic() + 5
    while out[0] < 1 and time.monotonic() < deadline:
        time.sleep(0.005)
    second = threading.Thread(target=lambda: got.setdefault("bb", together.encode(["bb"])))
    second.start()
    while out[0] < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert out[0] == 2, "the second call waited for the first request's answer before asking"
    # once REQUESTS_OUT requests are out, further calls share the next one
    more = [threading.Thread(target=lambda i=i: got.setdefault("c" * (i + 3), together.encode(["c" * (i + 3)])))
            for i in range(Together.REQUESTS_OUT * 3)]
    for t in more:
        t.start()
    time.sleep(0.2)
    release.set()
    for t in (first, second, *more):
        t.join(10)
    assert most[0] <= Together.REQUESTS_OUT
    assert {k: float(v[0][0]) for k, v in got.items()} == {k: float(len(k)) for k in got}
    assert len(got) == 2 + Together.REQUESTS_OUT * 3
