import pytest
from hypothesis import given
from hypothesis import strategies as st

from memorybus import Context, InvalidRequest, Level, Scope
from memorybus.scopes import Router

field = st.sampled_from(["", "a", "b"])
org = st.sampled_from(["o1", "o2"])


def test_visibility_rule():
    ctx = Context("acme", "u1", "planner", "s1")
    assert Scope("acme").visible_to(ctx)
    assert Scope("acme", "u1").visible_to(ctx)
    assert Scope("acme", "u1", "planner", "s1").visible_to(ctx)
    assert Scope("acme", "", "planner").visible_to(ctx)
    assert not Scope("acme", "u2").visible_to(ctx)
    assert not Scope("acme", "u1", "", "s2").visible_to(ctx)
    assert not Scope("other").visible_to(ctx)
    # a context without a session does not see session memories
    assert not Scope("acme", "u1", "", "s1").visible_to(Context("acme", "u1"))


def test_visible_scopes_enumerates_exactly_the_visible_ones():
    ctx = Context("acme", "u1", "", "s1")
    got = {s.as_tuple() for s in ctx.visible_scopes()}
    assert got == {
        ("acme", "", "", ""),
        ("acme", "u1", "", ""),
        ("acme", "", "", "s1"),
        ("acme", "u1", "", "s1"),
    }


def test_widen_never_narrows():
    s = Scope("acme", "u1", "a1", "s1")
    assert s.widen("user") == Scope("acme", "u1")
    assert s.widen(Level.ORG) == Scope("acme")
    assert Scope("acme").widen("session") == Scope("acme")
    assert Scope("acme", "u1").widen("agent") == Scope("acme", "u1")


def test_resolve_scope_levels():
    ctx = Context("acme", "u1", "a1")
    assert ctx.resolve_scope("user") == Scope("acme", "u1")
    assert ctx.resolve_scope(None) == Scope("acme", "u1", "a1")
    with pytest.raises(InvalidRequest):
        ctx.resolve_scope("session")
    with pytest.raises(InvalidRequest):
        ctx.resolve_scope("galaxy")


def test_scope_key_round_trip():
    s = Scope("acme", "u1", "", "s9")
    assert Scope.from_key(s.key) == s


@given(org, field, field, field, org, field, field, field)
def test_context_never_sees_memory_with_differing_nonempty_field(mo, mu, ma, ms, co, cu, ca, cs):
    mem = Scope(mo, mu, ma, ms)
    ctx = Context(co, cu, ca, cs)
    differs = any(m and m != c for m, c in zip(mem.as_tuple(), ctx.scope.as_tuple(), strict=True))
    assert mem.visible_to(ctx) == (not differs)
    # and the fan-out set agrees with the rule
    assert (mem in ctx.visible_scopes()) == mem.visible_to(ctx)


def test_rendezvous_routing_is_stable_when_shards_are_added():
    keys = [Scope("o", f"u{i}").key for i in range(2000)]
    r4, r5 = Router(4), Router(5)
    moved = 0
    for k in keys:
        a, b = r4.shard_for(k), r5.shard_for(k)
        if a != b:
            assert b == 4, "a key may only move to the added shard"
            moved += 1
    assert 0.1 < moved / len(keys) < 0.3  # about 1/5 move
    # and removing a shard moves only that shard's keys
    r3 = Router(3)
    for k in keys:
        if r4.shard_for(k) != 3:
            assert r3.shard_for(k) == r4.shard_for(k)


def test_routing_spreads_keys():
    r = Router(4)
    counts = [0] * 4
    for i in range(4000):
        counts[r.shard_for(Scope("o", f"u{i}").key)] += 1
    assert min(counts) > 800


def test_default_write_scope_is_the_writer_without_the_session():
    from memorybus import Context, Scope

    ctx = Context("acme", "u1", "planner", "s1")
    assert ctx.default_scope() == Scope("acme", "u1", "planner")
    assert ctx.default_scope("semantic") == Scope("acme", "u1", "planner")
    assert ctx.default_scope("working") == ctx.scope  # scratch stays in the session
    assert Context("acme", "u1", session="s1").default_scope() == Scope("acme", "u1")
    assert Context("acme").default_scope() == Scope("acme")
