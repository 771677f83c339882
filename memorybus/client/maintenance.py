"""Run or schedule decay and consolidation (see :mod:`memorybus.actors.maintenance`).

Operation generators of :class:`~memorybus.client.MemoryBus` (see
:mod:`memorybus.client.operation`). A run covers every shard, limited to the
scopes the calling context manages; the schedule is the operator's.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from memorybus.actors.runtime import Op
from memorybus.client.identity import require_operator
from memorybus.client.operation import check_context
from memorybus.errors import InvalidRequest, ScopeViolation
from memorybus.scopes import Context, Scope
from memorybus.validation import check_time

if TYPE_CHECKING:
    from memorybus.client.handle import BusHandle


def _check_now(bus: BusHandle, now: object) -> float | None:
    when = check_time("now", now, InvalidRequest, optional=True)
    limit = bus.config.maintenance_max_future_seconds
    if when is not None and when > time.time() + limit:
        raise InvalidRequest("now", f"is more than {limit:.0f} s in the future "
                                    "(Config.maintenance_max_future_seconds)")  # fmt: skip
    return when


def run_decay(bus: BusHandle, context: Context, now: float | None = None) -> Op[dict[str, Any]]:
    """One decay sweep, over every shard, of the memories whose scope ``context``
    manages (an org context: its whole org; a user context: that user's scopes; see
    :meth:`~memorybus.scopes.Context.manages`), now or at ``now`` (epoch seconds, at
    most ``Config.maintenance_max_future_seconds`` ahead). Returns this run's counts."""
    check_context(context)
    when = _check_now(bus, now)
    actor = bus._maintenance_actor("decay")
    (counts,) = yield [actor.run_once.remote(when, context)]
    return dict(counts)


def run_consolidation(
    bus: BusHandle,
    context: Context,
    now: float | None = None,
    *,
    scopes: list[str] | None = None,
    due_only: bool = False,
    pause_before_apply: float = 0.0,
) -> Op[dict[str, Any]]:
    """One consolidation run, over every shard, of the scopes ``context`` manages
    (``scopes``: only these scope keys, each one ``context`` manages; ``due_only``:
    only scopes whose new episodic importance passed the reflection threshold)."""
    check_context(context)
    when = _check_now(bus, now)
    if scopes is not None:
        if isinstance(scopes, str) or not all(isinstance(k, str) for k in scopes):
            raise InvalidRequest("scopes", "must be a list of scope keys")
        if not all(context.manages(Scope.from_key(k)) for k in scopes):
            raise ScopeViolation("consolidate")
        scopes = list(scopes)
    if (
        isinstance(pause_before_apply, bool)
        or not isinstance(pause_before_apply, int | float)
        or not 0 <= pause_before_apply <= 600
    ):
        raise InvalidRequest("pause_before_apply", "must be between 0 and 600 seconds")
    actor = bus._maintenance_actor("consolidation")
    ref = actor.run_once.remote(when, context, scopes=scopes, due_only=bool(due_only),
                                pause_before_apply=pause_before_apply)  # fmt: skip
    (counts,) = yield [ref]
    return dict(counts)


def schedule_maintenance(bus: BusHandle, decay_interval: float | None = None,
                         consolidation_interval: float | None = None) -> Op[None]:  # fmt: skip
    """Start the periodic decay and consolidation runs (intervals from config by default).

    The schedule is the operator's: its runs cover every scope, at the actors' own
    clock (no injected time)."""
    yield [
        bus._maintenance_actor("decay").start.remote(require_operator(bus, "schedule_maintenance"), decay_interval),
        bus._maintenance_actor("consolidation").start.remote((bus._credential or ""), consolidation_interval),
    ]


def maintenance_status(bus: BusHandle) -> Op[dict[str, Any]]:
    """Each scheduled actor's last run, duration, counts and next run (operator only)."""
    auth = require_operator(bus, "maintenance_status")
    decay, consolidation = yield [bus._maintenance_actor(k).status.remote(auth) for k in ("decay", "consolidation")]
    return {"decay": decay, "consolidation": consolidation}
