"""`tlmscore plugins`: every kind of plug-in, what is built in, and what each installed entry point added.

One listing for every kind, because one rule holds for every kind (`tlmscore.plugins`): built-ins
first, a plug-in that would replace one refused, a broken one skipped, each with its reason.
"""

from __future__ import annotations

import argparse
import textwrap

from tlmscore import output
from tlmscore.convert import registry as converters
from tlmscore.plugins import loaded
from tlmscore.scoring import base as scorers
from tlmscore.stores import PLUGINS as CONNECTORS
from tlmscore.stores import SOURCE_PLUGINS


def run_plugins(args: argparse.Namespace) -> int:
    """Print every kind of plug-in, in pipeline order: its built-ins, then what each entry point added, or why not."""
    for kind in (SOURCE_PLUGINS, CONNECTORS, converters.PLUGINS, scorers.PLUGINS, output.PLUGINS):
        print(f"{kind.name} plug-ins (entry points: {kind.group})")
        print(textwrap.fill(f"built-in: {', '.join(sorted(kind.builtin())) or 'none'}", width=116,
                            initial_indent="  ", subsequent_indent="    "))
        entries = loaded(kind).entries
        if not entries:
            print("  installed: none")
        for entry in entries:
            origin = f" [{entry.distribution}]" if entry.distribution else ""
            fate = entry.problem or f"adds {', '.join(entry.added)}"
            print(f"  {entry.name} = {entry.value}{origin}: {fate}")
    return 0
