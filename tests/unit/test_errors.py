import pickle

import pytest

from memorybus import errors as E

CASES = [
    E.InvalidMemory("confidence", "1.5 is outside 0..1"),
    E.InvalidRequest("k", "must be positive"),
    E.ConfigError("num_shards", "must be >= 1"),
    E.VersionConflict("user:u1/lang", 3, 4),
    E.MemoryNotFound("abc"),
    E.ScopeViolation("read"),
    E.StoreUnavailable("redis", "connection refused"),
    E.ActorUnavailable("memorybus:shard-2", "The actor died unexpectedly before finishing this task."),
    E.Unavailable("plain"),
    E.ActorFailed("HubActor.ready", "AssertionError: Expected str or bytes, got NoneType"),
    E.DataDirInUse("/data/shard-0", "pid=7 host=h namespace=a"),
    E.OutcomeUnknown("redis", "Timeout reading from socket", "op-17"),
    E.PartialWrite("op-3", [None, "stored"], {}),
    E.OperationTimeout(2.5, "op-4"),
    E.StoreMismatch("shard-0", "its store is missing"),
    E.IndexUnavailable("qdrant-edge", "broken"),
    E.EmbeddingError("bad shape"),
    E.BusClosed("memorybus", "closed"),
    E.HookFailed("bus.judge", "raised TypeError: unsupported operand"),
    E.MemoryBusError("plain"),
]


@pytest.mark.parametrize("err", CASES, ids=lambda e: type(e).__name__)
def test_errors_pickle_round_trip_with_message_and_fields(err):
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err)
    assert back.__dict__ == err.__dict__
    assert isinstance(back, E.MemoryBusError)


def test_hierarchy():
    assert issubclass(E.InvalidMemory, ValueError)
    assert issubclass(E.InvalidRequest, ValueError)
    v = E.VersionConflict("k", 1, 2)
    assert (v.key, v.expected, v.actual) == ("k", 1, 2)
    assert "expected version 1" in str(v) and "found 2" in str(v)
    assert "confidence" in str(E.InvalidMemory("confidence", "x"))


def test_partial_write_round_trip_keeps_per_item_errors():
    err = E.PartialWrite("op-3", [None, "stored"], {0: E.StoreUnavailable("sqlite", "database is locked")})
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and back.op_id == "op-3" and back.stored == [None, "stored"]
    assert type(back.errors[0]) is E.StoreUnavailable and str(back.errors[0]) == str(err.errors[0])


def test_an_actors_foreign_error_reaches_the_caller_as_a_memorybus_error_naming_the_actor():
    """What connect once raised bare (issue 32): an AssertionError inside the hub actor's
    ready(). The caller gets ActorFailed naming the actor's call and the cause; a
    memorybus error raised inside an actor still arrives as itself."""
    import ray.exceptions as rex

    from memorybus.actors.runtime import unwrap

    bare = AssertionError("Expected str or bytes, got <class 'NoneType'>")
    err = unwrap(rex.RayTaskError("HubActor.ready", "Traceback ...", bare))
    assert type(err) is E.ActorFailed and err.actor == "HubActor.ready"
    assert "AssertionError: Expected str or bytes" in str(err) and err.__cause__ is bare
    ours = E.StoreMismatch("shard-0", "its store is missing")
    assert unwrap(rex.RayTaskError("ShardActor.identity", "Traceback ...", ours)) is ours
