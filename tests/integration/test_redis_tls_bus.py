"""A whole bus (Ray actors, the model) whose every Redis connection is mutual TLS: the
driver's checks at connect, every shard's store, the hubs' state and the key ring all
open ``rediss://`` with the test CA and the client certificate; the server admits
nothing else."""

from __future__ import annotations

import time
import uuid

import pytest

import memorybus as mb
from memorybus import Config, Context
from tests.tls_ca import TlsRedisServer, make_pki

pytestmark = [pytest.mark.ray, pytest.mark.redis, pytest.mark.model, pytest.mark.timeout(300)]


def test_a_bus_on_mutual_tls_redis_remembers_and_recalls(ray_local, tmp_path):
    pki = make_pki(tmp_path / "pki")
    (tmp_path / "redis").mkdir()
    server = TlsRedisServer(tmp_path / "redis", pki, mutual=True, password="bus-" + uuid.uuid4().hex)
    server.start()
    try:
        cfg = Config.redis(server.url, data_dir=str(tmp_path / "data"), num_shards=2,
                           namespace=f"tls{uuid.uuid4().hex[:6]}", redis_tls_ca=str(pki.ca),
                           redis_tls_cert=str(pki.client_cert), redis_tls_key=str(pki.client_key))
        bus = mb.connect(cfg)
        try:
            ctx = Context("acme", "alice", "planner")
            got: list[mb.Event] = []
            sub = bus.subscribe(ctx, callback=got.extend, name="feed")  # durable: its state in the hub's KV
            facts = ["Alice's team deploys on Thursdays", "The staging database is Postgres 16",
                     "Bob reviews every migration before it ships"]
            ids = [bus.remember(text, ctx, scope="user").id for text in facts]
            hits = bus.recall("which database does staging run?", ctx, k=3)
            assert hits and hits[0].node.content == "The staging database is Postgres 16"
            assert bus.get(ids[0], ctx).content == facts[0]
            deadline = time.time() + 60
            while len(got) < 3 and time.time() < deadline:
                time.sleep(0.1)
            assert [e.node.content for e in got] == facts  # the event log, read over TLS
            sub.stop()
        finally:
            bus.shutdown()
        admin = server.admin()
        # the records, the hubs' state and the key ring are all on the TLS server
        names = {k.decode() for k in admin.scan_iter(count=1000)}
        assert any(":auth}" in n for n in names) and any(":bus-" in n for n in names)
        assert sum(1 for n in names if ":shard-" in n) >= 3
    finally:
        server.stop()
