"""Scopes, caller contexts and the visibility rule.

A scope is ``(org, user, agent, session)``; ``org`` is required, the other
fields may be empty. A memory is visible to a context when every non-empty
field of the memory's scope equals the context's field. Pure Python: no Ray,
no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from itertools import product

from memorybus.errors import InvalidRequest
from memorybus.validation import is_text

FIELDS = ("org", "user", "agent", "session")
_MAX_FIELD = 256


class Level(StrEnum):
    """Named widths of a scope, from widest to narrowest."""

    ORG = "org"
    USER = "user"
    AGENT = "agent"
    SESSION = "session"


def _check_field(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"scope.{name}", f"must be a string, got {type(value).__name__}")
    if len(value) > _MAX_FIELD:
        raise InvalidRequest(f"scope.{name}", f"longer than {_MAX_FIELD} characters")
    if "\x1f" in value or "\n" in value:
        raise InvalidRequest(f"scope.{name}", "contains a control separator")
    if not is_text(value):
        raise InvalidRequest(f"scope.{name}", "contains a lone surrogate (not valid Unicode text)")
    return value


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a memory lives. ``org`` is required; empty fields mean "any"."""

    org: str
    user: str = ""
    agent: str = ""
    session: str = ""

    def __post_init__(self) -> None:
        for name in FIELDS:
            _check_field(name, getattr(self, name))
        if not self.org:
            raise InvalidRequest("scope.org", "is required")

    @property
    def key(self) -> str:
        """A stable string naming this scope (the routing and storage key)."""
        return "\x1f".join((self.org, self.user, self.agent, self.session))

    @classmethod
    def from_key(cls, key: str) -> Scope:
        parts = key.split("\x1f")
        if len(parts) != 4:
            raise InvalidRequest("scope_key", f"malformed scope key {key!r}")
        return cls(*parts)

    def as_tuple(self) -> tuple[str, str, str, str]:
        return (self.org, self.user, self.agent, self.session)

    @property
    def level(self) -> Level:
        """The narrowest non-empty field."""
        if self.session:
            return Level.SESSION
        if self.agent:
            return Level.AGENT
        if self.user:
            return Level.USER
        return Level.ORG

    def visible_to(self, context: Context) -> bool:
        """The visibility rule: every non-empty field equals the context's field."""
        return (
            (not self.org or self.org == context.org)
            and (not self.user or self.user == context.user)
            and (not self.agent or self.agent == context.agent)
            and (not self.session or self.session == context.session)
        )

    def widen(self, to: Level | str) -> Scope:
        """This scope widened to ``to``: fields narrower than ``to`` are emptied.

        ``user`` keeps org and user; ``agent`` keeps org, user and agent;
        ``session`` keeps everything. Widening never narrows: asking for a level
        narrower than the scope's own returns the scope unchanged.
        """
        level = Level(to)
        if level is Level.ORG:
            return Scope(self.org)
        if level is Level.USER:
            return Scope(self.org, self.user)
        if level is Level.AGENT:
            return Scope(self.org, self.user, self.agent)
        return self

    def __str__(self) -> str:
        parts = [f"org={self.org}"]
        parts += [f"{n}={getattr(self, n)}" for n in FIELDS[1:] if getattr(self, n)]
        return "Scope(" + ", ".join(parts) + ")"


@dataclass(frozen=True, slots=True)
class Context:
    """Who is calling: the caller's own scope plus optional roles.

    ``Context(org="acme", user="u1", agent="planner", session="s1")`` sees org,
    user, agent and session memories that match it.
    """

    org: str
    user: str = ""
    agent: str = ""
    session: str = ""
    roles: frozenset[str] = field(default_factory=frozenset)
    #: the credential this context travels with (set by a bound handle, see
    #: memorybus.auth); not part of the context's identity
    credential: str = field(default="", compare=False, repr=False)
    #: the scope levels this context may write to (None: every level); set by the
    #: actor that verified the credential, never trusted from a caller
    levels: frozenset[str] | None = field(default=None, compare=False, repr=False)
    #: who the verified credential names (``acme/u1/planner#<id>``), set by the actor
    #: that admitted the call: provenance and audit read it
    principal: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in FIELDS:
            _check_field(name, getattr(self, name))
        if not self.org:
            raise InvalidRequest("context.org", "is required")
        if not isinstance(self.credential, str):
            raise InvalidRequest("context.credential", "must be a credential string")
        if isinstance(self.roles, str):
            raise InvalidRequest("context.roles", "must be a collection of role names, not a string")
        if not isinstance(self.roles, frozenset):
            object.__setattr__(self, "roles", frozenset(self.roles))
        if not all(is_text(r) and r and len(r) <= _MAX_FIELD for r in self.roles):
            raise InvalidRequest("context.roles", "must be non-empty strings of valid Unicode text")

    @property
    def scope(self) -> Scope:
        """The narrowest scope this context owns."""
        return Scope(self.org, self.user, self.agent, self.session)

    def manages(self, scope: Scope) -> bool:
        """Whether this context may manage ``scope`` (run maintenance over it, list its
        subscriptions): every non-empty field of the context equals the scope's. An org
        context manages its whole org, a user context that user's scopes; nobody manages
        another org."""
        return all(
            not mine or mine == theirs
            for mine, theirs in zip(self.scope.as_tuple(), scope.as_tuple(), strict=True)
        )

    def visible_scopes(self) -> list[Scope]:
        """Every scope whose memories this context may see (at most 8).

        Each non-empty field of the context may be kept or emptied; org is kept.
        """
        choices: list[tuple[str, ...]] = [(self.org,)]
        for name in FIELDS[1:]:
            value = getattr(self, name)
            choices.append(("", value) if value else ("",))
        return [Scope(*combo) for combo in product(*choices)]

    def default_scope(self, kind: str = "episodic") -> Scope:
        """Where a write lands when the caller names no scope: the writer's own scope
        without the session (``(org, user, agent)``), so the same agent still sees it
        in its next session and no other agent does; working memory (``kind
        "working"``), scratch by nature, stays in the session.
        """
        if kind == "working":
            return self.scope
        return Scope(self.org, self.user, self.agent)

    def resolve_scope(self, scope: Scope | Level | str | None) -> Scope:
        """Turn a level name (or None: the context's own scope) into a Scope."""
        if scope is None:
            return self.scope
        if isinstance(scope, Scope):
            return scope
        try:
            level = Level(scope)
        except ValueError:
            raise InvalidRequest("scope", f"unknown scope level {scope!r}") from None
        needed = {Level.USER: self.user, Level.AGENT: self.agent, Level.SESSION: self.session}
        if level in needed and not needed[level]:
            raise InvalidRequest("scope", f"context has no {level.value} to scope to")
        return self.scope.widen(level)

    def __str__(self) -> str:
        return str(self.scope).replace("Scope(", "Context(")
