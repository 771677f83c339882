"""`memorybus mcp` as a real server process (SQLite + Qdrant Edge in a temp dir), driven
by the official MCP SDK's client over stdio and over streamable HTTP. The stdio server
starts its own local Ray, as a desktop client launching it does; the HTTP server joins
the tests' shared Ray through ``RAY_ADDRESS``, as a server started on a Ray node does."""

import json
import os
import socket
import subprocess
import sys
import time

import anyio
import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import free_port
from tests.mcp_process import server_process

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(400)]

TOOLS = {"remember", "recall", "get", "update", "forget", "assert_fact", "current_fact", "history", "context_for"}
TOKENS = {
    "tok-alice": {"org": "acme", "user": "alice", "agent": "claude"},
    "tok-bob": {"org": "acme", "user": "bob", "agent": "claude"},
}


def server_cmd(tmp, *args):
    return [sys.executable, "-m", "memorybus.cli", "mcp", "--data-dir", str(tmp), "--shards", "2",
            "--num-cpus", "2", *args]  # fmt: skip


def shared_ray_env() -> dict[str, str]:
    """This process's environment with ``RAY_ADDRESS`` naming the shared Ray (``ray_local``)."""
    import ray

    return dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)


@pytest.fixture(scope="module")
def http_server(tmp_path_factory, ray_local):
    """One HTTP server process for the module, bound to loopback, with a token file."""
    tmp = tmp_path_factory.mktemp("mcphttp")
    tokens = tmp / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    tokens.chmod(0o600)  # a token file others may read is refused
    port = free_port()
    cmd = server_cmd(tmp / "data", "--transport", "http", "--port", str(port), "--tokens", str(tokens),
                     "--namespace", "mcp_http_t")
    with server_process(cmd, tmp / "server.log", port, timeout=240, what="MCP HTTP", env=shared_ray_env()) as proc:
        yield f"http://127.0.0.1:{port}/mcp", proc, tmp / "server.log"


def http_client(url, token):
    import httpx2

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=120)))


def payload(result):
    assert not result.is_error, result.content[0].text
    return result.structured_content or json.loads(result.content[0].text)


@pytest.mark.slow
def test_stdio_session_lists_tools_remembers_recalls_and_refuses_nothing_it_should_not(tmp_path, short_tmp):
    params = StdioServerParameters(
        command=sys.executable,
        args=server_cmd(tmp_path / "data", "--org", "acme", "--user", "alice", "--agent", "claude",
                        "--namespace", "mcp_stdio_t")[1:],
        # a Ray of its own, in a temp directory of its own (the shared Ray's stays its own)
        env=dict(os.environ, RAY_TMPDIR=short_tmp("mbmcp")),
    )

    async def session():
        async with Client(params, read_timeout_seconds=240) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == TOOLS
            for t in tools.values():
                a = t.annotations
                assert t.description and len(t.description) > 40 and t.input_schema["type"] == "object"
                assert None not in (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint)
                assert a.open_world_hint is False
                assert not {"org", "user", "agent", "session"} & set(t.input_schema.get("properties", {}))
            assert tools["recall"].annotations.read_only_hint and tools["forget"].annotations.destructive_hint
            assert not tools["remember"].annotations.read_only_hint
            node = payload(await client.call_tool("remember", {"content": "Alice's team deploys on Thursdays"}))
            assert node["scope"] == "user" and node["version"] == 1
            hits = payload(await client.call_tool("recall", {"query": "when does the team deploy?"}))["memories"]
            assert hits[0]["id"] == node["id"]
            got = payload(await client.call_tool("get", {"id": node["id"]}))
            assert got["content"] == "Alice's team deploys on Thursdays"
            upd = payload(await client.call_tool("update", {"id": node["id"], "expected_version": 1,
                                                            "content": "Alice's team deploys on Fridays"}))  # fmt: skip
            assert upd["version"] == 2
            stale = await client.call_tool("update", {"id": node["id"], "expected_version": 1, "importance": 9})
            assert stale.is_error and "VersionConflict" in stale.content[0].text
            bad = await client.call_tool("remember", {"content": "   "})
            assert bad.is_error and "InvalidMemory" in bad.content[0].text
            nosession = await client.call_tool("remember", {"content": "x", "scope": "session"})
            assert nosession.is_error and "session" in nosession.content[0].text  # this identity has none
            r1 = payload(await client.call_tool("assert_fact", {"key": "editor", "content": "Alice uses Vim"}))
            r2 = payload(await client.call_tool("assert_fact", {"key": "editor", "content": "Alice uses Helix"}))
            assert (r1["outcome"], r2["outcome"]) == ("created", "superseded")
            cur = payload(await client.call_tool("current_fact", {"key": "editor"}))
            assert cur["fact"]["content"] == "Alice uses Helix"
            hist = payload(await client.call_tool("history", {"key": "editor"}))["history"]
            assert [h["outcome"] for h in hist] == ["created", "superseded"] and hist[0]["by"] == "claude"
            block = await client.call_tool("context_for", {"query": "deployment day", "token_budget": 200})
            assert not block.is_error and "Fridays" in block.content[0].text
            recent = await client.read_resource("memorybus://recent/user")
            assert "Fridays" in recent.contents[0].text
            gone = payload(await client.call_tool("forget", {"id": node["id"]}))
            assert gone["forgotten"] is True
            again = await client.call_tool("get", {"id": node["id"]})
            assert again.is_error and "MemoryNotFound" in again.content[0].text
            assert payload(await client.call_tool("recall", {"query": "Vim or Helix?"}))["memories"]  # still serving

    anyio.run(session)


def test_http_identity_comes_from_the_token_not_from_arguments(http_server):
    url, proc, _ = http_server

    async def run():
        async with http_client(url, "tok-alice") as alice:
            assert {t.name for t in (await alice.list_tools()).tools} == TOOLS
            mine = payload(await alice.call_tool("remember", {"content": "Alice's salary is 140k", "importance": 9}))
            fact = payload(await alice.call_tool("assert_fact", {"key": "salary", "content": "140k"}))
            assert fact["outcome"] == "created"
        async with http_client(url, "tok-bob") as bob:
            # an LLM that names alice anywhere still acts as bob, and gets nothing of alice's
            hits = payload(await bob.call_tool("recall", {"query": "Alice salary", "user": "alice", "k": 10}))
            assert all("Alice's salary" not in h["content"] for h in hits["memories"])
            refused = await bob.call_tool("get", {"id": mine["id"]})
            assert refused.is_error and "ScopeViolation" in refused.content[0].text
            assert "140k" not in refused.content[0].text
            for call in [("update", {"id": mine["id"], "expected_version": 1, "content": "0"}),
                         ("forget", {"id": mine["id"]})]:  # fmt: skip
                res = await bob.call_tool(*call)
                assert res.is_error and "ScopeViolation" in res.content[0].text
            assert payload(await bob.call_tool("current_fact", {"key": "salary"}))["fact"] is None
            assert payload(await bob.call_tool("history", {"key": "salary"}))["history"] == []
            assert "140k" not in (await bob.call_tool("context_for", {"query": "salary"})).content[0].text
        async with http_client(url, "tok-alice") as alice:  # alice's memory is untouched
            assert payload(await alice.call_tool("get", {"id": mine["id"]}))["version"] == 1

    anyio.run(run)
    assert proc.poll() is None


def test_http_refuses_missing_or_unknown_tokens(http_server):
    import httpx2

    url, proc, _ = http_server
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    for extra in [{}, {"Authorization": "Bearer not-a-token"}, {"Authorization": "Bearer tok-alicex"}, {"Authorization": "Basic tok-alice"}]:
        response = httpx2.post(url, json=init, headers=headers | extra, timeout=30)
        assert response.status_code == 401
    assert proc.poll() is None


def test_http_takes_memorybus_credentials_as_bearer_tokens(http_server):
    """A credential minted from the bus's key ring is a bearer token: the server verifies
    it, the shards verify it again; forged, operator and revoked credentials get 401."""
    import httpx2

    from memorybus import Config
    from memorybus.auth import Grant, KeyRing, open_keys, peek

    url, proc, log = http_server
    kv = open_keys(Config.embedded(log.parent / "data"))  # the operator's files: the key ring the server reads
    ring = KeyRing.load(kv)
    key, op_key = ring.ensure("acme"), ring.ensure("*")
    now = time.time()

    def mint(user, **kw):
        return Grant(org="acme", user=user, agent="cursor", issued=now, expires=now + 600, kid=key.kid,
                     **kw).sign(key.secret)  # fmt: skip

    carol = mint("carol")

    async def run():
        async with http_client(url, carol) as client:
            stored = payload(await client.call_tool("remember", {"content": "Carol's desk is by the window"}))
            hits = payload(await client.call_tool("recall", {"query": "where is carol's desk?", "k": 3}))
            assert hits["memories"][0]["id"] == stored["id"]
        async with http_client(url, "tok-alice") as alice:  # another principal sees nothing of carol's
            refused = await alice.call_tool("get", {"id": stored["id"]})
            assert refused.is_error and "ScopeViolation" in refused.content[0].text

    anyio.run(run)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    head, body, sig = carol.split(".")
    operator = Grant(org="*", operator=True, issued=now, expires=now + 600, kid=op_key.kid).sign(op_key.secret)
    dave = mint("dave")
    ring.revoke(peek(dave).id, now + 600)
    time.sleep(2.5)  # the server reads the key ring again within 2 s
    for bad in (f"{head}.{body}.{sig[:-4]}AAAA", operator, dave, mint("erin", rights={"read"})[:-2]):
        response = httpx2.post(url, json=init, headers=headers | {"Authorization": f"Bearer {bad}"}, timeout=30)
        assert response.status_code == 401, bad[:30]
    kv.close()
    assert proc.poll() is None


def test_http_binds_loopback_only(http_server):
    url, _, _ = http_server
    port = int(url.split(":")[2].split("/")[0])
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=False).stdout
    if out.strip():
        assert all(line.split()[3].startswith("127.0.0.1:") for line in out.strip().splitlines())
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) == 0
