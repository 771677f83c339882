"""Scope and context types, visibility and routing (pure Python)."""

from memorybus.scopes.routing import Router, owner, shard_name
from memorybus.scopes.scope import FIELDS, Context, Level, Scope

__all__ = ["FIELDS", "Context", "Level", "Router", "Scope", "owner", "shard_name"]
