"""The audit trail through the real bus (Ray actors, embedded SQLite): ``bus.audit``
names who read and wrote what, holds no content, and ``memorybus audit verify`` on
the bus's data dir passes, then fails once an entry is deleted from the file."""

from __future__ import annotations

import glob
import json
import sqlite3
import uuid

import pytest

import memorybus as mb
from memorybus import Config, Context, InvalidRequest
from memorybus.cli import main as cli

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]
MARKER = "QV-AUDIT-MARKER-5521"


def test_bus_audit_names_principals_and_the_cli_catches_a_deleted_entry(ray_local, tmp_path, capsys):
    data = tmp_path / "bus"
    org = f"org{uuid.uuid4().hex[:6]}"
    u1, u2 = Context(org, "u1", "planner"), Context(org, "u2", "writer")
    with mb.connect(Config.embedded(data, num_shards=2, namespace=f"au{org}", embedder_num_cpus=0.4)) as bus:
        # each agent acts through its own credential: the audit names that credential
        planner, writer = bus.agent_handle(org, "u1", "planner"), bus.agent_handle(org, "u2", "writer")
        p_name, w_name = planner.whoami().principal, writer.whoami().principal
        assert p_name == f"{org}/u1/planner#{planner.whoami().id}"
        a = planner.remember(f"The vault code is {MARKER}", u1)
        b = writer.remember("Tea is served at four", u2)
        planner.recall("what is the vault code?", u1, k=3)
        planner.get(a.id, u1)
        writer.forget(b.id, u2)
        bus.get(a.id, u1)  # the operator acting for a context is named as the operator
        entries = bus.audit(org)
        assert MARKER not in json.dumps(entries)
        mine = [(e["principal"], e["operation"]) for e in entries if a.id in e["ids"]]
        assert (p_name, "put_many") in mine and (p_name, "get") in mine
        assert (p_name, "recall") in mine
        assert (bus.whoami().principal, "get") in mine
        theirs = bus.audit(org, principal=w_name)
        assert [e["operation"] for e in theirs] == ["put_many", "delete"] and all(e["ids"] == [b.id] for e in theirs)
        with pytest.raises(mb.NotAuthorized):
            planner.audit(org)  # the audit is the operator's
        assert bus.audit(org, since=entries[-1]["at"] + 1) == []
        assert bus.audit("nobody") == []
        with pytest.raises(InvalidRequest):
            bus.audit(org, limit=0)
        assert cli(["audit", "verify", "--data-dir", str(data)]) == 0  # beside the running bus
    capsys.readouterr()
    files = sorted(glob.glob(str(data / "shard-*" / "records.sqlite")))
    longest = max(files, key=lambda f: sqlite3.connect(f).execute("SELECT count(*) FROM audit").fetchone()[0])
    with sqlite3.connect(longest) as db:
        db.execute("DELETE FROM audit WHERE org=? AND seq=1", (org,))
    assert cli(["audit", "verify", "--data-dir", str(data)]) == 1
    assert f"{org}: TAMPERED at seq 1: removed" in capsys.readouterr().out
