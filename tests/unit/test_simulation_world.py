"""The simulated world, its ground truth, and the planner's script (no Ray)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from memorybus.errors import InvalidRequest
from memorybus.simulation import world as W
from memorybus.simulation.grading import names, states
from memorybus.simulation.plan import Planner, roster
from memorybus.simulation.settings import SimConfig
from memorybus.simulation.tasks import Ack


def _plan_all(cfg: SimConfig):
    w = W.generate(cfg.orgs, cfg.users, cfg.days, cfg.seed)
    planner = Planner(cfg, w, roster(cfg, w))
    steps = []
    for s in range(cfg.total_steps):
        tasks = planner.plan(s)
        steps.append(tasks)
        acks = []
        for t in tasks.values():
            for x in t.writes:
                acks.append(Ack(x.id, x.id, ("o0", "", "", ""), x.content, 0.0))
                if x.tag == "finding":  # as if every finding were shared with the org
                    acks.append(Ack(x.id + ">org", "c" + x.id, (planner.by_name[_owner(tasks, x.id)].org, "", "", ""),
                                    x.content, 0.0, "broadcast", broadcast_of=x.id))
        planner.absorb(acks)
    return w, planner, steps


def _owner(tasks, write_id):
    return next(name for name, t in tasks.items() if any(x.id == write_id for x in t.writes))


def test_world_is_seeded_and_truth_has_validity_intervals():
    a, b, c = W.generate(2, 6, 20, 7), W.generate(2, 6, 20, 7), W.generate(2, 6, 20, 8)
    assert a.changes == b.changes and a.facts == b.facts
    assert a.changes != c.changes
    categories = {a.facts[ch.key].category for ch in a.changes}
    assert categories == {"job", "owner", "deadline", "preference", "policy"}
    for key, spec in a.facts.items():
        versions = a.versions(key)
        assert [v.version for v in versions] == list(range(len(versions)))
        for v, nxt in itertools.pairwise(versions):
            assert v.day <= nxt.day and v.value != nxt.value  # a change changes the value
            assert a.valid_until(v) == nxt.day
            mid = (v.day + nxt.day) / 2
            assert a.value_at(key, mid) == v.value
        assert all(0 <= v.day < 20 and v.value in spec.options for v in versions)
        assert a.valid_until(versions[-1]) == float("inf")
        # the written content states the value in words the grader recognises
        truth = dataclasses.make_dataclass("T", ["value", "markers"])(versions[-1].value, spec.markers)
        assert states(spec.content(versions[-1].value), truth)
        other = next(o for o in spec.options if o != versions[-1].value)
        assert not states(spec.content(other), truth)
    policy = next(k for k, s in a.facts.items() if s.category == "policy" and a.versions(k)[0].day > 0)
    assert a.version_at(policy, a.versions(policy)[0].day - 0.01) is None  # not issued yet


def test_user_facts_live_at_user_scope_of_their_org():
    w = W.generate(2, 4, 10, 1)
    for spec in w.facts.values():
        if spec.category == "preference":
            assert spec.level == "user" and w.users[spec.user].org == spec.org
        else:
            assert spec.level == "org" and spec.user == ""


def test_whole_word_matching():
    assert names("The deadline is 14 March 2024", "14 March 2024")
    assert not names("The deadline is 14 March 2024", "4 March 2024")
    assert names("works as Senior Engineer in the data team", "senior engineer in the data team")
    assert not names("works as senior engineer", "engineer in")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"agents": 3, "orgs": 2}, "agents"),
        ({"users": 1, "orgs": 2}, "users"),
        ({"users": 30, "agents": 24}, "users"),
        ({"days": 0}, "days"),
        ({"steps": 0}, "steps"),
        ({"agents": 10_000}, "agents"),
        ({"backend": "sqlite"}, "backend"),
        ({"faults": ("meteor",)}, "faults"),
        ({"faults": ("redis",)}, "faults"),  # the embedded backend has no Redis to kill
        ({"faults": ("node",)}, "faults"),  # no cluster address, no node to remove
        ({"chaos": True, "address": "127.0.0.1:6379"}, "backend"),  # node loss needs records off the node
        ({"backend": "redis", "redis_url": "redis://h:1", "faults": ("redis",)}, "faults"),  # not ours to kill
        ({"redis_url": "redis://h:1"}, "redis_url"),
    ],
)
def test_impossible_sizes_are_refused(changes, field):
    with pytest.raises(InvalidRequest) as err:
        SimConfig(**changes)
    assert err.value.argument == field


def test_roster_serves_every_user_and_gives_each_org_a_lead():
    cfg = SimConfig(agents=9, users=5, orgs=2, days=4, seed=3)
    w = W.generate(cfg.orgs, cfg.users, cfg.days, cfg.seed)
    agents = roster(cfg, w)
    assert len(agents) == 9 and len({a.name for a in agents}) == 9
    served = {u for a in agents for u in a.users}
    assert served == set(w.users)
    for org in w.orgs:
        mine = [a for a in agents if a.org == org.id]
        assert len(mine) >= 2 and sum(a.lead for a in mine) == 1
        assert all(set(a.users) <= set(org.users) for a in mine)


def test_plan_is_seeded_and_questions_never_carry_the_answer():
    cfg = SimConfig(agents=6, users=3, orgs=1, days=10, seed=5, questions_per_step=2)
    w, planner, steps = _plan_all(cfg)
    _, _, again = _plan_all(cfg)
    assert steps == again
    questions = list(planner.questions.values())
    kinds = {q.kind for q in questions}
    assert {"current", "as_of", "finding"} <= kinds
    for q in questions:
        t = planner.truths[q.id]
        assert not hasattr(q, "value")
        if t.value:
            assert not names(q.text, t.value), q.text  # the question does not give the answer away
        if q.kind == "as_of":
            assert w.value_at(q.key, (q.as_of - W.EPOCH0) / W.DAY) == t.value
        if q.kind == "current":
            assert w.value_at(q.key, t.step * cfg.step_days) == t.value
    # most questions are about what another agent observed
    others = [t for t in planner.truths.values() if t.version and not t.asker_observed]
    assert len(others) > 0.5 * sum(1 for t in planner.truths.values() if t.version)


def test_observations_reach_only_eligible_agents_and_some_are_wrong():
    cfg = SimConfig(agents=8, users=4, orgs=2, days=20, seed=2)
    w, planner, steps = _plan_all(cfg)
    by_name = planner.by_name
    wrong = 0
    for tasks in steps:
        for name, task in tasks.items():
            for x in task.writes:
                if x.op != "fact":
                    assert x.level in ("agent", "session") and x.user in by_name[name].users
                    continue
                spec = w.facts[x.key]
                assert by_name[name].org == spec.org
                assert not spec.user or spec.user in by_name[name].users
                assert 0 < x.confidence <= 1 and x.strategy in W.STRATEGIES
                wrong += not planner.assertions[x.id].correct
    assert 0 < wrong < 0.5 * len(planner.assertions)
