"""One local Ray for the test modules that ask for ``ray_local``, instead of one each.

Starting and stopping a local Ray costs about 7 s here; the suite has some 25 modules on
it. The modules that ask for ``ray_local`` are run one after another
(:func:`order_items`) and share one instance; a module that does not ask for it finds no
Ray running (:func:`stop`, from a ``pytest_runtest_setup`` hook), so modules that start Ray
their own way (a cluster, one CPU, a subprocess) are unchanged. A module that leaves an
actor alive gets the next module a fresh Ray, as before: no module inherits another's
actors or their reserved CPUs, except the replicas of the tests' shared embedder pool
(``MEMORYBUS_EMBEDDER_POOL``, set in ``tests/conftest.py``): one model load for every
bus the suite starts on this Ray instead of one per ``connect``.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

_state: dict[str, Any] = {"up": False, "address": None}
_modules: set[Any] = set()  # paths of the modules that use ray_local (order_items)
_ray_free: set[Any] = set()  # paths of the modules that never start nor join a Ray (order_items)
#: what in a module's text may start or join a Ray (in process, or in a subprocess or command it runs):
#: a module with none of these never does (importing Ray's exceptions or pickler starts nothing)
_MAY_START_RAY = re.compile(r"ray\.init|cluster_utils|Cluster\(|\bray start\b|subprocess|Popen|memorybus\.cli|"
                            r"multiprocessing|os\.system|pexpect|\b(mb|memorybus)\.connect\(")
#: MEMORYBUS_TEST_RAY_LOG=<file>: one line per start and stop of the shared Ray, with the
#: module and the reason (to find the modules that cost the suite a fresh Ray)
_LOG = os.environ.get("MEMORYBUS_TEST_RAY_LOG")


def _log(event: str, detail: str = "") -> None:
    if _LOG:
        with open(_LOG, "a") as f:
            f.write(f"{time.time():.1f} {os.environ.get('PYTEST_XDIST_WORKER', 'main')} {event} "
                    f"{os.environ.get('PYTEST_CURRENT_TEST', '').split('::')[0]} {detail}\n")


def start() -> None:
    """The shared Ray, started unless it runs (2 CPUs, loopback, no dashboard)."""
    import ray

    if _state["up"] and ours():
        return
    if ray.is_initialized():  # a Ray this module did not start (a test's own): not ours to share
        ray.shutdown()
    # address="local": a new instance even when RAY_ADDRESS is set (a cluster test left it)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    _state["up"] = True
    _state["address"] = ray.get_runtime_context().gcs_address
    _log("start")


def ours() -> bool:
    """Is this process on the shared Ray it started? Not after a test stopped it, nor
    once something else started a Ray in its place (Ray starts a default local one when
    an API such as ``ray.get_runtime_context()`` is used while disconnected)."""
    import ray

    return ray.is_initialized() and ray.get_runtime_context().gcs_address == _state["address"]


def stop(reason: str = "") -> None:
    """Stop the shared Ray if it runs."""
    if not _state["up"]:
        return
    import ray

    _log("stop", reason)
    _state["up"] = False
    ray.shutdown()


def alive_actors(wait: float = 3.0) -> list[str]:
    """Actors still alive (or starting) in the shared Ray after ``wait`` seconds, by name;
    [] when none (killed actors take a moment to be recorded dead)."""
    import ray._private.state as ray_state

    deadline = time.monotonic() + wait
    while True:
        table: dict[str, Any] = ray_state.actors()
        alive = [info.get("Name") or actor_id for actor_id, info in table.items() if info["State"] != "DEAD"]
        if all(is_pool_replica(name) for name in alive) or time.monotonic() >= deadline:
            return alive
        time.sleep(0.1)


def is_pool_replica(name: str) -> bool:
    """A replica of a shared embedder pool (``Config.embedder_pool``): meant to outlive buses."""
    return name.startswith("pool:")


def end_module() -> None:
    """After a module on the shared Ray: stop it if the module left an actor alive (other
    than the replicas of one shared embedder pool, which every module may use), or if a
    test stopped Ray itself."""
    import ray

    if not _state["up"]:
        return
    if not ray.is_initialized():
        stop("a test stopped Ray")
        return
    if not ours():
        stop("a Ray other than the shared one runs")
        return
    alive = alive_actors()
    pools = {name.rsplit(":", 1)[0] for name in alive if is_pool_replica(name)}
    if len(pools) > 1 or any(not is_pool_replica(name) for name in alive):
        stop(f"left alive: {sorted(alive)[:6]}")


#: how many groups the modules on the shared Ray are dealt into (``--dist loadgroup``: each
#: group runs on one pytest-xdist worker, one module after another, on that worker's one Ray)
GROUPS = int(os.environ.get("MEMORYBUS_TEST_SHARED_RAY_GROUPS", "2"))


def order_items(items: list[Any]) -> None:
    """Run the modules that use ``ray_local`` first, together (each keeps its own order),
    and give every test its ``xdist_group`` (:func:`group_of`)."""

    def on_shared(item: Any) -> bool:
        return "ray_local" in getattr(item, "fixturenames", ())

    shared = {item.path for item in items if on_shared(item)}
    _modules.clear()
    _modules.update(shared)
    marked = {item.path for item in items if {"ray", "cluster"} & {m.name for m in item.iter_markers()}}
    _ray_free.clear()
    _ray_free.update(path for path in {item.path for item in items} - shared - marked if ray_free(path))
    items[:] = [i for i in items if i.path in shared] + [i for i in items if i.path not in shared]
    import pytest

    rank = {path: n for n, path in enumerate(sorted(shared))}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item.path, rank, item.nodeid.split("::")[0])))


def group_of(path: Path, rank: dict[Any, int], module_id: str) -> str:
    """The pytest-xdist group of a module's tests (``--dist loadgroup``; no effect without it).
    A module on the shared Ray is dealt, in path order, into one of :data:`GROUPS` groups,
    so a worker runs a group's modules one after another on one Ray, instead of getting
    them between other files (each of which stops the shared Ray: a Ray start and a model
    load more). Any other module is a group of its own (named ``module_id``, its path in
    the test ids), as ``--dist loadfile`` would make it."""
    if path in rank:
        return f"shared-ray-{rank[path] % max(GROUPS, 1)}"
    return module_id


def ray_free(path: Path) -> bool:
    """Does the module at ``path`` (none of whose tests carries the ``ray`` or ``cluster``
    marker) neither start nor join a Ray? Its text has no ``ray.init``, cluster, subprocess,
    command line or ``mb.connect(`` (so a module that might start a Ray some other way is never
    taken for one that does not)."""
    try:
        return not _MAY_START_RAY.search(Path(path).read_text())
    except OSError:
        return False


def before_test(item: Any) -> None:
    """A test of a module that does not use ``ray_local`` starts with no shared Ray running,
    unless the module never starts nor joins a Ray (:func:`ray_free`): then the shared Ray
    stays up for the next module that uses it (xdist hands a worker its files in its own
    order, so modules on the shared Ray are not always next to each other)."""
    if _state["up"] and item.path not in _modules and item.path not in _ray_free:
        stop(f"next module is not on it: {item.path.name}")
