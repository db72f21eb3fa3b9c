"""The flag reference of docs/cli.md, made from the argument parser itself.

`python -m tlmscore.cli._reference docs/cli.md` rewrites the part of the page between `BEGIN` and
`END`: every command, its flags by the groups `--help` shows, each with its help text (defaults
filled in). tests/docs/test_documents.py fails when the page and the parser differ.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tlmscore.cli._args import build_parser

BEGIN = "<!-- flags: made by `python -m tlmscore.cli._reference docs/cli.md` from the parser; do not edit -->"
END = "<!-- end of flags -->"


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices is not None:
        return "|".join(str(c) for c in action.choices)
    return action.dest.upper() if action.option_strings else action.dest


def _invocation(action: argparse.Action) -> str:
    """How the flag is written: `-o, --output OUT`, `--annotate [TARGET]`, `INPUT...`."""
    if not action.option_strings:
        return f"{_metavar(action)}..." if action.nargs in ("+", "*") else _metavar(action)
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return names
    value = f"[{_metavar(action)}]" if action.nargs == "?" else _metavar(action)
    return f"{names} {value}"


def _help(action: argparse.Action, prog: str) -> str:
    """The help text as `--help` shows it (`%(default)s` and the like filled in), on one line."""
    text = action.help or ""
    if "%" in text:
        params = {**vars(action), "prog": prog}
        if action.choices is not None:
            params["choices"] = ", ".join(str(c) for c in action.choices)
        text = text % params
    return " ".join(text.split())


def _cell(text: str) -> str:
    """Text for a Markdown table cell: its bars escaped, and `<think>` shown rather than read as HTML."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _shown(actions: list[argparse.Action]) -> list[argparse.Action]:
    """The flags `--help` lists, without `--help` itself and the commands."""
    hidden = (argparse._HelpAction, argparse._SubParsersAction)
    return [a for a in actions if a.help != argparse.SUPPRESS and not isinstance(a, hidden)]


def _table(actions: list[argparse.Action], prog: str) -> list[str]:
    # the flag as a code span: Python-Markdown keeps a bar inside a code span in its cell
    rows = [f"| `{_invocation(a)}` | {_cell(_help(a, prog))} |" for a in actions]
    return ["| flag | what it does |", "|---|---|", *rows, ""]


def _command(parser: argparse.ArgumentParser, title: str) -> list[str]:
    lines = [f"### `{title}`", ""]
    for group in parser._action_groups:
        actions = _shown(group._group_actions)
        if actions:
            lines += [f"**{group.title}**", "", *_table(actions, parser.prog)]
    return lines


def reference() -> str:
    """The reference: the top-level flags, then each command's, in the order `tlmscore --help` lists them."""
    parser = build_parser()
    lines = ["### `tlmscore`", "", *_table(_shown([a for a in parser._actions if a.option_strings]), parser.prog)]
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in commands.choices.items():
        lines += _command(command, f"tlmscore {name}")
    return "\n".join(lines).rstrip("\n") + "\n"


def with_reference(text: str) -> str:
    """A page's text with the reference between its markers."""
    head, begin, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"no {BEGIN!r} … {END!r} markers")
    return f"{head}{BEGIN}\n\n{reference()}\n{END}{tail}"


def rewrite(page: Path) -> bool:
    """Put the reference between the page's markers; whether the page changed."""
    text = page.read_text(encoding="utf-8")
    new = with_reference(text)
    if new != text:
        page.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{name}: {'rewritten' if rewrite(Path(name)) else 'unchanged'}")
