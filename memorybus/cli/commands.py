"""How a ``memorybus`` subcommand is declared: one call names it, says what runs it,
and adds the flag sets it shares with other commands (the command's own flags follow)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def command(
    sub: Any,
    name: str,
    run: Callable[[argparse.Namespace], int],
    help: str,
    *flags: Callable[[argparse.ArgumentParser], None],
    **options: Any,
) -> argparse.ArgumentParser:
    """The subcommand ``name`` of ``sub`` (what ``add_subparsers()`` returned), run by
    ``run`` (``args.func``), with each shared flag set of ``flags`` added to it;
    ``options`` go to ``add_parser`` (``description=...``)."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=help, **options)
    p.set_defaults(func=run)
    for add in flags:
        add(p)
    return p
