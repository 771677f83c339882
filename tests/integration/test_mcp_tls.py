"""MCP over HTTPS with a CA made for the test.

- In this process (no Ray): the listener ``memorybus mcp`` uses
  (:func:`memorybus.integrations.mcp_http.http_server`: the SDK's app under uvicorn with
  the certificate and key), with the bearer-token verifier memorybus uses, reached by
  the official MCP client over httpx2: a client that trusts the CA lists and calls
  tools as its token's identity; one that does not (system CAs, another CA) fails the
  handshake; a plaintext request to the TLS port gets nothing.
- ``memorybus mcp --transport http --tls-cert --tls-key`` refuses half a TLS setup
  before it starts anything; the whole server (bus, model) on HTTPS, joining the
  tests' shared Ray, is one test.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

import memorybus as mb
from memorybus.integrations import mcp as door
from memorybus.integrations.mcp_http import check_tls_files, http_server, plaintext_warning
from tests.conftest import free_port
from tests.mcp_process import server_process
from tests.tls_ca import Pki, make_pki

pytestmark = [pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def https_server(pki: Pki) -> Iterator[str]:
    """A small MCP server (one tool: whoami) on HTTPS, in a thread of this process."""
    port = free_port()
    base = f"https://127.0.0.1:{port}"
    auth = AuthSettings(issuer_url=base, resource_server_url=f"{base}/mcp", validate_token_resource=False)
    tokens = {"tok-alice": mb.Context("acme", "alice", "claude")}
    server = MCPServer("tls-test", token_verifier=door.TokenIdentities(tokens), auth=auth)

    @server.tool()
    async def whoami() -> dict[str, Any]:
        token = get_access_token()
        return (token.claims or {}).get("memorybus", {}) if token else {}

    srv = http_server(server, "127.0.0.1", port, tls_cert=str(pki.server_cert), tls_key=str(pki.server_key))
    thread = threading.Thread(target=lambda: asyncio.run(srv.serve()), daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not srv.started:
        assert time.time() < deadline and thread.is_alive(), "the HTTPS listener did not start"
        time.sleep(0.05)
    yield f"{base}/mcp"
    srv.should_exit = True
    srv.force_exit = True  # the clients' streams are done: no graceful wait for their connections
    thread.join(timeout=10)
    assert not thread.is_alive(), "the HTTPS listener did not stop"


def client(url: str, token: str, verify: ssl.SSLContext | bool) -> Client:
    headers = {"Authorization": f"Bearer {token}"}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, verify=verify,
                                                                              timeout=30)))


def trusting(ca: Any) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(ca))


def test_a_client_that_trusts_the_ca_is_served_over_https(https_server, pki):
    async def run() -> dict[str, Any]:
        async with client(https_server, "tok-alice", trusting(pki.ca)) as c:
            assert {t.name for t in (await c.list_tools()).tools} == {"whoami"}
            result = await c.call_tool("whoami", {})
            assert not result.is_error
            return result.structured_content or json.loads(result.content[0].text)

    who = anyio.run(run)
    assert (who["org"], who["user"], who["agent"]) == ("acme", "alice", "claude")  # the token, through TLS


@pytest.mark.parametrize("trust", ["system", "other-ca"])
def test_a_client_that_does_not_trust_the_ca_fails_the_handshake(https_server, pki, trust):
    verify = True if trust == "system" else trusting(pki.other_ca)

    async def run() -> None:
        async with client(https_server, "tok-alice", verify) as c:
            await c.list_tools()

    with pytest.raises(BaseException) as caught:  # anyio wraps it in an ExceptionGroup
        anyio.run(run)
    assert "CERTIFICATE_VERIFY_FAILED" in repr(caught.value) or _has_ssl_error(caught.value)
    # and a raw handshake says the same, with no MCP in the way
    with socket.create_connection(("127.0.0.1", int(https_server.split(":")[2].split("/")[0])), timeout=5) as raw:
        ctx = ssl.create_default_context() if trust == "system" else trusting(pki.other_ca)
        with pytest.raises(ssl.SSLCertVerificationError):
            ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def _has_ssl_error(exc: BaseException) -> bool:
    seen: list[BaseException] = [exc]
    while seen:
        e = seen.pop()
        if isinstance(e, ssl.SSLError) or "CERTIFICATE_VERIFY_FAILED" in str(e):
            return True
        seen.extend(getattr(e, "exceptions", ()))
        seen.extend(x for x in (e.__cause__, e.__context__) if x is not None)
    return False


def test_plain_http_to_the_tls_port_gets_no_mcp(https_server):
    with pytest.raises(httpx2.TransportError):  # the TLS listener drops it: no answer at all
        httpx2.post(https_server.replace("https://", "http://"), json={}, timeout=5)


def test_tls_files_are_checked_and_plaintext_off_loopback_is_warned(pki, tmp_path):
    assert check_tls_files(None, None) is False
    assert check_tls_files(str(pki.server_cert), str(pki.server_key)) is True
    with pytest.raises(mb.ConfigError, match="--tls-key"):
        check_tls_files(str(pki.server_cert), None)
    with pytest.raises(mb.ConfigError, match="--tls-cert"):
        check_tls_files(None, str(pki.server_key))
    with pytest.raises(mb.ConfigError, match=r"gone\.pem is not a file"):
        check_tls_files(str(tmp_path / "gone.pem"), str(pki.server_key))
    for host in ("0.0.0.0", "10.1.2.3", "mcp.example"):
        said = plaintext_warning(host, tls=False)
        assert said and host in said and "--tls-cert" in said
        assert plaintext_warning(host, tls=True) is None
    for host in ("127.0.0.1", "localhost", "::1"):
        assert plaintext_warning(host, tls=False) is None


def test_the_cli_refuses_half_a_tls_setup_before_starting_anything(pki, tmp_path):
    base = [sys.executable, "-m", "memorybus.cli", "mcp", "--data-dir", str(tmp_path / "data")]
    for extra, said in (
        (["--transport", "http", "--tls-cert", str(pki.server_cert)], "--tls-key"),
        (["--transport", "http", "--tls-cert", str(tmp_path / "nope.pem"), "--tls-key", str(pki.server_key)],
         "nope.pem is not a file"),
        (["--org", "acme", "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)], "http only"),
    ):
        done = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2 and said in done.stderr, done.stderr
    assert not (tmp_path / "data").exists()  # no bus was started


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.model
@pytest.mark.timeout(400)
def test_memorybus_mcp_serves_https_to_a_client_that_trusts_the_ca(pki, tmp_path, ray_local):
    """The command as a server on a Ray node runs it: joining the Ray there (the tests'
    shared one, through ``RAY_ADDRESS``; tests/integration/test_mcp_server.py starts one
    with a Ray of its own)."""
    import ray
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tok-alice": {"org": "acme", "user": "alice", "agent": "claude"}}))
    tokens.chmod(0o600)
    port = free_port()
    cmd = [sys.executable, "-m", "memorybus.cli", "mcp", "--data-dir", str(tmp_path / "data"), "--shards", "2",
           "--num-cpus", "2", "--namespace", "mcp_tls_t", "--transport", "http", "--port", str(port),
           "--tokens", str(tokens), "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key)]
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)
    with server_process(cmd, tmp_path / "server.log", port, timeout=300, what="MCP HTTPS", env=env) as proc:
        url = f"https://127.0.0.1:{port}/mcp"

        async def session() -> None:
            async with client(url, "tok-alice", trusting(pki.ca)) as c:
                node = await c.call_tool("remember", {"content": "Alice's team deploys on Thursdays"})
                assert not node.is_error, node.content[0].text
                hits = await c.call_tool("recall", {"query": "when does the team deploy?"})
                assert "Thursdays" in hits.content[0].text

        anyio.run(session)

        async def untrusting() -> None:
            async with client(url, "tok-alice", True) as c:
                await c.list_tools()

        with pytest.raises(BaseException) as caught:
            anyio.run(untrusting)
        assert _has_ssl_error(caught.value)
        assert "https" in (tmp_path / "server.log").read_text()
        assert proc.poll() is None  # still serving
    # leaving the block sends SIGTERM: what the sessions above left open must not keep the
    # server up (server_process fails the test if it runs 20 s later; with uvicorn's
    # default, no limit on the wait for open connections, it ran until killed)
