"""Push targets over Ray: a subscriber actor's durable name, and finding it again.

The hub actor's :class:`~memorybus.bus.ports.Targets` (see
:mod:`memorybus.bus.targets` for what is stored and why):

- a **named** actor's handle is stored as its name and namespace, so the hub finds
  it again after any restart, in any Ray cluster, once an actor of that name runs;
- an **unnamed** actor's handle is stored serialized, with the Ray session it
  belongs to; it is restored only in that session (a hub restart inside one
  cluster), never in another cluster, where a stale handle would fail to load.

Looking a name up is one call to Ray's control store (about a millisecond).
Nothing here raises Ray's errors: a lookup that fails is "not there".
"""

from __future__ import annotations

import logging
import pickle
from typing import Any

import ray
from ray import cloudpickle
from ray.exceptions import RayError

from memorybus.bus.targets import TargetRef, named

log = logging.getLogger(__name__)

#: what loading a stored handle raises when it cannot be restored (a handle of another
#: cluster: AssertionError inside Ray)
_LOAD_ERRORS = (pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError,
                AssertionError, RayError)  # fmt: skip


def session() -> str:
    """The Ray session (one run of one cluster) this process belongs to."""
    return str(ray.get_runtime_context().get_session_name())


def _actor_name(handle: Any) -> str:
    """The name of the actor behind ``handle`` ("" when unnamed or not known)."""
    try:
        from ray._private.state import state

        return str(state.actor_table(handle._actor_id.hex()).get("Name") or "")
    except (ImportError, AttributeError, KeyError, TypeError, ValueError, RayError):  # a private API moved
        return ""


def _namespace_of(handle: Any, name: str) -> str:
    """The namespace in which ``name`` is the actor behind ``handle`` ("" if none)."""
    try:
        listed = ray.util.list_named_actors(all_namespaces=True)
    except RayError:  # Ray's control store unreachable: not known
        return ""
    for entry in listed:
        if isinstance(entry, dict) and entry.get("name") == name:
            try:
                found = ray.get_actor(name, namespace=entry.get("namespace"))
            except ValueError:
                continue
            if found._actor_id == handle._actor_id:
                return str(entry.get("namespace") or "")
    return ""


class RayTargets:
    """Names actor handles durably and finds them again (see the module docstring)."""

    def ref(self, target: Any) -> TargetRef:
        pair = named(target)
        if pair is not None:
            return pair
        name = _actor_name(target)
        namespace = _namespace_of(target, name) if name else ""
        if name and namespace:
            return TargetRef(name=name, namespace=namespace)
        return TargetRef(cluster=session(), blob=cloudpickle.dumps(target))

    async def find(self, ref: TargetRef) -> Any | None:
        if ref.name:
            try:
                return ray.get_actor(ref.name, namespace=ref.namespace)
            except ValueError:
                return None
            except RayError as exc:  # Ray's control store failed: look again later
                log.warning("looking for %s failed: %r", ref.describe(), exc)
                return None
        if not ref.cluster or ref.cluster != session() or not ref.blob:
            return None  # a handle of another cluster never loads
        try:
            return cloudpickle.loads(ref.blob)
        except _LOAD_ERRORS as exc:  # its class or Ray's handle format is gone
            log.warning("a stored subscriber handle does not load: %r", exc)
            return None
