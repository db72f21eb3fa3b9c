"""`tlmscore annotate SCORED [--to TARGET]` and `score --annotate [TARGET]`: scores written back onto traces.

A bare `--annotate` (or the target `origin`) sends each row back to where it came from, by its
`origin` (see `tlmscore.annotate.destination`); rows with no trace are counted, not failed.

The write-back is `tlmscore.annotate.WriteBack`: this module builds it from the flags and says
what it did. Annotations that fail are listed on stderr and kept in a side file
(`SCORED.annotate-failed.jsonl`, or `--failed FILE`) whose rows name the target they failed at:
`tlmscore annotate SIDE` replays each row to its target (`--to` picks some of them).

Keys go only to the server they are for: the one their store's variable names, else the one
server of the store the command line names (an input or a target), never an address read from
a scored file or a side file (see `tlmscore.stores.credentials`).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tlmscore.annotate import (
    ORIGIN,
    Finished,
    Report,
    WriteBack,
    bound,
    input_destination,
    named_servers,
    needed,
    progress_path,
    read_side_file,
)
from tlmscore.errors import ConfigError
from tlmscore.ingest import decide
from tlmscore.output import read_rows
from tlmscore.stores import (
    check_source,
    connectors,
    find_reader,
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
                       help="annotate OUT's rows as they are saved: alone, back to where each row came from "
                            f"(its origin); or {target_forms()} (repeatable)")
    group.add_argument("--annotate-threshold", type=float, default=0.5, metavar="T",
                       help="annotation label: supported at or above T, unsupported below (default 0.5)")
    group.add_argument("--annotate-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                       help=f"how long one write-back request may take (default {DEFAULT_TIMEOUT:g})")
    group.add_argument("--annotate-deadline", type=float, default=DEFAULT_DEADLINE, metavar="SECONDS",
                       help="time writing back may take before the rest is kept in the side file "
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


def check_targets(targets: list[str], inputs: Sequence[Path | str], fmt: str | None) -> None:
    """Refuse a target that cannot be used, before any work is done.

    For `origin`, the targets the inputs' rows will go back to (known from the reader of each input)
    must be configured; a key that would go to two servers must say which one it is for.
    """
    named = named_servers(targets, inputs, os.environ)
    for text in targets:
        if text != ORIGIN:
            bound(text, os.environ, named)
            continue
        found = (decide(item, lambda at: find_reader(at, fmt)) for item in inputs)  # as the run decides them
        for back in needed(input_destination(str(i.given), i.reader.name if i.reader else None) for i in found):
            try:
                bound(back, os.environ, named)
            except ConfigError as exc:
                raise ConfigError(f"--annotate (back to each row's origin): {exc}") from None


def target_files(targets: Sequence[str]) -> list[Path]:
    """The files annotations are written to (`otlp-json:FILE`), of the targets that are files."""
    parsed = [parse_target(text, os.environ) for text in targets if text != ORIGIN]
    return [Path(target.location) for target in parsed if target.file]


def check_live_inputs(inputs: Sequence[Path | str], targets: Sequence[str]) -> None:
    """Each live input answers and is the store its address names (one line, before any work)."""
    named = named_servers(targets, inputs, os.environ)
    for item in inputs:
        if isinstance(item, str) and (found := source_server(item)) is not None:
            check_source(item, os.environ, named.get(found[0], []))


def side_file(scored: Path, given: Path | None) -> Path:
    """Where failed annotations go: `given`, a side file itself when replaying one, else beside SCORED."""
    if given is not None:
        return given
    return scored if scored.name.endswith(SIDE_SUFFIX) else scored.with_name(scored.name + SIDE_SUFFIX)


def write_back(args: argparse.Namespace) -> WriteBack:
    """`score --annotate`'s write-back: each chunk is in the checkpoint before it is written back."""
    return WriteBack(args.annotate, side_file(args.output, None), threshold=args.annotate_threshold,
                     inputs=args.inputs, timeout=args.annotate_timeout, deadline=args.annotate_deadline,
                     progress=progress_path(args.output), resume=args.resume)


def report(finished: Finished) -> int:
    """Say what each target took, in the order given, and where the rows left are; returns how many are left."""
    for line in itertools.chain.from_iterable(_lines(r) for r in finished.reports):
        print(f"tlmscore: {line}", file=sys.stderr)
    left, side = finished.left, finished.side
    if left:
        where = ", ".join(dict.fromkeys(str(r.get("target")) for r in left))
        print(f"tlmscore: {len(left)} rows not annotated, kept in {side} ({where}); replay with: "
              f"tlmscore annotate {side}", file=sys.stderr)
    return len(left)


def _lines(report: Report) -> list[str]:
    """One target's lines: what was written, what failed, and a key left out because it is for another server."""
    if report.text is None:
        return [f"{NO_TRACE}: {report.rows} rows"]
    if report.target is None or report.outcome is None:
        return [f"warning: {report.rows} rows not annotated: {report.refused}"]
    target, outcome, text = report.target, report.outcome, report.text
    store = connectors()[target.store]
    lines = []
    if store.keys.given(os.environ) and not target.headers and not target.file:
        lines.append(f"{text}: sent without {', '.join(store.keys.secrets)}, which go only to the server "
                     f"{store.keys.servers[0]} names (or the one the command line names)")
    skipped = f" ({outcome.skipped} rows have no {store.annotates} to annotate)" if outcome.skipped else ""
    of = " (the rows' origin)" if report.origin else ""
    lines.append(f"annotations to {text}{of}: {outcome.written} of {outcome.rows} written{skipped}")
    lines += [f"warning: annotations to {text} failed: {error}" for error in outcome.errors]
    return lines + ([f"warning: annotations to {text}: {outcome.gave_up}"] if outcome.gave_up else [])


def _replayed(rows: list[Any], targets: list[str], env: Mapping[str, str]) -> tuple[list[Any], list[Any]]:
    """A side file's rows to replay (each to the target it names; `targets` picks some), and those left as they are."""
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
    return ([r for t, g in groups.items() if not wanted or t in wanted for r in g],
            [r for t, g in groups.items() if wanted and t not in wanted for r in g])


def run_annotate(args: argparse.Namespace) -> int:
    """`tlmscore annotate`: SCORED's rows (streamed) or a side file's written back; exit 1 while rows are left."""
    side, replay = side_file(args.scored, args.failed), read_side_file(args.scored)
    chosen, untouched = _replayed(replay, args.to, os.environ) if replay is not None else ([], [])
    back = WriteBack(args.to, side, threshold=args.threshold, timeout=args.timeout, deadline=args.deadline,
                     replay=replay is not None, earlier=untouched if side == args.scored else None)
    back.add(chosen if replay is not None else read_rows(args.scored))
    return 1 if report(back.finish()) else 0
