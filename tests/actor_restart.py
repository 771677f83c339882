"""Kill a Ray actor that has restarts left and wait for its new process (the integration
tests' shared helper; the actor must offer ``pid()``)."""

from __future__ import annotations

import time

import ray

_RESTARTING = (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError, ray.exceptions.ActorUnavailableError)


def restart_actor(handle, old_pid: int | None = None, timeout: float = 60.0, call_timeout: float = 10.0) -> int:
    """``ray.kill`` the actor (Ray restarts it) and return the restarted process's pid.

    ``old_pid``: the pid before the kill, when read earlier (default: read now).
    Raises AssertionError when no new process answers within ``timeout`` seconds.
    """
    if old_pid is None:
        old_pid = ray.get(handle.pid.remote(), timeout=30)
    ray.kill(handle, no_restart=False)
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            pid = ray.get(handle.pid.remote(), timeout=call_timeout)
            if pid != old_pid:
                return pid
        except _RESTARTING:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the actor did not restart within {timeout} s")
