"""Pluggable callables named in the configuration (a judge, a summarizer)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from memorybus.errors import ConfigError


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


__all__ = ["resolve_hook"]
