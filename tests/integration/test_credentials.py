"""Credentials through the real bus (Ray, the shard, hub and maintenance actors).

Each test plays the attacker: a Ray task holding an agent's handle, or one that finds
the bus's actors by name and calls them with no credential, another principal's, or
an agent's where an operator's is needed. Nothing it tries may read or change data.
"""

from __future__ import annotations

import time
import uuid

import pytest
import ray

import memorybus as mb
from memorybus import BusPolicy, Config, Context, actors
from memorybus.retrieval.wire import RecallRequest, pack_request

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def bus(ray_local, tmp_path_factory):
    cfg = Config.embedded(tmp_path_factory.mktemp("creds"), num_shards=2, namespace="creds_t",
                          touch_flush_seconds=0.0, bus=BusPolicy(authorities=("role:lead",)))  # fmt: skip
    b = mb.connect(cfg)
    yield b
    b.shutdown()


def org() -> str:
    return f"org{uuid.uuid4().hex[:8]}"


def cause(exc_info: pytest.ExceptionInfo) -> BaseException:
    err = exc_info.value
    return err.cause if isinstance(err, ray.exceptions.RayTaskError) else err


@ray.remote(num_cpus=0)
def hostile(config: Config, victim_org: str, agent_cred: str) -> dict[str, str]:
    """A task that finds the bus's actors by name and tries every door."""
    from memorybus.config import DecayPolicy

    results: dict[str, str] = {}
    shard = actors.handle(config, "shard", 0)
    hub = actors.handle(config, "hub", 0)
    victim = Context(victim_org, "alice")

    def attempt(name: str, ref) -> None:
        try:
            ray.get(ref, timeout=60)
            results[name] = "ALLOWED"
        except ray.exceptions.RayTaskError as exc:
            results[name] = type(exc.cause).__name__

    request = pack_request(RecallRequest(victim, 50, None, None, "secret", None, b"\0" * 4 * 384))
    attempt("recall-no-credential", shard.recall.remote(request))
    stolen = pack_request(RecallRequest(Context(victim_org, "alice", credential=agent_cred), 50, None, None,
                                        "secret", None, b"\0" * 4 * 384))  # fmt: skip
    attempt("recall-other-principal", shard.recall.remote(stolen))
    attempt("get-no-credential", shard.get.remote(victim, "00000000-0000-0000-0000-000000000000"))
    for cred in ("", agent_cred):
        tag = "agent" if cred else "none"
        attempt(f"export-{tag}", shard.export_nodes.remote(cred, None, None, 100))
        attempt(f"inspect-{tag}", shard.inspect.remote(cred, "00000000-0000-0000-0000-000000000000"))
        attempt(f"stats-{tag}", shard.stats.remote(cred))
        attempt(f"count-{tag}", shard.count.remote(cred))
        attempt(f"list-all-{tag}", shard.list_memories.remote(None, {"limit": 100}, cred))
        attempt(f"decay-{tag}", shard.decay_sweep.remote(cred, time.time() + 50 * 365 * 86400, DecayPolicy()))
        attempt(f"hub-totals-{tag}", hub.totals.remote(cred))
        attempt(f"hub-publish-{tag}", hub.publish.remote(cred, []))
        attempt(f"close-{tag}", shard.close.remote(cred))
    attempt("hub-stats-other-org", hub.stats.remote(Context(victim_org)))
    attempt("subscribe-other-org", hub.cursors.remote("x", Context(victim_org)))
    try:
        decay = actors.lookup(actors.maintenance_name(config, "decay"), config.namespace)
    except ValueError:
        decay = None
    if decay is not None:
        attempt("decay-actor-future", decay.run_once.remote(time.time() + 50 * 365 * 86400, victim))
        attempt("decay-actor-all", decay.run_once.remote(None, None))
    return results


def test_a_hostile_task_calling_actors_by_name_gets_nothing_and_changes_nothing(bus):
    o = org()
    alice = Context(o, "alice")
    secret = bus.remember("alice's secret: the vault code is 4711", alice, scope="user")
    bus.run_decay(Context(o))  # the decay actor exists, so the task can find it too
    before = (bus.count(), bus.get(secret.id, alice).version)
    mallory = bus.issue_credential(o, "mallory")
    results = ray.get(hostile.remote(bus.config.without_secrets(), o, mallory), timeout=240)
    allowed = {k: v for k, v in results.items() if v == "ALLOWED"}
    assert not allowed, allowed
    assert results["recall-no-credential"] == "NotAuthenticated"
    assert results["recall-other-principal"] == "NotAuthorized"
    assert results["export-none"] == "NotAuthenticated" and results["export-agent"] == "NotAuthorized"
    assert results["decay-agent"] == "NotAuthorized"
    assert results["decay-actor-future"] == "NotAuthenticated"
    assert (bus.count(), bus.get(secret.id, alice).version) == before
    assert bus.recall("vault code", alice, k=1)[0].node.id == secret.id


def test_the_shard_limits_maintenance_time_even_for_the_operator(bus):
    from memorybus.config import DecayPolicy

    shard = actors.handle(bus.config, "shard", 0)
    with pytest.raises(ray.exceptions.RayTaskError) as exc:
        ray.get(shard.decay_sweep.remote(bus._credential, time.time() + 50 * 365 * 86400, DecayPolicy()))
    assert isinstance(exc.value.cause, mb.InvalidRequest)


def test_an_agent_handle_acts_as_its_principal_only(bus):
    o = org()
    bus.remember("bob's private note: allergic to peanuts", Context(o, "bob"), scope="user")
    alice = bus.as_agent(bus.issue_credential(o, "alice", "planner"))
    mine = alice.remember("alice likes green tea", scope="user")  # no context: the credential's
    assert (mine.scope.org, mine.scope.user) == (o, "alice")
    assert alice.recall("green tea")[0].node.id == mine.id
    narrower = Context(o, "alice", "planner", "s2")  # a session inside the credential: fine
    assert alice.recall("green tea", narrower)[0].node.id == mine.id
    assert all(h.node.scope.user in ("", "alice") for h in alice.recall("peanuts allergy", k=20))
    for wider in (Context(o, "bob"), Context(o), Context(o, "alice", "other")):
        with pytest.raises(mb.NotAuthorized):
            alice.recall("peanuts", wider)
    with pytest.raises(mb.NotAuthorized):
        alice.remember("I am the lead now", Context(o, "alice", "planner", roles={"lead"}))
    # operator calls from an agent's handle, refused before anything is sent
    operator_calls = [
        lambda: alice.export("/tmp/never-written.mbx"),
        alice.stats,
        alice.count,
        alice.hub_stats,
        lambda: alice.inspect(mine.id),
        alice.maintenance_status,
        alice.schedule_maintenance,
        lambda: alice.issue_credential(o, "alice", roles={"lead"}),
        lambda: alice.rotate_org_secret(o),
        alice.shutdown,
    ]
    for call in operator_calls:
        with pytest.raises(mb.NotAuthorized):
            call()
    own = Context(o, "alice", "planner")
    with pytest.raises(mb.NotAuthorized):
        alice.run_decay(own, now=time.time())  # explicit now: the operator's
    alice.run_decay(own)  # a sweep of its own scopes at the actor's clock is allowed
    with pytest.raises(mb.NotAuthorized):
        alice.run_decay(Context(o, "alice"))  # the whole user: wider than the credential


def test_roles_are_granted_by_credential_only(bus):
    o = org()
    lead = bus.as_agent(bus.issue_credential(o, "u1", "boss", roles={"lead"}))
    intern = bus.as_agent(bus.issue_credential(o, "u1", "intern"))
    first = lead.assert_fact("office/city", "Berlin", Context(o, "u1", "boss"), scope="user",
                             strategy="authority", confidence=0.6)  # fmt: skip
    assert first.current
    # the intern cannot claim the role, and without it cannot override the authority
    with pytest.raises(mb.NotAuthorized):
        intern.assert_fact("office/city", "Paris", Context(o, "u1", "intern", roles={"lead"}), scope="user",
                           strategy="authority", confidence=1.0)  # fmt: skip
    intern.assert_fact("office/city", "Paris", Context(o, "u1", "intern"), scope="user", strategy="authority",
                       confidence=1.0)  # fmt: skip
    assert bus.current_fact("office/city", Context(o, "u1"), scope="user").content == "Berlin"


def test_revocation_and_rotation_reach_every_actor_at_once(bus):
    o = org()
    cred = bus.issue_credential(o, "carol")
    carol = bus.as_agent(cred)
    carol.remember("carol's note")
    bus.revoke_credential(cred)
    with pytest.raises(mb.NotAuthenticated, match="revoked"):
        carol.recall("note")
    old = bus.as_agent(bus.issue_credential(o, "dave"))
    old.remember("dave's note")
    bus.rotate_org_secret(o, grace=0)
    with pytest.raises(mb.NotAuthenticated, match="retired"):
        old.recall("note")
    new = bus.as_agent(bus.issue_credential(o, "dave"))
    assert new.recall("dave's note")[0].node.content == "dave's note"


def test_an_agent_handle_pickles_without_storage_secrets_and_the_operators_does_not(bus):
    import pickle

    agent = bus.as_agent(bus.issue_credential(org(), "u1", ttl=60))
    copy = pickle.loads(pickle.dumps(agent))
    assert copy.whoami() == agent.whoami() and not copy.whoami().operator
    with pytest.raises(mb.NotAuthorized):
        pickle.dumps(bus)
    with pytest.raises(mb.InvalidRequest):
        bus.issue_credential(org(), "u1", ttl=0)
    with pytest.raises(mb.InvalidRequest):
        bus.issue_credential(None, "u1")
    with pytest.raises(mb.InvalidRequest):
        bus.as_agent("not a credential")


def test_trusted_mode_keeps_contexts_as_given(ray_local, tmp_path):
    cfg = Config.embedded(tmp_path, num_shards=1, namespace="trusted_t", auth="trusted", embedder_num_cpus=0.25)
    with mb.connect(cfg) as b:
        ctx = Context("acme", "u1", roles={"anything"})
        n = b.remember("trusted mode memory", ctx)
        assert b.recall("trusted mode memory", ctx, k=1)[0].node.id == n.id
        assert b.whoami() is None
