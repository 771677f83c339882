"""cluster.yaml and deploy/ deploy memorybus with its secrets kept out of the repository:
Ray with token authentication and mutual TLS on every node, Redis with ACL users (the
default user off) and appendfsync always.

The YAML is checked with Ray's own ``prepare_config`` (see test_cluster_yaml.py);
``deploy/redis.sh configure`` and ``deploy/secrets.sh`` are run for real (bash, no
server) and their files read back. The servers themselves are started in
tests/integration/test_cluster_redis.py and tests/cluster/test_ray_token_auth.py.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.unit import test_cluster_yaml as cluster_yaml
from tests.unit.test_cluster_yaml import CLUSTER_YAML, index_of, redis_env

DEPLOY = CLUSTER_YAML.parent / "deploy"
TOKEN = "/home/ray/.memorybus/ray_auth_token"
TLS_DIR = "/home/ray/.memorybus/tls"
TLS_ENV = {"RAY_USE_TLS": "1", "RAY_TLS_SERVER_CERT": f"{TLS_DIR}/node.pem",
           "RAY_TLS_SERVER_KEY": f"{TLS_DIR}/node.key", "RAY_TLS_CA_CERT": f"{TLS_DIR}/ca.pem"}


# cluster.yaml as written and as Ray prepares it: test_cluster_yaml.py's fixtures
raw, cfg = cluster_yaml.raw, cluster_yaml.cfg


def env_of(command: str) -> dict[str, str]:
    """The ``NAME=value`` assignments that prefix the ``ray start`` in ``command``."""
    tokens = shlex.split(command.replace(";", " ; "))
    start = next(i for i, t in enumerate(tokens) if t == "ray" and tokens[i + 1] == "start")
    out: dict[str, str] = {}
    for tok in reversed(tokens[:start]):
        if not re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", tok):
            break
        name, _, value = tok.partition("=")
        out[name] = value
    return out


def ray_start_commands(cfg: dict[str, Any]) -> dict[str, list[str]]:
    """Every list of commands that starts Ray somewhere: the head's, the workers', and
    any node type's own."""
    lists = {"head": cfg["head_start_ray_commands"], "worker": cfg["worker_start_ray_commands"]}
    for name, node_type in cfg["available_node_types"].items():
        for key in ("head_start_ray_commands", "worker_start_ray_commands"):
            if key in node_type:
                lists[f"{name}.{key}"] = node_type[key]
    return lists


def assert_guarded(commands: list[str], guard: int, start: int, off: str, where: str) -> None:
    """The check that stops a node (``guard``) runs before ``ray start``, and no command
    turns the setting off (``off``)."""
    assert guard < start, where
    assert off not in " ".join(commands), where


def env_files(cfg: dict[str, Any]) -> Iterator[tuple[str, list[str], str]]:
    """``(key, commands, the command writing ~/.memorybus.env)`` of the head's and the
    workers' setup commands."""
    for key in ("head_setup_commands", "worker_setup_commands"):
        commands = cfg[key]
        yield key, commands, commands[index_of(commands, "> ~/.memorybus.env")]


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, timeout=60,
                          check=False)


# ---------------------------------------------------------------- Ray: token authentication


def test_every_ray_start_uses_token_auth_with_the_mounted_token(raw: dict[str, Any], cfg: dict[str, Any]) -> None:
    assert raw["file_mounts"][TOKEN] == "~/.memorybus/ray_auth_token"  # from the operator's machine
    lists = ray_start_commands(cfg)
    assert {"head", "worker"} <= set(lists)
    for where, commands in lists.items():
        start = index_of(commands, "ray start")
        assert env_of(commands[start]) == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": TOKEN, **TLS_ENV}, where
        # no node starts Ray without the token (a head would run open, a worker could not join)
        guard = index_of(commands, f"test -s {TOKEN}", "exit 1")
        assert_guarded(commands, guard, start, "RAY_AUTH_MODE=disabled", where)


def test_every_process_on_a_node_gets_the_token_settings(cfg: dict[str, Any]) -> None:
    for key, commands, env_file in env_files(cfg):
        assert "'export RAY_AUTH_MODE=token'" in env_file, key
        assert f"'export RAY_AUTH_TOKEN_PATH={TOKEN}'" in env_file, key
        assert "umask 077" in env_file
        assert index_of(commands, "> ~/.memorybus.env") < index_of(commands, ".bashrc")


def test_the_replica_node_starts_ray_the_same_way(raw: dict[str, Any]) -> None:
    # its own worker_setup_commands replace the common setup (no env file there), so
    # the token settings must come from the start command itself
    replica = raw["available_node_types"]["redis_replica"]
    assert "worker_start_ray_commands" not in replica
    assert "RAY_AUTH_TOKEN_PATH" not in " ".join(replica["worker_setup_commands"])
    # ... and it makes its own TLS certificate, which the common setup would have made
    assert index_of(replica["worker_setup_commands"], "tls.sh node") >= 0


# ---------------------------------------------------------------- Ray: mutual TLS


def test_every_ray_start_uses_tls_with_a_certificate_made_on_its_node(raw: dict[str, Any],
                                                                      cfg: dict[str, Any]) -> None:
    # the CA comes from the operator's machine; no node certificate or key is mounted
    assert raw["file_mounts"][f"{TLS_DIR}/ca.pem"] == "~/.memorybus/tls/ca.pem"
    assert raw["file_mounts"][f"{TLS_DIR}/ca.key"] == "~/.memorybus/tls/ca.key"
    assert not any("node.pem" in k or "node.key" in k for k in raw["file_mounts"])
    setups = {"head": cfg["head_setup_commands"], "worker": cfg["worker_setup_commands"]}
    setups["redis_replica"] = raw["available_node_types"]["redis_replica"]["worker_setup_commands"]
    for where, commands in setups.items():
        made = index_of(commands, "tls.sh node")
        assert f"MEMORYBUS_TLS_DIR={TLS_DIR} " in commands[made], where
    for where, commands in ray_start_commands(cfg).items():
        start = index_of(commands, "ray start")
        env = env_of(commands[start])
        assert {k: env.get(k) for k in TLS_ENV} == TLS_ENV, where
        # no node starts Ray without its certificate (it would run plaintext, or not join)
        guard = index_of(commands, f"test -s {TLS_DIR}/node.pem", "exit 1")
        assert f"test -s {TLS_DIR}/node.key" in commands[guard] and f"test -s {TLS_DIR}/ca.pem" in commands[guard]
        assert_guarded(commands, guard, start, "RAY_USE_TLS=0", where)


def test_every_process_on_a_node_gets_the_tls_settings(cfg: dict[str, Any]) -> None:
    for key, commands, env_file in env_files(cfg):
        for name, value in TLS_ENV.items():
            assert f"'export {name}={value}'" in env_file, (key, name)
        # the certificate is made after the environment file and before anything starts Ray
        assert index_of(commands, "> ~/.memorybus.env") < index_of(commands, "tls.sh node")


def tls(tmp_path: Path, *args: str, ips: str = "10.1.2.3") -> subprocess.CompletedProcess[str]:
    env = {"MEMORYBUS_TLS_DIR": str(tmp_path / "tls"), "MEMORYBUS_TLS_IPS": ips}
    return run(["bash", str(DEPLOY / "tls.sh"), *args], env)


def test_tls_script_makes_a_private_ca_and_keeps_it(tmp_path: Path) -> None:
    done = tls(tmp_path, "ca")
    assert done.returncode == 0, done.stderr
    d = tmp_path / "tls"
    assert stat.S_IMODE(d.stat().st_mode) == 0o700 and stat.S_IMODE((d / "ca.key").stat().st_mode) == 0o600
    first = (d / "ca.pem").read_bytes(), (d / "ca.key").read_bytes()
    assert b"BEGIN CERTIFICATE" in first[0] and b"PRIVATE KEY" in first[1]
    assert tls(tmp_path, "ca").returncode == 0  # a redeploy keeps the CA (nodes still trust each other)
    assert ((d / "ca.pem").read_bytes(), (d / "ca.key").read_bytes()) == first
    assert tls(tmp_path, "ca", "--rotate").returncode == 0
    assert (d / "ca.key").read_bytes() != first[1]
    assert tls(tmp_path, "bogus").returncode == 2 and tls(tmp_path, "node", "extra").returncode == 2


def test_a_node_certificate_names_the_node_and_is_accepted_only_by_its_ca(tmp_path: Path) -> None:
    import ipaddress
    import socket
    import ssl
    import threading

    from cryptography import x509

    missing = tls(tmp_path, "node")
    assert missing.returncode == 1 and "tls.sh ca" in missing.stderr  # no CA: refused, nothing made
    assert not (tmp_path / "tls" / "node.pem").exists()
    assert tls(tmp_path, "ca").returncode == 0
    done = tls(tmp_path, "node", ips="10.1.2.3 fe80::1")
    assert done.returncode == 0, done.stderr
    d = tmp_path / "tls"
    assert stat.S_IMODE((d / "node.key").stat().st_mode) == 0o600
    assert sorted(p.name for p in d.iterdir()) == ["ca.key", "ca.pem", "node.key", "node.pem"]  # no leftovers
    cert = x509.load_pem_x509_certificate((d / "node.pem").read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.IPAddress)) == {ipaddress.ip_address("127.0.0.1"),
                                                            ipaddress.ip_address("10.1.2.3")}
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    # mutual TLS as Ray's gRPC does it: both sides present the node certificate and
    # verify the other's against the CA, host name included
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(d / "ca.pem"))
    server_ctx.load_cert_chain(d / "node.pem", d / "node.key")
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    served: list[str] = []

    def serve() -> None:
        for _ in range(2):
            conn, _ = listener.accept()
            try:
                with server_ctx.wrap_socket(conn, server_side=True) as tls_conn:
                    served.append(tls_conn.recv(5).decode())
            except (ssl.SSLError, OSError):
                served.append("refused")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client_ctx = ssl.create_default_context(cafile=str(d / "ca.pem"))
    client_ctx.load_cert_chain(d / "node.pem", d / "node.key")
    with socket.create_connection(("127.0.0.1", port)) as raw, \
            client_ctx.wrap_socket(raw, server_hostname="127.0.0.1") as conn:
        conn.sendall(b"hello")
    # a client without a certificate from this CA is refused by the server
    stranger = ssl.create_default_context(cafile=str(d / "ca.pem"))
    with socket.create_connection(("127.0.0.1", port)) as raw:
        try:
            with stranger.wrap_socket(raw, server_hostname="127.0.0.1") as conn:
                conn.sendall(b"hello")
                conn.recv(1)
        except (ssl.SSLError, OSError):
            pass
    thread.join(timeout=10)
    listener.close()
    assert served == ["hello", "refused"]


# ---------------------------------------------------------------- no secret in the repository


def test_no_secret_value_is_committed(raw: dict[str, Any], cfg: dict[str, Any]) -> None:
    text = CLUSTER_YAML.read_text()
    assert not re.search(r"\b[0-9a-f]{32,}\b", text, re.I)  # no token or password-like hex
    assert not re.search(r"RAY_AUTH_TOKEN=", text)  # the token only ever as a path
    assert "requirepass" not in text and ">" not in "".join(re.findall(r"user \S+ on [^\n]*", text))
    assert raw["file_mounts"]["/home/ray/.memorybus/redis.password"] == "~/.memorybus/redis.password"
    url = redis_env(cfg)["MEMORYBUS_REDIS_URL"]
    assert url.startswith("redis://memorybus:$(cat /home/ray/.memorybus/redis.password)@")
    for script in DEPLOY.rglob("*"):
        if not script.is_file():
            continue
        body = script.read_text()
        assert not re.search(r"\b[0-9a-f]{32,}\b", body, re.I), script.name


def test_secrets_script_makes_private_random_files_and_keeps_them(tmp_path: Path) -> None:
    env = {"MEMORYBUS_SECRETS_DIR": str(tmp_path / "secrets")}
    done = run(["bash", str(DEPLOY / "secrets.sh")], env)
    assert done.returncode == 0, done.stderr
    files = {name: tmp_path / "secrets" / name for name in ("redis.password", "ray_auth_token")}
    first = {name: f.read_text() for name, f in files.items()}
    for name, value in first.items():
        assert re.fullmatch(r"[0-9a-f]{64}", value), name  # 32 random bytes, no newline
        assert stat.S_IMODE(files[name].stat().st_mode) == 0o600, name
    assert stat.S_IMODE((tmp_path / "secrets").stat().st_mode) == 0o700
    assert first["redis.password"] != first["ray_auth_token"]
    # a second run keeps them (a redeploy must not lock the nodes out)
    assert run(["bash", str(DEPLOY / "secrets.sh")], env).returncode == 0
    assert {name: f.read_text() for name, f in files.items()} == first
    # --rotate replaces both
    assert run(["bash", str(DEPLOY / "secrets.sh"), "--rotate"], env).returncode == 0
    rotated = {name: f.read_text() for name, f in files.items()}
    assert all(rotated[n] != first[n] for n in files)
    assert run(["bash", str(DEPLOY / "secrets.sh"), "--bogus"], env).returncode == 2


# ---------------------------------------------------------------- Redis: ACL users, fsync always


def configure(tmp_path: Path, password: str | None) -> tuple[subprocess.CompletedProcess[str], Path]:
    home = tmp_path / "redis-home"
    env = {"MEMORYBUS_REDIS_HOME": str(home), "MEMORYBUS_REDIS_DIR": str(tmp_path / "data"),
           "MEMORYBUS_BACKUP_DIR": str(tmp_path / "backups"), "MEMORYBUS_REDIS_MAXMEMORY": "1000000"}
    if password is not None:
        (tmp_path / "pw").write_text(password + "\n")
        env["MEMORYBUS_REDIS_PASSWORD_FILE"] = str(tmp_path / "pw")
    return run(["bash", str(DEPLOY / "redis.sh"), "configure"], env), home


def test_redis_is_configured_with_acl_users_and_fsync_always(tmp_path: Path) -> None:
    password = "0123456789abcdef-not-a-real-one"
    done, home = configure(tmp_path, password)
    assert done.returncode == 0, done.stderr
    conf = (home / "redis.conf").read_text().splitlines()
    assert "appendonly yes" in conf and "appendfsync always" in conf and "protected-mode yes" in conf
    assert f"include {home / 'auth.conf'}" in conf
    auth = (home / "auth.conf").read_text().splitlines()
    assert f"aclfile {home / 'users.acl'}" in auth
    assert "masteruser memorybus" in auth  # a replica follows as the bus's user
    users = (home / "users.acl").read_text().splitlines()
    # off, so nobody can log in as it, with no password at all; it keeps its permissions
    # because Redis 7.0 replays the AOF's MULTI/EXEC under them (redis/redis#14541)
    default = users[0].split()
    assert default[:3] == ["user", "default", "off"] and "resetpass" in default
    assert not any(r == "nopass" or r.startswith((">", "#")) for r in default)
    assert "+@all" in default
    bus = next(u for u in users if u.startswith("user memorybus "))
    digest = hashlib.sha256(password.encode()).hexdigest()
    assert f" on #{digest} " in bus  # the hash, never the password
    assert "-@dangerous" in bus and "+config|get" in bus and "+@all" in bus
    admin = next(u for u in users if u.startswith("user memorybus-admin "))
    admin_pass = (home / "admin.pass").read_text()
    assert f"#{hashlib.sha256(admin_pass.encode()).hexdigest()}" in admin and admin_pass != password
    # the plaintext is only where Redis needs it (masterauth), in files only the owner reads
    for f in home.iterdir():
        if password in f.read_text():
            assert f.name == "auth.conf", f.name
    for name in ("auth.conf", "users.acl", "admin.pass"):
        assert stat.S_IMODE((home / name).stat().st_mode) & 0o077 == 0, name
    # a second configure (every `ray up`) keeps the node's admin password
    assert configure(tmp_path, password)[0].returncode == 0
    assert (home / "admin.pass").read_text() == admin_pass


def test_redis_configure_refuses_a_short_password(tmp_path: Path) -> None:
    done, home = configure(tmp_path, "short")
    assert done.returncode != 0 and "16+ characters" in done.stderr
    assert not (home / "users.acl").exists()
