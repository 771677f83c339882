"""The recall request's wire format (memorybus.retrieval.wire): a fixed msgpack schema
read field by field. Whatever bytes arrive (a pickle, a forged map, a bomb), the shard
gets a valid RecallRequest or InvalidRequest, and never runs the sender's code."""

from __future__ import annotations

import pickle

import msgpack
import numpy as np
import pytest

from memorybus.errors import InvalidRequest
from memorybus.memory.model import MemoryKind, MemoryStatus
from memorybus.retrieval.options import RecallOptions
from memorybus.retrieval.wire import MAX_PACKED, RecallRequest, pack_request, unpack_request, vector_bytes
from memorybus.scopes import Context
from tests.unit.test_direct_channel import Plant

CTX = Context("acme", "u1", "planner", "s1", roles={"lead", "ops"}, credential="mbc1.abc.def")
FULL = RecallRequest(CTX, 7, [MemoryKind.EPISODIC], [MemoryStatus.ACTIVE, MemoryStatus.ARCHIVED], "deploy?",
                     RecallOptions(start=1.0, end=2e9, neighbors=2, touch=False, min_relevance=0.3,
                                   key_prefix="lg/"),
                     vector_bytes(np.arange(8, dtype=np.float32)))  # fmt: skip


def test_every_field_survives_the_round_trip():
    for request in (FULL, RecallRequest(Context("acme"), 1, None, None, None, None)):
        got = unpack_request(pack_request(request))
        assert got == request
        assert got.context.credential == request.context.credential  # not part of Context equality
        assert got.context.roles == request.context.roles and got.context.levels is None


def test_a_pickle_runs_no_code_and_is_invalid(tmp_path):
    planted = tmp_path / "planted"
    for blob in (pickle.dumps(Plant(str(planted))), pickle.dumps(FULL), pickle.dumps({"v": 1})):
        with pytest.raises(InvalidRequest, match="not a packed recall request"):
            unpack_request(blob)
    assert not planted.exists()


def packed(**changes):
    m = msgpack.unpackb(pack_request(FULL), raw=False)
    for path, value in changes.items():
        where, *rest = path.split("__")
        if rest:
            m[where][rest[0]] = value
        elif value is KeyError:
            del m[where]
        else:
            m[where] = value
    return msgpack.packb(m, use_bin_type=True)


@pytest.mark.parametrize("changes", [
    {"v": 2}, {"v": KeyError}, {"k": KeyError}, {"extra": 1}, {"k": True}, {"k": 0}, {"k": 1001}, {"k": "5"},
    {"kinds": ["secret"]}, {"kinds": "episodic"}, {"kinds": [1]}, {"statuses": ["active"] * 65},
    {"q": 5}, {"q": b"bytes"}, {"vec": "float"}, {"vec": b"\0" * 5}, {"vec": b""}, {"vec": b"\0" * (65 << 10)},
    {"ctx": ["acme"]}, {"ctx__org": ""}, {"ctx__org": 5}, {"ctx__user": "x" * 300}, {"ctx__session": "a\nb"},
    {"ctx__roles": "lead"}, {"ctx__roles": [""]}, {"ctx__credential": 5}, {"ctx__credential": "c" * 9000},
    {"ctx__levels": ["org"]}, {"opt": [1, 2]}, {"opt__touch": 1}, {"opt__neighbors": 5000},
    {"opt__neighbors": 1.5}, {"opt__start": "yesterday"}, {"opt__start": float("nan")}, {"opt__start": -5},
    {"opt__min_relevance": 2.0}, {"opt__key_prefix": ""}, {"opt__key_prefix": 3}, {"opt__evil": 1},
])  # fmt: skip
def test_a_field_of_the_wrong_type_or_size_is_invalid(changes):
    with pytest.raises(InvalidRequest):
        unpack_request(packed(**changes))


@pytest.mark.parametrize("blob", [
    b"", b"\xc1", b"not msgpack at all", msgpack.packb([1, 2, 3]), msgpack.packb({1: 2}),
    msgpack.packb(msgpack.ExtType(5, b"x")), b"\x91" * 100_000,  # arrays nested 100,000 deep
    msgpack.packb(list(range(10_000))), msgpack.packb({str(i): i for i in range(1000)}),
    b"\xdb\xff\xff\xff\xff",  # a string that claims 4 GiB
])  # fmt: skip
def test_malformed_bytes_are_invalid(blob):
    with pytest.raises(InvalidRequest):
        unpack_request(blob)


def test_an_oversized_blob_or_a_non_bytes_argument_is_invalid():
    with pytest.raises(InvalidRequest, match="larger than"):
        unpack_request(b"\0" * (MAX_PACKED + 1))
    for value in (FULL, "text", None, 5):
        with pytest.raises(InvalidRequest):
            unpack_request(value)
