"""`tlmscore annotate SCORED [--to TARGET]` and `score --annotate [TARGET]`: scores written back onto traces.

A bare `--annotate` (or the target `origin`) sends each row back to where it came from, by its
`origin` (see `tlmscore.annotate.destination`); rows with no trace are counted, not failed.

The scores file is always written first; annotations that fail are listed on stderr and kept in a
side file (`SCORED.annotate-failed.jsonl`, or `--failed FILE`) whose rows name the target they
failed at: `tlmscore annotate SIDE` replays each row to its target (`--to` picks some of them),
rewriting the side file with what still fails and removing it when nothing does.

Keys go only to the server they are for: the one their store's variable names, else the one
server of the store the command line names (an input or a target), never an address read from
a scored file or a side file (see `tlmscore.stores.credentials`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tlmscore.annotate import (
    ORIGIN,
    Clock,
    Policy,
    by_destination,
    deliver,
    input_destination,
    needed,
    read_side_file,
    side_row,
    write_side_file,
)
from tlmscore.errors import ConfigError
from tlmscore.output import read_rows
from tlmscore.stores import (
    Target,
    check_source,
    connectors,
    find_reader,
    is_live,
    keyed,
    parse_target,
    source_server,
    target_forms,
)

SIDE_SUFFIX = ".annotate-failed.jsonl"
NO_TRACE = "not annotated: no trace to go back to"
DEFAULT_TIMEOUT = 20.0
DEFAULT_DEADLINE = 3600.0


def add_annotate_flags(parser: argparse.ArgumentParser) -> None:
    """`score`'s `--annotate` flags, in a group of their own."""
    group = parser.add_argument_group("annotations (scores written back onto traces)")
    group.add_argument("--annotate", action="append", default=[], metavar="TARGET", nargs="?", const=ORIGIN,
                       help="after writing OUT, annotate its rows: alone, back to where each row came from "
                            f"(its origin); or {target_forms()} (repeatable)")
    group.add_argument("--annotate-threshold", type=float, default=0.5, metavar="T",
                       help="annotation label: supported at or above T, unsupported below (default 0.5)")
    group.add_argument("--annotate-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                       help=f"how long one write-back request may take (default {DEFAULT_TIMEOUT:g})")
    group.add_argument("--annotate-deadline", type=float, default=DEFAULT_DEADLINE, metavar="SECONDS",
                       help="when to stop writing back and keep the rest in the side file "
                            f"(default {DEFAULT_DEADLINE:g})")


def add_annotate_parser(sub: Any) -> None:
    """The `annotate` subcommand's flags."""
    annotate = sub.add_parser("annotate", help="write the scores of a scored output back as trace annotations")
    annotate.add_argument("scored", type=Path, metavar="SCORED",
                          help="a `tlmscore score` output, or a side file of annotations that failed")
    annotate.add_argument("--to", action="append", default=[], metavar="TARGET",
                          help=f"{ORIGIN} (where each row came from), {target_forms()} (repeatable); "
                               "a side file's rows go back to the target each names, unless --to picks some")
    annotate.add_argument("--threshold", type=float, default=0.5,
                          help="label: supported at or above it, unsupported below (default 0.5)")
    annotate.add_argument("--failed", type=Path, metavar="FILE",
                          help=f"side file for annotations that failed (default SCORED{SIDE_SUFFIX})")
    annotate.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                          help=f"how long one request may take (default {DEFAULT_TIMEOUT:g})")
    annotate.add_argument("--deadline", type=float, default=DEFAULT_DEADLINE, metavar="SECONDS",
                          help=f"when to stop and keep the rest in the side file (default {DEFAULT_DEADLINE:g})")


def named_servers(targets: Sequence[str], inputs: Sequence[Path | str], env: Mapping[str, str]) -> dict[str, list[str]]:
    """The servers the command line names, by store: its live inputs and its explicit targets."""
    named: dict[str, list[str]] = {}
    for item in inputs:
        found = source_server(item) if isinstance(item, str) else None
        if found is not None:
            named.setdefault(found[0], []).append(found[1])
    for text in targets:
        if text != ORIGIN:
            target = parse_target(text, env)
            if not target.file:
                named.setdefault(target.store, []).append(target.location)
    return named


def _keyed(target: Target, env: Mapping[str, str], named: Mapping[str, list[str]]) -> Target:
    return keyed(target, env, named.get(target.store, []))


def check_targets(targets: list[str], inputs: Sequence[Path | str] | None = None, fmt: str | None = None) -> None:
    """Refuse a target that cannot be used, before any work is done.

    For `origin`, the targets the inputs' rows will go back to (known from the reader of each input)
    must be configured; a key that would go to two servers must say which one it is for.
    """
    env = os.environ
    named = named_servers(targets, inputs or [], env)
    for text in targets:
        if text != ORIGIN:
            _keyed(parse_target(text, env), env, named)
            continue
        for back in needed(_input_destination(item, fmt) for item in inputs or []):
            try:
                _keyed(parse_target(back, env), env, named)
            except ConfigError as exc:
                raise ConfigError(f"--annotate (back to each row's origin): {exc}") from None


def target_files(targets: Sequence[str]) -> list[Path]:
    """The files annotations are written to (`otlp-json:FILE`), of the targets that are files."""
    found = []
    for text in targets:
        if text != ORIGIN:
            target = parse_target(text, os.environ)
            if target.file:
                found.append(Path(target.location))
    return found


def check_live_inputs(inputs: Sequence[Path | str], targets: Sequence[str]) -> None:
    """Each live input answers and is the store its address names (one line, before any work)."""
    env = os.environ
    named = named_servers(targets, inputs, env)
    for item in inputs:
        found = source_server(item) if isinstance(item, str) and is_live(item) else None
        if found is not None:
            check_source(str(item), env, named.get(found[0], []))


def _input_destination(item: Path | str, fmt: str | None) -> str | None:
    reader = find_reader(str(item), fmt)
    return input_destination(str(item), reader.name if reader is not None else None)


def side_file(scored: Path, given: Path | None) -> Path:
    """Where failed annotations go: `given`, a side file itself when replaying one, else beside SCORED."""
    if given is not None:
        return given
    return scored if scored.name.endswith(SIDE_SUFFIX) else scored.with_name(scored.name + SIDE_SUFFIX)


Plan = list[tuple[str | None, list[Any], bool]]
"""(target text, its rows, whether it is the rows' origin) for each delivery."""


def _plan(rows: list[Any], targets: list[str], replay: bool, env: Mapping[str, str]) -> tuple[Plan, list[Any]]:
    """(target text, rows) for each delivery, and the side file's rows this run leaves as they are."""
    if replay:
        wanted = {parse_target(t, env).text for t in targets if t != ORIGIN}
        if ORIGIN in targets:
            raise ConfigError("a side file's rows go back to the target each names: leave out --to origin "
                              f"(or give one of {', '.join(sorted({r['target'] for r in rows}))})")
        groups: dict[str | None, list[Any]] = {}
        for row in rows:
            groups.setdefault(row["target"], []).append(row)
        unknown = sorted(wanted - set(groups))
        if unknown:
            raise ConfigError(f"--to {unknown[0]}: no row of this side file failed there; its rows go back to "
                              f"{', '.join(sorted(map(str, groups)))} (leave out --to to replay them)")
        chosen: Plan = [(t, g, False) for t, g in groups.items() if not wanted or t in wanted]
        return chosen, [r for t, g in groups.items() if wanted and t not in wanted for r in g]
    if not targets:
        raise ConfigError("--to TARGET is needed: the rows of a scored output name no target (a side file's do)")
    plan: Plan = []
    for text in dict.fromkeys(targets):  # a target given twice is written to once
        if text == ORIGIN:
            plan += [(back, group, True) for back, group in by_destination(rows).items()]
        else:
            plan.append((text, rows, False))
    return plan, []


def annotate_file(scored: Path, targets: list[str], *, threshold: float, failed: Path | None = None,
                  inputs: Sequence[Path | str] = (), timeout: float = DEFAULT_TIMEOUT,
                  deadline: float | None = DEFAULT_DEADLINE) -> int:
    """Annotate the rows of `scored` (a scored output, or a side file); returns the rows left in the side file."""
    env = os.environ
    replay = read_side_file(scored)
    rows: list[Any] = replay if replay is not None else list(read_rows(scored))
    plan, untouched = _plan(rows, targets, replay is not None, env)
    named = named_servers(targets, inputs, env)
    for given in targets:  # each target given is usable, and its keys know their server, before anything is sent
        if given != ORIGIN:
            _keyed(parse_target(given, env), env, named)
    clock, policy = Clock.within(deadline), Policy(timeout=timeout)
    failures: list[dict[str, Any]] = []
    attempted: set[tuple[str, str]] = set()
    for text, group, back in plan:
        if text is None:
            print(f"tlmscore: {NO_TRACE}: {len(group)} rows", file=sys.stderr)
            continue
        shown, kept = _to_target(text, group, threshold, env, named=named, policy=policy, clock=clock,
                                 of=" (the rows' origin)" if back else "")
        attempted.update((str(r.get("id")), shown) for r in group)
        failures += kept
    path = side_file(scored, failed)
    earlier = untouched if replay is not None and path == scored else (read_side_file(path) or [])
    left = [r for r in earlier if (str(r.get("id")), str(r.get("target"))) not in attempted] + failures
    write_side_file(path, left)
    if left:
        where = ", ".join(dict.fromkeys(str(r.get("target")) for r in left))
        print(f"tlmscore: {len(left)} rows not annotated, kept in {path} ({where}); replay with: "
              f"tlmscore annotate {path}", file=sys.stderr)
    return len(left)


def _to_target(text: str, rows: list[Any], threshold: float, env: Mapping[str, str], *,
               named: Mapping[str, list[str]], policy: Policy, clock: Clock, of: str = "") -> tuple[str, list[Any]]:
    """Deliver `rows` to one target; print what was written; the target's name and the side rows that failed."""
    try:
        target = _keyed(parse_target(text, env), env, named)
    except ConfigError as exc:
        print(f"tlmscore: warning: {len(rows)} rows not annotated: {exc}", file=sys.stderr)
        return text, [side_row(r, text) for r in rows]
    store = connectors()[target.store]
    if store.keys.given(env) and not target.headers and not target.file:
        print(f"tlmscore: {text}: sent without {', '.join(store.keys.secrets)}, which go only to the "
              f"server {store.keys.servers[0]} names (or the one the command line names)", file=sys.stderr)
    outcome = deliver(rows, target, threshold=threshold, policy=policy, clock=clock)
    skipped = f" ({outcome.skipped} rows have no {store.annotates} to annotate)" if outcome.skipped else ""
    print(f"tlmscore: annotations to {text}{of}: {outcome.written} of {len(rows)} written{skipped}",
          file=sys.stderr)
    for error in outcome.errors:
        print(f"tlmscore: warning: annotations to {text} failed: {error}", file=sys.stderr)
    if outcome.gave_up:
        print(f"tlmscore: warning: annotations to {text}: {outcome.gave_up}", file=sys.stderr)
    return target.text, outcome.failed_rows


def run_annotate(args: argparse.Namespace) -> int:
    """`tlmscore annotate`: exit 0 when every annotation was written, 1 while rows are left in the side file."""
    left = annotate_file(args.scored, args.to, threshold=args.threshold, failed=args.failed, timeout=args.timeout,
                         deadline=args.deadline)
    return 1 if left else 0
