"""Credentials and the gate, driven without Ray: each test tries to get past a check.

Forged, tampered, expired, widened, revoked and rotated-out credentials; roles only
from the credential; a property test over random principals and contexts against a
real plain Shard (SQLite + Qdrant Edge): no admitted call ever sees a memory its
credential's scope does not cover.
"""

from __future__ import annotations

import base64
import os
import pickle
import stat
import time

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memorybus import Config, Context, ManualClock, MemoryNode, NotAuthenticated, NotAuthorized, ScopeViolation
from memorybus.auth import Gatekeeper, Grant, KeyRing, open_keys, peek
from memorybus.shard import Shard
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

DIM = 8


def ring_and_gate() -> tuple[KeyRing, Gatekeeper]:
    ring = KeyRing()
    ring.ensure("*")
    return ring, Gatekeeper(lambda: ring, refresh_seconds=0.0)


def mint(ring: KeyRing, org: str, user: str = "", agent: str = "", ttl: float = 60.0, **kw) -> str:
    key = ring.ensure(org)
    now = time.time()
    return Grant(org=org, user=user, agent=agent, issued=now, expires=now + ttl, kid=key.kid, **kw).sign(key.secret)


def test_a_valid_credential_admits_its_own_and_narrower_contexts():
    ring, gate = ring_and_gate()
    token = mint(ring, "acme", "alice", roles={"hr"})
    own = gate.admit(Context("acme", "alice", credential=token), "recall", write=False)
    assert own.roles == {"hr"} and own.levels == {"org", "user", "agent", "session"}
    narrower = gate.admit(Context("acme", "alice", "planner", "s9", credential=token), "recall", write=False)
    assert (narrower.agent, narrower.session) == ("planner", "s9")


def test_no_malformed_or_forged_credential_gets_in():
    ring, gate = ring_and_gate()
    token = mint(ring, "acme", "alice")
    head, body, sig = token.split(".")
    claims = msgpack.unpackb(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["u"] = "bob"  # widen the claims, keep the signature
    forged_body = base64.urlsafe_b64encode(msgpack.packb(claims)).rstrip(b"=").decode()
    other_ring = KeyRing()
    other_key = other_ring.ensure("acme")
    stolen_kid = Grant(org="acme", user="bob", expires=time.time() + 60, kid=ring.ensure("acme").kid)
    cases = {
        "": "no credential",
        "garbage": "not a memorybus credential",
        f"{head}.{forged_body}.{sig}": "bad signature",
        f"{head}.{body}.{sig[:-4]}AAAA": "bad signature",
        stolen_kid.sign(other_key.secret): "bad signature",  # right key id, another secret
        f"{head}.!!!.{sig}": "malformed",
        "x" * 10_000: "too long",
    }
    for bad, why in cases.items():
        with pytest.raises(NotAuthenticated) as exc:
            gate.admit(Context("acme", "bob", credential=bad), "recall", write=False)
        assert why in str(exc.value), (bad[:40], str(exc.value))


def test_one_orgs_secret_never_signs_for_another_org():
    ring, gate = ring_and_gate()
    acme_key = ring.ensure("acme")
    ring.ensure("initech")
    now = time.time()
    cross = Grant(org="initech", user="x", issued=now, expires=now + 60, kid=acme_key.kid).sign(acme_key.secret)
    with pytest.raises(NotAuthenticated, match="unknown or retired key"):
        gate.admit(Context("initech", "x", credential=cross), "recall", write=False)
    # nor may an org key sign an operator credential
    op = Grant(org="*", operator=True, issued=now, expires=now + 60, kid=acme_key.kid).sign(acme_key.secret)
    with pytest.raises(NotAuthenticated):
        gate.operator(op, "export")


def test_expired_and_future_credentials_are_refused():
    ring, gate = ring_and_gate()
    key = ring.ensure("acme")
    now = time.time()
    expired = Grant(org="acme", issued=now - 100, expires=now - 1, kid=key.kid).sign(key.secret)
    future = Grant(org="acme", issued=now + 3600, expires=now + 7200, kid=key.kid).sign(key.secret)
    for token, why in ((expired, "expired"), (future, "future")):
        with pytest.raises(NotAuthenticated, match=why):
            gate.admit(Context("acme", credential=token), "recall", write=False)
    # a cached grant that expires meanwhile is refused too
    clock = [now]
    gate = Gatekeeper(lambda: ring, clock=lambda: clock[0])
    short = Grant(org="acme", issued=now, expires=now + 5, kid=key.kid).sign(key.secret)
    gate.admit(Context("acme", credential=short), "recall", write=False)
    clock[0] = now + 6
    with pytest.raises(NotAuthenticated, match="expired"):
        gate.admit(Context("acme", credential=short), "recall", write=False)


def test_widened_contexts_roles_and_rights_are_refused():
    ring, gate = ring_and_gate()
    alice = mint(ring, "acme", "alice", "planner", roles={"lead"}, rights={"read"})
    widened = [
        Context("acme", credential=alice),  # the org, wider than alice
        Context("acme", "bob", "planner", credential=alice),  # another user
        Context("acme", "alice", "other", credential=alice),  # another agent
        Context("initech", "alice", "planner", credential=alice),  # another org
        Context("acme", "alice", "planner", roles={"hr"}, credential=alice),  # a role not granted
    ]
    for ctx in widened:
        with pytest.raises(NotAuthorized):
            gate.admit(ctx, "recall", write=False)
    with pytest.raises(NotAuthorized, match="write right"):
        gate.admit(Context("acme", "alice", "planner", credential=alice), "remember", write=True)
    with pytest.raises(NotAuthorized, match="operator call"):
        gate.operator(alice, "export")


def test_roles_come_from_the_credential_never_from_the_caller():
    ring, gate = ring_and_gate()
    plain = mint(ring, "acme", "alice")
    with pytest.raises(NotAuthorized):
        gate.admit(Context("acme", "alice", roles={"lead"}, credential=plain), "assert_fact", write=True)
    lead = mint(ring, "acme", "alice", roles={"lead"})
    # even a caller that names no role acts with the credential's
    assert gate.admit(Context("acme", "alice", credential=lead), "assert_fact", write=True).roles == {"lead"}


def test_revoked_and_rotated_out_credentials_are_refused_when_replayed():
    ring, gate = ring_and_gate()
    token = mint(ring, "acme", "alice")
    ctx = Context("acme", "alice", credential=token)
    gate.admit(ctx, "recall", write=False)  # admitted (and remembered)
    ring.revoke(peek(token).id, peek(token).expires)
    with pytest.raises(NotAuthenticated, match="revoked"):
        gate.admit(ctx, "recall", write=False)
    old = mint(ring, "acme", "bob")
    gate.admit(Context("acme", "bob", credential=old), "recall", write=False)
    ring.rotate("acme", grace=0)
    gate.reload()
    with pytest.raises(NotAuthenticated, match="retired"):
        gate.admit(Context("acme", "bob", credential=old), "recall", write=False)
    fresh = mint(ring, "acme", "bob")  # signed with the new key
    assert gate.admit(Context("acme", "bob", credential=fresh), "recall", write=False).user == "bob"


def test_rotation_with_grace_keeps_old_credentials_until_then(tmp_path):
    kv = open_keys(Config.embedded(tmp_path))
    ring = KeyRing.load(kv)
    old = mint(ring, "acme", "alice")
    ring.rotate("acme", grace=3600)
    gate = Gatekeeper(lambda: KeyRing.load(kv), refresh_seconds=0.0)
    assert gate.admit(Context("acme", "alice", credential=old), "recall", write=False).user == "alice"
    assert len([k for k in KeyRing.load(kv).keys.values() if k.owner == "acme"]) == 2
    kv.close()


def test_the_key_ring_file_is_readable_by_its_owner_only(tmp_path):
    kv = open_keys(Config.embedded(tmp_path))
    KeyRing.load(kv).ensure("*")
    kv.close()
    mode = stat.S_IMODE(os.stat(tmp_path / "auth.sqlite").st_mode)
    assert mode & 0o077 == 0, oct(mode)


def test_trusted_mode_takes_contexts_as_given():
    gate = Gatekeeper(None)
    ctx = Context("acme", "alice", roles={"anything"})
    assert gate.admit(ctx, "recall", write=False) is ctx
    assert gate.operator("", "export") is None


def test_grants_pickle_and_errors_round_trip():
    err = NotAuthorized("export", "an operator call")
    back = pickle.loads(pickle.dumps(err))
    assert (type(back), str(back)) == (NotAuthorized, str(err))
    err2 = pickle.loads(pickle.dumps(NotAuthenticated("bad signature")))
    assert str(err2) == "not authenticated: bad signature"


# ------------------------------------------------ property: 0 leaks over random principals
NAMES = st.sampled_from(["", "a", "b"])


@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    """A plain shard holding one memory in every scope of two orgs x users x agents x sessions."""
    path = tmp_path_factory.mktemp("prop")
    shard = Shard("shard-0", SqliteStore(path / "r.sqlite"), EdgeVectorIndex(path / "v", DIM), dim=DIM,
                  clock=ManualClock(), dedupe=False, detect_contradictions=False)
    rng = np.random.default_rng(0)
    nodes = []
    for org in ("o1", "o2"):
        for user in ("", "a", "b"):
            for agent in ("", "a", "b") if user else ("",):
                for session in ("", "a", "b") if agent else ("",):
                    ctx = Context(org, user, agent, session)
                    v = rng.normal(size=(1, DIM)).astype(np.float32)
                    content = f"memory of {ctx.scope.key!r}"
                    nodes += shard.put_many(ctx, [MemoryNode(content=content, scope=ctx.scope)], v / np.linalg.norm(v))
    yield shard, nodes
    shard.close()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(grant=st.tuples(st.sampled_from(["o1", "o2"]), NAMES, NAMES, NAMES),
       asked=st.tuples(st.sampled_from(["o1", "o2"]), NAMES, NAMES, NAMES),
       levels=st.frozensets(st.sampled_from(["org", "user", "agent", "session"]), min_size=1))
def test_no_admitted_call_sees_or_writes_outside_its_credential(populated, grant, asked, levels):
    shard, nodes = populated
    ring, gate = ring_and_gate()
    org, user, agent, session = grant
    key = ring.ensure(org)
    now = time.time()
    token = Grant(org=org, user=user, agent=agent, session=session, levels=levels, issued=now,
                  expires=now + 60, kid=key.kid).sign(key.secret)
    try:
        ctx = Context(*asked, credential=token)
    except Exception:
        return  # not a context at all (e.g. an agent without a user is fine, this is not reached)
    try:
        admitted = gate.admit(ctx, "recall", write=False)
    except NotAuthorized:
        # refused only when the context really lies outside the credential
        assert any(g and g != a for g, a in zip(grant, asked, strict=True))
        return
    granted = Context(org, user, agent, session)
    seen = {n.id for n in shard.list_memories(admitted, limit=1000)}
    for node in nodes:
        if node.id in seen:
            # everything seen is visible to the asked context, which lies inside the credential
            assert node.scope.visible_to(admitted)
            assert all(not g or g == f for g, f in zip(grant, admitted.scope.as_tuple(), strict=True))
        for value, field in zip(granted.scope.as_tuple(), node.scope.as_tuple(), strict=True):
            if value and field and value != field:
                assert node.id not in seen  # a scope naming another principal is never seen
    # writes: only within the credential's levels
    wctx = gate.admit(ctx, "remember", write=True)
    target = wctx.scope
    node = MemoryNode(content="probe", scope=target)
    v = np.ones((1, DIM), dtype=np.float32) / np.sqrt(DIM)
    if target.level.value in levels:
        shard.delete(wctx, shard.put_many(wctx, [node], v)[0].id)
    else:
        with pytest.raises(ScopeViolation):
            shard.put_many(wctx, [node], v)
