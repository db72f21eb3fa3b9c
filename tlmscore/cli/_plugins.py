"""`tlmscore plugins`: every kind of plug-in, what is built in, and what each installed entry point added.

One listing for every kind, because one rule holds for every kind (`tlmscore.plugins`): built-ins
first, a plug-in that would replace one refused, a broken one skipped, each with its reason.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Iterator
from typing import Any

from tlmscore import output
from tlmscore.convert import registry as converters
from tlmscore.plugins import Kind, loaded
from tlmscore.scoring import base as scorers
from tlmscore.stores import PLUGINS as CONNECTORS
from tlmscore.stores import SOURCE_PLUGINS


def kinds() -> tuple[Kind[Any], ...]:
    """Every kind of plug-in, in pipeline order."""
    return (SOURCE_PLUGINS, CONNECTORS, converters.PLUGINS, scorers.PLUGINS, output.PLUGINS)


def listing() -> Iterator[str]:
    """The lines `tlmscore plugins` prints."""
    for kind in kinds():
        builtin = sorted(kind.builtin())
        yield f"{kind.name} plug-ins (entry points: {kind.group})"
        yield from textwrap.wrap(f"built-in: {', '.join(builtin) or 'none'}", width=116, initial_indent="  ",
                                 subsequent_indent="    ")
        entries = loaded(kind).entries
        if not entries:
            yield "  installed: none"
        for entry in entries:
            origin = f" [{entry.distribution}]" if entry.distribution else ""
            fate = entry.problem or f"adds {', '.join(entry.added)}"
            yield f"  {entry.name} = {entry.value}{origin}: {fate}"


def run_plugins(args: argparse.Namespace) -> int:
    """Print the listing to stdout."""
    for line in listing():
        print(line)
    return 0
