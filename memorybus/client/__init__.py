"""The client: ``memorybus.connect(config)`` returns a :class:`MemoryBus`.

A MemoryBus pickles to its config, so it can be passed into Ray tasks and
actors and used there. Each operation is defined once, as an operation generator
in a module of this package (:mod:`~memorybus.client.memories`,
:mod:`~memorybus.client.recall`, :mod:`~memorybus.client.facts`,
:mod:`~memorybus.client.subscriptions`, :mod:`~memorybus.client.maintenance`,
:mod:`~memorybus.client.listing`, :mod:`~memorybus.client.admin`,
:mod:`~memorybus.client.erasure`, :mod:`~memorybus.client.audit`);
:func:`~memorybus.client.operation.operations` makes its sync method here and
its ``*_async`` twin, one line each, with the same signature and time limit. Connecting and
closing are in :mod:`~memorybus.client.life`.
"""

from __future__ import annotations

from typing import Any

from memorybus.auth import Grant
from memorybus.client import (
    admin,
    audit,
    erasure,
    facts,
    identity,
    life,
    listing,
    maintenance,
    memories,
    queries,
    subscriptions,
)
from memorybus.client.handle import BusHandle
from memorybus.client.operation import operations
from memorybus.config import Config
from memorybus.errors import MemoryBusError, NotAuthorized
from memorybus.scopes import Level


class MemoryBus(BusHandle):
    """A handle on the memory bus. Cheap to pickle; actors are found by name.

    Get one from :func:`connect`; use it as a context manager or call :meth:`close`
    (see :mod:`memorybus.client.life`). Calls on a closed handle raise ``BusClosed``.
    Every operation has an ``*_async`` twin (``await bus.recall_async(...)``).
    """

    # ------------------------------------------------------------- operations
    remember, remember_async = operations(memories.remember, "write")
    remember_many, remember_many_async = operations(memories.remember_many, "write")
    remember_turns, remember_turns_async = operations(memories.remember_turns, "write")
    get, get_async = operations(memories.get, "read")
    update, update_async = operations(memories.update, "write")
    forget, forget_async = operations(memories.forget, "write")
    flush, flush_async = operations(memories.flush, 60)
    count, count_async = operations(memories.count, 60)

    recall, recall_async = operations(queries.recall, "read")
    context_for, context_for_async = operations(queries.context_for, "read")
    embed, embed_async = operations(queries.embed, "read")
    list_memories, list_memories_async = operations(listing.list_memories, "read")

    assert_fact, assert_fact_async = operations(facts.assert_fact, "write")
    assert_facts, assert_facts_async = operations(facts.assert_facts, "write")
    remember_fact, remember_fact_async = operations(facts.remember_fact, "write")
    current_fact, current_fact_async = operations(facts.current_fact, "read")
    history, history_async = operations(facts.history, "read")
    source_reliability, source_reliability_async = operations(facts.source_reliability, "read")
    broadcast, broadcast_async = operations(facts.broadcast, "write")

    subscribe, subscribe_async = operations(subscriptions.subscribe, 120)
    unsubscribe, unsubscribe_async = operations(subscriptions.unsubscribe, 60)
    subscription_cursors, subscription_cursors_async = operations(subscriptions.subscription_cursors, 60)
    bus_stats, bus_stats_async = operations(subscriptions.bus_stats, 60)

    run_decay, run_decay_async = operations(maintenance.run_decay, 600)
    run_consolidation, run_consolidation_async = operations(maintenance.run_consolidation, 600)
    schedule_maintenance, schedule_maintenance_async = operations(maintenance.schedule_maintenance, 60)
    maintenance_status, maintenance_status_async = operations(maintenance.maintenance_status, 60)

    export, export_async = operations(admin.export, None)
    import_, import_async = operations(admin.import_, None)
    stats, stats_async = operations(admin.stats, 120)
    hub_stats, hub_stats_async = operations(admin.hub_stats, 60)
    inspect, inspect_async = operations(admin.inspect, None)
    erase, erase_async = operations(erasure.erase, None)

    # --------------------------------------------------------------- identity
    def issue_credential(self, org: str | None = None, user: str = "", agent: str = "", session: str = "",
                         **grant: Any) -> str:  # fmt: skip
        """A signed credential for a principal (operator only; see
        :func:`memorybus.client.identity.issue_credential` for ``roles``, ``levels``,
        ``rights``, ``ttl``, ``operator``)."""
        return identity.issue_credential(self, org, user, agent, session, **grant)

    def as_agent(self, credential: str) -> MemoryBus:
        """A handle on this bus bound to ``credential``: its calls act as that principal
        (no context argument needed, or a narrower one inside it); it pickles into Ray
        tasks and actors. See :mod:`memorybus.client.identity`."""
        return identity.as_agent(self, credential)

    def agent_handle(self, org: str, user: str = "", agent: str = "", session: str = "", **grant: Any) -> MemoryBus:
        """A handle bound to a fresh credential for that principal (``issue_credential``'s
        arguments), ready to hand to an agent; the handle itself in trusted mode."""
        return identity.agent_handle(self, org, user, agent, session, **grant)

    def rotate_org_secret(self, org: str, grace: float = 3600.0) -> str:
        """A new signing secret for ``org``; old credentials are refused after ``grace`` s."""
        return identity.rotate_org_secret(self, org, grace)

    def revoke_credential(self, credential: str) -> str:
        """Refuse ``credential`` from now on, in every actor; returns its id."""
        return identity.revoke_credential(self, credential)

    def whoami(self) -> Grant | None:
        """What this handle's credential grants (None in trusted mode)."""
        return self._grant
    audit, audit_async = operations(audit.audit, 120)

    # -------------------------------------------------------------- lifecycle
    def close(self) -> None:
        """Flush, then release what ``connect`` acquired; idempotent (see :func:`life.close`)."""
        life.close(self)

    def shutdown(self) -> None:
        """Stop this bus's actors, whoever created them (see :func:`life.shutdown`)."""
        life.shutdown(self)

    def __enter__(self) -> MemoryBus:
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def with_timeout(self, seconds: float | None) -> MemoryBus:
        """A handle on the same bus whose calls (reads and writes) give up after
        ``seconds`` with OperationTimeout (None: wait as long as it takes)."""
        other = MemoryBus(self.config.with_(read_timeout=seconds, write_timeout=seconds))
        other._shards, other._embedders, other._hubs = self._shards, self._embedders, self._hubs
        other._credential, other._grant, other._pinned = self._credential, self._grant, self._pinned
        return other

    def __reduce__(self) -> tuple[Any, ...]:
        if self._pinned:
            raise NotAuthorized(
                "pickle", "the operator's handle does not leave its process: hand agents "
                "bus.as_agent(bus.issue_credential(...)) (an operator credential, deliberately, for another operator)")
        return (_unpickle, (self.config, self._credential))


def _unpickle(config: Config, credential: str | None) -> MemoryBus:
    bus = MemoryBus(config)
    if credential:
        bus._credential, bus._grant = credential, identity.peek(credential)
    return bus


def connect(config: Config | None = None, **ray_init_kwargs: Any) -> MemoryBus:
    """Start (or join) Ray, create or join the bus's actors, and return a client.

    ``ray_init_kwargs`` go to ``ray.init`` when Ray is not yet running (where it is
    started or joined: ``Config.ray_address``, see ``runtime.choose_address``).
    Raises ``ConfigError`` when a bus of the same namespace already runs on other
    storage. Progress (Ray, actors, model) is logged on the ``memorybus`` logger.
    Use the returned bus as a context manager, or call ``close()``.
    """
    return life.open_bus(MemoryBus, config, ray_init_kwargs)


__all__ = ["Level", "MemoryBus", "MemoryBusError", "connect"]
