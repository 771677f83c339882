"""Grading, leak checks, delivery accounting and the fault schedule (no Ray)."""

from __future__ import annotations

from memorybus.errors import ActorUnavailable
from memorybus.latency import percentile
from memorybus.simulation import chaos
from memorybus.simulation.audit import deliveries
from memorybus.simulation.grading import Grader
from memorybus.simulation.plan import Truth
from memorybus.simulation.tasks import Ack, AgentSpec, Answer, Hit, Question, Received

ME = ("o0", "u1", "agent01", "")
TRUTH = Truth(7, "agent01", 3, "owner", "Ada Brill", ("project Vesk", "owner"), ("o0/project-vesk/owner", 2),
              False, ME)
Q = Question(7, "u1", "current", "Who owns project Vesk?", ("recall", "fact", "context"), "o0/project-vesk/owner")


def _hit(content, scope=("o0", "", "", ""), id_="n1"):
    return Hit(id_, content, scope)


def test_answers_are_graded_per_method_and_the_first_correct_answer_is_kept():
    g = Grader()
    right, wrong = "The owner of project Vesk is Ada Brill", "The owner of project Vesk is Tom Ro"
    a = Answer(7, "agent01", 100.0, recall=[_hit(wrong), _hit(right, id_="n2")], fact=_hit(right),
               context=f"## Recalled memories\n- {wrong}\n- {right}", notebook=["Tom Ro", "Ada Brill"],
               pushed=wrong)
    rows = {r["method"]: r for r in g.grade(3, 1.5, 100.0, Q, TRUTH, a)}
    assert (rows["recall"]["top1"], rows["recall"]["top5"]) == (False, True)
    assert rows["current_fact"]["top1"] and rows["context_for"]["top1"]
    assert (rows["no_bus"]["top1"], rows["no_bus"]["top5"]) == (False, True)
    assert rows["pushed"]["top1"] is False
    assert g.first_correct == {("o0/project-vesk/owner", 2): {"wall": 100.0, "day": 1.5}}
    # the subject matters, not only the value
    other = Answer(7, "agent01", 101.0, recall=[_hit("The owner of project Lum is Ada Brill")])
    assert not g.grade(4, 2.0, 101.0, Q, TRUTH, other)[0]["top1"]
    assert g.leaks == []


def test_a_memory_outside_the_askers_scope_is_a_leak_whatever_the_bus_reports():
    g = Grader(tokens={"bakodu": "agent02"})
    private = ("o0", "u1", "agent02", "")
    g.register("secret", private)
    # the bus claims an org scope, the registry knows it was written privately
    a = Answer(7, "agent01", 1.0, recall=[_hit("x", scope=("o0", "", "", ""), id_="secret")])
    g.grade(1, 0.5, 1.0, Q, TRUTH, a)
    other_user = Answer(7, "agent01", 1.0, recall=[_hit("y", scope=("o0", "u2", "", ""), id_="n9")])
    g.grade(1, 0.5, 1.0, Q, TRUTH, other_user)
    other_org = Answer(7, "agent01", 1.0, fact=_hit("z", scope=("o1", "", "", ""), id_="n8"))
    g.grade(1, 0.5, 1.0, Q, TRUTH, other_org)
    g.grade(1, 0.5, 1.0, Q, TRUTH, Answer(7, "agent01", 1.0, context="Private note bakodu: call back"))
    assert [leak["where"] for leak in g.leaks] == ["current", "current", "current", "context"]
    # the asker's own private memory and org memories are fine
    g2 = Grader(tokens={"bakodu": "agent01"})
    g2.register("mine", ME)
    g2.grade(1, 0.5, 1.0, Q, TRUTH, Answer(7, "agent01", 1.0, recall=[_hit("x", ME, "mine"), _hit("y")],
                                           context="Private note bakodu"))
    assert g2.leaks == []
    g2.check_received("agent01", "o0", [Received("u1", "n5", ("o0", "u2", "", ""), "asserted", "w", 0.0, 0.1)])
    assert len(g2.leaks) == 1 and g2.leaks[0]["where"] == "event"


def test_delivery_counts_committed_per_subscription_and_finds_the_missing_one():
    agents = [AgentSpec("a", "o0", ("u1", "u2"), 0.9), AgentSpec("b", "o0", ("u2",), 0.9)]
    acks = [
        Ack("w1", "w1", ("o0", "", "", ""), "org fact", 10.0, "created"),  # every subscription may see it
        Ack("w2", "w2", ("o0", "u2", "", ""), "u2 fact", 10.0, "superseded"),  # only u2's subscriptions
        Ack("w3", "w3", ("o0", "u1", "a", ""), "a note", 10.0, "stored"),  # remember: not a pushed kind
        Ack("f>org", "copy", ("o0", "", "", ""), "finding", 10.0, "broadcast", broadcast_of="f"),
    ]

    def got(user, write, t=10.2):
        return Received(user, write, ("o0", "", "", ""), "asserted", write, 10.0, t)

    received = [
        [got("u1", "w1"), got("u2", "w1"), got("u2", "w2", 10.5), got("u1", "copy"), got("u2", "copy")],
        [got("u2", "w1"), got("u2", "copy")],  # b's subscription never got w2
    ]
    d = deliveries(agents, received, acks)
    assert (d["committed"], d["delivered"], d["missing"]) == (8, 7, 1)
    assert d["examples"] == [{"agent": "b", "user": "u2", "write": "w2"}]
    assert sorted(round(x, 3) for x in d["to_every_subscriber"]) == [0.2, 0.2]  # w2 never reached everyone


def test_fault_schedule_is_seeded_covers_every_kind_and_removes_a_node_once():
    kinds = ["shard", "embedder", "hub", "redis", "node"]
    a = chaos.schedule(60, kinds, 3, seed=4)
    assert a == chaos.schedule(60, kinds, 3, seed=4)
    assert a != chaos.schedule(60, kinds, 3, seed=5)
    assert {f.kind for f in a} == set(kinds) and sum(f.kind == "node" for f in a) == 1
    steps = [f.step for f in a]
    assert len(set(steps)) == len(steps) and all(6 <= s <= 51 for s in steps)
    assert all(0 <= f.index < 3 for f in a)
    assert len(chaos.schedule(8, ["shard"], 1, seed=0)) == 1


def test_injector_records_what_failed():
    def kill(kind, index):  # as fleet.kill_bus_actor fails
        raise ActorUnavailable(f"{kind}-{index}", f"no {kind}")

    inj = chaos.Injector(kill)
    assert inj.kinds() == ["shard", "embedder", "hub"] and inj.kinds(("hub", "node")) == ["hub"]
    rec = inj.inject(chaos.Fault(3, "hub"), 1.5, 0.0)
    assert rec["ok"] is False and "no hub" in rec["error"] and inj.records == [rec]


def test_percentile():
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile(list(range(101)), 99) == 99


def test_wrong_answers_are_explained(tmp_path):
    """A wrong current_fact answer is 'never observed' until a true report of the asked
    version is acknowledged, 'late' in that step, then 'stale' (the previous value) or
    'wrong'; a right one gets no reason; every row says whether its answer was observed."""
    from memorybus.simulation.runner import Run, explain
    from memorybus.simulation.settings import SimConfig

    run = Run(SimConfig(seed=3), str(tmp_path), None)
    change = next(c for c in run.world.changes if c.version == 1)
    spec = run.world.facts[change.key]
    before = run.world.versions(change.key)[0].value
    other = next(v for v in spec.options if v not in (before, change.value))
    truth = Truth(0, "agent00", 5, spec.category, change.value, spec.markers, (change.key, 1))

    def why(value, step=5):
        ans = Answer(0, "agent00", 0.0, fact=Hit("x", spec.content(value), (spec.org, "", "", ""), change.key))
        rows = [{"method": "current_fact", "top1": value == change.value}, {"method": "pushed", "top1": False}]
        explain(run, step, truth, ans, rows)
        assert rows[1].get("why") is None  # only recall and current_fact answers are explained
        return rows[0].get("why"), rows[0]["observed"]

    assert why(before) == ("never observed", False)
    run.observed_at[(change.key, 1)] = 5
    assert why(before) == ("late", False)
    run.observed_at[(change.key, 1)] = 2
    assert why(before) == ("stale", True)
    assert why(other) == ("wrong", True)
    assert why(change.value) == (None, True)
