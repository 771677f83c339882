"""Pluggable callables named in the configuration (a judge, a summarizer).

:func:`resolve_hook` turns a configured value into a callable; :func:`call_hook`
runs one: whatever it raises, or a result its ``check`` refuses, becomes
:class:`~memorybus.errors.HookFailed` naming the hook, so a user's hook never escapes
as a raw ``TypeError`` through the bus. Hooks run before their call's commit, so a
failed hook leaves nothing written.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from memorybus.errors import ConfigError, HookFailed, MemoryBusError


def resolve_hook(value: Any, name: str) -> Callable[..., Any] | None:
    """A pluggable callable given as itself or as an import path ``"package.module:attr"``
    (``"package.module.attr"`` also works). None stays None. Raises ConfigError when
    the path does not import or does not name a callable."""
    if value is None or callable(value):
        return value
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(name, "must be a callable, an import path 'package.module:function', or None")
    module_name, sep, attr = value.partition(":")
    if not sep:
        module_name, _, attr = value.rpartition(".")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(name, f"cannot import {value!r}: {exc}") from None
    if not callable(target):
        raise ConfigError(name, f"{value!r} is not callable")
    return target


def call_hook(name: str, hook: Callable[..., Any], *args: Any, check: Callable[[Any], str | None] | None = None) -> Any:
    """``hook(*args)``; raises HookFailed(name, ...) when it raises (a MemoryBusError of
    its own passes through unchanged) or when ``check(result)`` returns a reason."""
    try:
        result = hook(*args)
    except MemoryBusError:
        raise
    except Exception as exc:  # the caller's code: any error becomes HookFailed (see test_code_rules)
        raise HookFailed(name, f"raised {type(exc).__name__}: {exc}") from exc
    reason = check(result) if check is not None else None
    if reason is not None:
        raise HookFailed(name, reason)
    return result


def text_result(value: object) -> str | None:
    """A ``check`` for hooks that return text (a summarizer): a non-empty string."""
    if isinstance(value, str) and value.strip():
        return None
    return f"returned {type(value).__name__} {str(value)[:60]!r} (expected non-empty text)"


__all__ = ["call_hook", "resolve_hook", "text_result"]
