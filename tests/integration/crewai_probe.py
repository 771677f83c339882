"""Run inside the CrewAI venv by test_crewai_storage.py: BusStorage against CrewAI's own
``StorageBackend`` protocol and ``crewai.Memory`` on a real local bus (real model, no LLM:
every remember names its scope, categories and importance, and recalls are shallow, so
CrewAI calls no model of its own). Exits non-zero on the first failed check.

``python -m tests.integration.crewai_probe WORKDIR``: on the Ray ``RAY_ADDRESS`` names, else a local
one of its own.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
from pathlib import Path

import ray
from crewai import Memory
from crewai.memory.storage.backend import StorageBackend
from crewai.memory.types import MemoryRecord

import memorybus as mb
from memorybus.integrations.crewai import BusStorage
from tests.doc_blocks import blocks

ROOT = Path(__file__).resolve().parents[2]


def check(ok: bool, what: str) -> None:
    if not ok:
        raise AssertionError(what)
    print("ok:", what, flush=True)


def protocol(storage: BusStorage) -> None:
    check(isinstance(storage, StorageBackend), "BusStorage is a crewai StorageBackend (runtime_checkable)")
    for name, member in vars(StorageBackend).items():
        if name.startswith("_") or not callable(member):
            continue
        theirs, ours = inspect.signature(member), inspect.signature(getattr(BusStorage, name))
        check(list(theirs.parameters) == list(ours.parameters), f"{name} takes the protocol's parameters")
        defaults = [(p.name, p.default) for p in theirs.parameters.values()]
        check(defaults == [(p.name, p.default) for p in ours.parameters.values()], f"{name} has its defaults")
        check(inspect.iscoroutinefunction(member) == inspect.iscoroutinefunction(getattr(BusStorage, name)),
              f"{name} is async exactly when the protocol's is")  # fmt: skip


def memory_api(bus: mb.MemoryBus) -> None:
    alice = mb.Context("acme", "alice", "researcher")
    storage = BusStorage(bus, alice)
    protocol(storage)
    memory = Memory(storage=storage, embedder=storage.embedder, llm="no-llm-is-called")
    facts = [("We chose PostgreSQL as the database for the billing service", "/project/billing", ["decision"]),
             ("The billing service deploys every Tuesday after the standup", "/project/billing", ["process"]),
             ("The mobile app's login screen uses a blue theme", "/project/mobile", ["design"])]  # fmt: skip
    saved = [memory.remember(text, scope=s, categories=c, importance=0.8) for text, s, c in facts]
    check(all(isinstance(r, MemoryRecord) for r in saved), "Memory.remember returns CrewAI records")
    check(storage.count() == 3 and memory.info("/").record_count == 3, "three records on the bus")
    hits = memory.recall("which database did we pick for billing?", limit=2, depth="shallow")
    check(bool(hits) and hits[0].record.id == saved[0].id, "Memory.recall ranks the database decision first")
    check(hits[0].record.categories == ["decision"] and hits[0].record.scope == "/project/billing",
          "a recalled record keeps its CrewAI scope and categories")  # fmt: skip
    only_mobile = memory.recall("which database did we pick for billing?", scope="/project/mobile", depth="shallow")
    check([m.record.id for m in only_mobile] in ([], [saved[2].id]), "recall honours the scope prefix")
    vec = storage.embedder(["which database did we pick?"])[0]
    loose = storage.search(vec, limit=10, min_score=0.0)
    floor = max(s for _, s in loose) + 1e-6
    check(len(loose) == 3 and storage.search(vec, min_score=floor) == [], "min_score is a floor on relevance")
    check([r.id for r, _ in storage.search(vec, categories=["design"])] == [saved[2].id], "category filter")
    check(len(asyncio.run(storage.asearch(vec, limit=1))) == 1, "asearch answers like search")
    check(memory.list_scopes("/") == ["/project"] and memory.list_scopes("/project") ==
          ["/project/billing", "/project/mobile"], "list_scopes gives immediate children")  # fmt: skip
    check(memory.list_categories() == {"decision": 1, "process": 1, "design": 1}, "list_categories counts")
    check([r.id for r in memory.list_records()] == [r.id for r in reversed(saved)], "list_records newest first")
    memory.update(saved[1].id, content="The billing service deploys every Thursday after the standup")
    check("Thursday" in storage.get_record(saved[1].id).content, "Memory.update replaces the record")
    again = MemoryRecord(id=saved[0].id, content="We moved billing's database to CockroachDB",
                         scope="/project/billing", categories=["decision"])  # fmt: skip
    storage.save([again])
    check(storage.get_record(saved[0].id).content == again.content and storage.count() == 3,
          "save of a stored record id replaces it")  # fmt: skip
    # another user's crew does not see alice's agent-level records: the bus enforces it
    bob = BusStorage(bus, mb.Context("acme", "bob", "researcher"))
    bob_vec = bob.embedder(["which database did we pick for billing?"])[0]
    check(bob.search(bob_vec) == [] and bob.count() == 0, "bob's storage sees none of alice's records")
    # an org-level storage shares the crew memory with every agent of the org
    org_storage = BusStorage(bus, alice, level="org")
    shared = Memory(storage=org_storage, embedder=org_storage.embedder, llm="none")
    shared.remember("Releases need two approvals", scope="/policy", categories=["policy"], importance=0.9)
    check([r.content for r, _ in bob.search(bob_vec, scope_prefix="/policy")] == ["Releases need two approvals"],
          "an org-level record reaches bob's recall")  # fmt: skip
    check(bob.delete() == 0 and bob.count() == 1, "bob cannot delete what his storage did not write")
    policy = bob.list_records("/policy")[0]
    try:
        bob.update(policy.model_copy(update={"content": "Releases need no approval"}))
        check(False, "bob's storage updated a record of alice's org storage")
    except mb.ScopeViolation:
        check(bob.get_record(policy.id).content == "Releases need two approvals", "another storage's record is read-only")
    # forget and reset remove only this storage's records
    plain = bus.remember("Alice's own note: billing budget is 40k", alice)
    check(memory.forget(record_ids=[saved[2].id]) == 1 and storage.count("/project") == 2, "Memory.forget by id")
    memory.reset(scope="/project")
    check(storage.count("/project") == 0 and bus.get(plain.id, alice).content.startswith("Alice's"),
          "Memory.reset removes this storage's records, not the bus's other memories")  # fmt: skip
    check(storage.count() == 1 and shared.info("/").record_count == 1,
          "reset of one storage leaves the org storage's records, which it still reads")
    memory.close()
    shared.close()


def docs_block(work: Path) -> None:
    """The CrewAI block of docs/integrations.md, run as written in a fresh directory."""
    found = [b for b in blocks(ROOT / "docs" / "integrations.md") if "crewai" in b.code and b.lang == "python"]
    check(len(found) == 1 and found[0].not_run is not None, "docs/integrations.md has one CrewAI block")
    os.chdir(work)
    exec(compile(found[0].code, f"integrations.md:{found[0].line}", "exec"), {"__name__": "__main__"})
    check(True, "the docs block ran")


def main() -> None:
    work = Path(sys.argv[1])
    if os.environ.get("RAY_ADDRESS"):  # the tests' shared Ray (its embedder pool has the model loaded)
        ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False, configure_logging=False)
    else:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        bus = mb.connect(mb.Config.embedded(work / "bus", num_shards=2, namespace="crewai_t"))
        try:
            memory_api(bus)
        finally:
            bus.shutdown()
        (work / "doc").mkdir()
        docs_block(work / "doc")
    finally:
        ray.shutdown()
    print("ALL OK")


if __name__ == "__main__":
    main()
