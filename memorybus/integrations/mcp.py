"""The bus over MCP (the official ``mcp`` SDK): ``pip install memorybus[mcp]``, then
``memorybus mcp``.

Identity is the server's, never the model's: every tool acts as one
:class:`memorybus.Context` fixed by the server — for stdio, the one given on the command
line; for streamable HTTP, the one the request's bearer token maps to in a server-side
token file. No tool takes an org, user, agent or session argument; a ``scope`` argument
only names a level *of that identity* (``"user"``: the caller's user scope), so a model
that writes another user's name anywhere reaches nothing of that user's. Every other
refusal of the bus (bad input, a stale version, a memory out of sight) comes back as an
MCP tool error carrying the bus's message; the server keeps serving.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

import memorybus as mb
from memorybus.auth import gatekeeper_for
from memorybus.auth.credential import PREFIX

Level = Literal["org", "user", "agent", "session"]
_FIELDS = ("org", "user", "agent", "session")

INSTRUCTIONS = (
    "Long-term memory shared with the other agents of your organisation. Use `recall` (or `context_for`) "
    "before answering questions about the user, past work or decisions; `remember` durable facts, "
    "preferences and outcomes; keep one current value of a named fact with `assert_fact`. You act as a "
    "fixed identity chosen by the server: you cannot read or write other users' memories."
)


def _context(raw: dict[str, Any]) -> mb.Context:
    org, user, agent, session = (str(raw.get(f) or "") for f in _FIELDS)
    return mb.Context(org, user, agent, session, credential=str(raw.get("credential") or ""))


def _identity(raw: object, where: str) -> mb.Context:
    if not isinstance(raw, dict) or not raw.get("org") or set(raw) - set(_FIELDS):
        raise mb.ConfigError(where, "an identity is a JSON object with org (required), user, agent, session")
    return _context(raw)


def _read_private(path: str | Path) -> str:
    """The text of a file only its owner may read: a file that its group or others may
    read or write (``mode & 0o077``) is refused with ConfigError naming it and the fix.
    The mode is checked on the descriptor that is then read (no swap in between)."""
    fd = os.open(path, os.O_RDONLY)
    with os.fdopen(fd, "r", encoding="utf-8") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise mb.ConfigError("tokens", f"{path} is not a regular file")
        if st.st_mode & 0o077:
            raise mb.ConfigError("tokens", f"{path} holds bearer tokens but its group or others may access it "
                                 f"(mode {stat.S_IMODE(st.st_mode):04o}); run: chmod 600 {path}")
        return f.read()


def load_tokens(path: str | Path) -> dict[str, mb.Context]:
    """A token file: a JSON object mapping each bearer token to an identity,
    ``{"<token>": {"org": "acme", "user": "alice", "agent": "claude"}}``. The file must
    be private to its owner (``chmod 600``): one that its group or others may read or
    write raises ConfigError."""
    try:
        text = _read_private(path)
        raw = json.loads(text)
    except mb.ConfigError:
        raise
    except (OSError, ValueError) as exc:
        raise mb.ConfigError("tokens", f"cannot read {path}: {exc}") from None
    if not isinstance(raw, dict) or not raw:
        raise mb.ConfigError("tokens", f"{path} must map tokens to identities")
    return {str(token): _identity(ident, f"tokens[{token[:4]}...]") for token, ident in raw.items()}


class TokenIdentities:
    """An MCP ``TokenVerifier``. A bearer token is valid when it is a memorybus credential
    that checks out against the bus's key ring (signature, expiry, revocation; an
    operator's credential is refused: MCP clients act as agents), or when the token
    file names it. The identity travels in the access token's claims; a credential
    travels too, and every tool call carries it to the shards, which verify it again."""

    def __init__(self, tokens: dict[str, mb.Context], bus: mb.MemoryBus | None = None) -> None:
        self.tokens = tokens
        self._gate = gatekeeper_for(bus.config) if bus is not None and bus.config.auth != "trusted" else None

    async def verify_token(self, token: str) -> AccessToken | None:
        ctx = self.tokens.get(token)
        credential = ""
        if ctx is None and self._gate is not None and token.startswith(f"{PREFIX}."):
            try:
                grant = self._gate.grant(token)
            except mb.MemoryBusError:
                return None
            if grant.operator:
                return None
            ctx, credential = grant.context, token
        if ctx is None:
            return None
        ident = {**{f: getattr(ctx, f) for f in _FIELDS}, "credential": credential}
        return AccessToken(token=token, client_id=f"{ctx.org}/{ctx.user}/{ctx.agent}", scopes=[],
                           claims={"memorybus": ident})  # fmt: skip


def _memory(node: mb.MemoryNode, score: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": node.id,
        "content": node.content,
        "kind": node.kind.value,
        "scope": node.scope.level.value,
        "version": node.version,
        "status": node.status.value,
        "key": node.key,
        "importance": node.importance,
        "confidence": node.confidence,
        "tags": list(node.tags),
        "created_at": node.created_at,
    }
    if score is not None:
        out["score"] = round(float(score), 4)
    return out


@contextlib.contextmanager
def bus_errors() -> Iterator[None]:
    """A refusal of the bus becomes an MCP tool error with the bus's message."""
    try:
        yield
    except mb.MemoryBusError as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from None


def _hints(*, read_only: bool, destructive: bool, idempotent: bool) -> ToolAnnotations:
    """Every hint set explicitly; no tool reaches outside the bus (not open-world)."""
    return ToolAnnotations(read_only_hint=read_only, destructive_hint=destructive, idempotent_hint=idempotent,
                           open_world_hint=False)  # fmt: skip


READ = _hints(read_only=True, destructive=False, idempotent=True)


def build_server(bus: mb.MemoryBus, identity: mb.Context | None = None, **server_kwargs: Any) -> MCPServer:
    """An MCP server over ``bus``. ``identity``: the fixed caller (stdio); ``None``: the
    caller is the identity of the request's access token (HTTP with a token verifier,
    passed in ``server_kwargs`` with ``auth``)."""
    server: MCPServer = MCPServer("memorybus", instructions=INSTRUCTIONS, version=mb.__version__, **server_kwargs)

    def caller() -> mb.Context:
        if identity is not None:
            return identity
        token = get_access_token()
        claims = (token.claims or {}).get("memorybus") if token is not None else None
        if not isinstance(claims, dict):
            raise ToolError("not authenticated: this server needs a bearer token that maps to an identity")
        return _context(claims)

    def tool(annotations: ToolAnnotations) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return server.tool(annotations=annotations)

    @tool(_hints(read_only=False, destructive=False, idempotent=False))
    async def remember(
        content: Annotated[str, Field(description="The memory, one self-contained statement.")],
        scope: Annotated[Level, Field(description="Who shares it: your 'session', 'agent', 'user' or 'org'.")] = "user",
        kind: Annotated[
            Literal["episodic", "semantic", "procedural", "working"],
            Field(description="'episodic' (an event), 'semantic' (a fact), 'procedural' (how-to), 'working'."),
        ] = "semantic",
        importance: Annotated[float, Field(ge=1, le=10, description="1 (trivial) to 10 (critical).")] = 5,
        tags: Annotated[list[str] | None, Field(description="Labels; 'pinned' keeps it in context_for.")] = None,
    ) -> dict[str, Any]:
        """Store a durable memory: a fact, preference, decision or outcome worth recalling later. Returns its id and
        version. Exact duplicates are not stored twice."""
        with bus_errors():
            node = await bus.remember_async(content, caller(), scope=scope, kind=kind, importance=importance,
                                            tags=tuple(tags or ()))  # fmt: skip
            return _memory(node)

    @tool(READ)
    async def recall(
        query: Annotated[str, Field(description="What you want to know, in natural language.")],
        k: Annotated[int, Field(ge=1, le=50, description="How many memories to return.")] = 5,
    ) -> dict[str, Any]:
        """Find the memories you may see that best answer a query, best first, with relevance scores. Use it
        before answering questions about the user, earlier work or decisions."""
        with bus_errors():
            hits = await bus.recall_async(query, caller(), k=k)
            return {"memories": [_memory(h.node, h.score) for h in hits]}

    @tool(READ)
    async def get(id: Annotated[str, Field(description="A memory id from remember or recall.")]) -> dict[str, Any]:
        """Read one memory by id, with its current version (needed by update)."""
        with bus_errors():
            return _memory(await bus.get_async(id, caller()))

    @tool(_hints(read_only=False, destructive=True, idempotent=False))
    async def update(
        id: Annotated[str, Field(description="The memory's id.")],
        expected_version: Annotated[int, Field(description="The version you read (get/recall); a newer one fails.")],
        content: Annotated[str | None, Field(description="New text, or omit to keep it.")] = None,
        importance: Annotated[float | None, Field(ge=1, le=10, description="New importance, or omit.")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags, or omit.")] = None,
    ) -> dict[str, Any]:
        """Change a memory if it is still at expected_version (compare-and-set). If someone changed it since, this
        fails with VersionConflict: get it again and retry with the new version."""
        with bus_errors():
            changes: dict[str, Any] = {"content": content, "importance": importance}
            if tags is not None:
                changes["tags"] = tuple(tags)
            changes = {k: v for k, v in changes.items() if v is not None}
            return _memory(await bus.update_async(id, caller(), expected_version=expected_version, **changes))

    @tool(_hints(read_only=False, destructive=True, idempotent=True))
    async def forget(
        id: Annotated[str, Field(description="The memory's id.")],
        expected_version: Annotated[int | None, Field(description="Only if still at this version.")] = None,
    ) -> dict[str, Any]:
        """Delete a memory for good (store and index). Use when the user asks to forget something or it is wrong."""
        with bus_errors():
            return {"forgotten": await bus.forget_async(id, caller(), expected_version=expected_version), "id": id}

    @tool(_hints(read_only=False, destructive=False, idempotent=False))
    async def assert_fact(
        key: Annotated[str, Field(description="The fact's name, e.g. 'backend_language' or 'home_city'.")],
        content: Annotated[str, Field(description="Its value, as a sentence.")],
        scope: Annotated[Level, Field(description="Whose fact: your 'user', 'agent', 'session', or 'org'.")] = "user",
        confidence: Annotated[float, Field(ge=0, le=1, description="How sure you are, 0 to 1.")] = 1.0,
    ) -> dict[str, Any]:
        """Set the value of a named fact that has one current value (a preference, a setting, a status). The bus
        resolves it against the current value (newer and more confident wins); the loser stays in its history."""
        with bus_errors():
            result = await bus.assert_fact_async(key, content, caller(), scope=scope, confidence=confidence)
            return {"outcome": result.outcome, "current": result.current, "memory": _memory(result.node)}

    @tool(READ)
    async def current_fact(
        key: Annotated[str, Field(description="The fact's name, as given to assert_fact.")],
        scope: Annotated[Level, Field(description="The level it was asserted at.")] = "user",
    ) -> dict[str, Any]:
        """The current value of a named fact, or null if it was never asserted."""
        with bus_errors():
            node = await bus.current_fact_async(key, caller(), scope=scope)
            return {"fact": None if node is None else _memory(node)}

    @tool(READ)
    async def history(
        key: Annotated[str, Field(description="The fact's name.")],
        scope: Annotated[Level, Field(description="The level it was asserted at.")] = "user",
    ) -> dict[str, Any]:
        """Every value ever asserted for a named fact, oldest first, with the outcome of each (created, superseded,
        rejected, reinforced) and who asserted it."""
        with bus_errors():
            events = await bus.history_async(key, caller(), scope=scope)
            return {"history": [{"outcome": e.data.get("outcome", e.kind.value), "content": e.node.content,
                                 "at": e.at, "by": e.by} for e in events]}  # fmt: skip

    @tool(READ)
    async def context_for(
        query: Annotated[str, Field(description="The task or question at hand.")],
        token_budget: Annotated[int, Field(ge=50, le=8000, description="Maximum size of the block in tokens.")] = 800,
    ) -> str:
        """A prompt-ready block of what you should know for a task: pinned core memories, then the relevant ones
        grouped by session and dated, within a token budget."""
        with bus_errors():
            block = await bus.context_for_async(query, caller(), token_budget=token_budget)
            return block.text or "(no memories)"

    recent_doc = "The 20 most recent memories at one level of your scope (org, user, agent or session)."

    @server.resource("memorybus://recent/{level}", name="recent", mime_type="application/json", description=recent_doc)
    async def recent(level: str) -> str:
        last: deque[mb.MemoryNode] = deque(maxlen=20)
        cursor = None
        with bus_errors():
            while True:
                page = await bus.list_memories_async(caller(), scope=level, limit=1000, cursor=cursor)
                last.extend(page.memories)
                if page.cursor is None:
                    break
                cursor = page.cursor
        return json.dumps([_memory(n) for n in reversed(last)])

    return server
