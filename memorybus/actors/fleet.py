"""Agent actors (the simulation's and the demo's) and the faults that need Ray.

Thin wrappers: the agents' classes are the caller's (:mod:`memorybus.simulation`
passes them in; nothing here imports it, so the simulation depends on this layer
and not the other way round); this module only makes actors of them, calls them,
and kills the bus's actors or a node's raylet when a fault is injected.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from memorybus.actors import embedder_actor_name, handle, hub_actor_name, shard_actor_name
from memorybus.actors.runtime import unwrap
from memorybus.config import Config
from memorybus.errors import ActorUnavailable, StoreUnavailable

if TYPE_CHECKING:  # the client drives this layer; this layer only names its type
    from memorybus.client import MemoryBus


def _here() -> dict[str, Any]:
    """Options that keep an actor on this driver's node (faults take other nodes)."""
    node = ray.get_runtime_context().get_node_id()
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}


def spawn_agents(agent: type, bus: MemoryBus, specs: Sequence[Any], run: str, seed: int, op_timeout: float,
                 timeout: float = 300.0) -> list[Any]:
    """One actor of class ``agent`` per spec, on this node; each is started with its own
    handle (``start(handle)``: it subscribes to its users' events). Each gets a bus handle
    bound to its own credential (its org and agent name, any user it serves; the lead
    role for a lead), never the operator's."""
    cls: Any = ray.remote(num_cpus=0.01, max_restarts=0)(agent).options(**_here())
    ttl = 7 * 86400.0
    handles = [cls.remote(bus.agent_handle(spec.org, agent=spec.name, roles={"lead"} if spec.lead else (), ttl=ttl),
                          spec, run, seed, op_timeout) for spec in specs]  # fmt: skip
    ray.get([h.start.remote(h) for h in handles], timeout=timeout)
    return handles


def step_agents(handles: Sequence[Any], tasks: Sequence[Any]) -> list[Any]:
    """Start one step on every agent; returns the refs (see :func:`collect`)."""
    return [h.step.remote(t) for h, t in zip(handles, tasks, strict=True)]


def collect(refs: Sequence[Any], timeout: float) -> list[Any]:
    try:
        return list(ray.get(list(refs), timeout=timeout))
    except ray.exceptions.RayError as exc:
        raise unwrap(exc) from None


def reports(handles: Sequence[Any], timeout: float = 120.0) -> list[Any]:
    return list(ray.get([h.report.remote() for h in handles], timeout=timeout))


def kill_all(handles: Sequence[Any]) -> None:
    for h in handles:
        try:
            ray.kill(h, no_restart=True)
        except (ValueError, ray.exceptions.RayError):  # already gone
            continue


# ------------------------------------------------------------------ faults
def kill_bus_actor(config: Config, kind: str, index: int = 0) -> str:
    """Kill one of the bus's actors (``shard``, ``embedder`` or ``hub``); Ray restarts it."""
    name = {"shard": shard_actor_name, "embedder": embedder_actor_name, "hub": hub_actor_name}[kind](config, index)
    try:
        ray.kill(handle(config, kind, index), no_restart=False)
    except (ValueError, ray.exceptions.RayError) as exc:
        raise ActorUnavailable(name, f"could not kill it: {exc}") from None
    return name


def _children() -> dict[int, list[int]]:
    """Every live process's children (from /proc; empty where there is none)."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def _kill_node() -> int:
    """Runs on the victim node: kills its raylet (this worker's parent) and every
    process the raylet started, this one last, as when the machine dies (its
    workers must not outlive it holding files)."""
    raylet, me = os.getppid(), os.getpid()
    tree, victims, todo = _children(), [], [raylet]
    while todo:
        pid = todo.pop()
        victims.append(pid)
        todo += tree.get(pid, [])
    for pid in victims:
        if pid != me:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
    os.kill(me, signal.SIGKILL)
    return raylet  # pragma: no cover - never reached


def kill_worker_node(config: Config, timeout: float = 60.0) -> str:
    """Remove a worker node (not this driver's) that hosts a shard: its raylet and
    the processes it started are killed, so Ray declares the node dead and restarts
    its actors elsewhere."""
    here = ray.get_runtime_context().get_node_id()
    hosts: list[str] = []
    for i in range(config.num_shards):
        name = shard_actor_name(config, i)
        try:
            actor = handle(config, "shard", i)
            hosts.append(str(ray.get(actor.node_id.remote(), timeout=timeout)))
        except (ValueError, ray.exceptions.RayError) as exc:  # no such actor; it died or timed out
            raise ActorUnavailable(name, f"cannot tell which node hosts it: {exc}") from None
    alive = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
    victims = [n for n in hosts if n != here] or [n for n in alive if n != here]
    if not victims:
        raise StoreUnavailable("ray", "no worker node to remove: every live node is the driver's")
    victim = victims[0]
    task = ray.remote(num_cpus=0, max_retries=0)(_kill_node).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(victim, soft=False))
    ref = task.remote()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(n["NodeID"] == victim and n.get("Alive") for n in ray.nodes()):
            del ref  # its worker died with the node
            return victim
        time.sleep(0.5)
    raise StoreUnavailable("ray", f"node {victim} did not go down")


# -------------------------------------------------------------------- demo
def spawn_demo(agent: type, bus: MemoryBus, names: list[str], org: str = "acme", user: str = "u1") -> list[Any]:
    cls: Any = ray.remote(num_cpus=0.01)(agent)
    return [cls.remote(bus.agent_handle(org, user, name), org, user, name, f"session-{name}") for name in names]


def call_all(agents: Sequence[Any], method: str, args: Sequence[Any]) -> list[Any]:
    refs = [getattr(a, method).remote(arg) for a, arg in zip(agents, args, strict=True)]
    return list(ray.get(refs, timeout=300))
