"""`tlmscore annotate SCORED --to TARGET` and `score --annotate [TARGET]`: scores written back onto traces.

A bare `--annotate` (or the target `origin`) sends each row back to where it came from, by its
`origin` (see `tlmscore.annotate.destination`); rows with no trace are counted, not failed.

The scores file is always written first; annotations that fail after retries are listed on stderr
and kept in a side file (`SCORED.annotate-failed.jsonl`, or `--failed FILE`) that
`tlmscore annotate SIDE --to TARGET` replays (rewriting it with what still fails, removing it when
nothing does).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from tlmscore.annotate import (
    ORIGIN,
    Target,
    by_destination,
    deliver,
    input_destination,
    needed,
    parse_target,
    side_row,
    write_side_file,
)
from tlmscore.compare import read_scored
from tlmscore.errors import ConfigError
from tlmscore.sources.registry import find_reader

SIDE_SUFFIX = ".annotate-failed.jsonl"
TARGETS_HELP = ("phoenix://HOST:PORT, otlp:URL, otlp (OTEL_EXPORTER_OTLP_ENDPOINT), otlp-json:FILE, langfuse "
                "(LANGFUSE_HOST), langfuse-json:FILE, langsmith (LANGSMITH_API_KEY) or langsmith-json:FILE")
NO_TRACE = "not annotated: no trace to go back to"


def add_annotate_flags(parser: argparse.ArgumentParser) -> None:
    """`score`'s `--annotate` flags, in a group of their own."""
    group = parser.add_argument_group("annotations (scores written back onto traces)")
    group.add_argument("--annotate", action="append", default=[], metavar="TARGET", nargs="?", const=ORIGIN,
                        help="after writing OUT, annotate its rows: alone, back to where each row came from "
                             f"(its origin); or {TARGETS_HELP} (repeatable)")
    group.add_argument("--annotate-threshold", type=float, default=0.5, metavar="T",
                        help="annotation label: supported at or above T, unsupported below (default 0.5)")


def add_annotate_parser(sub: Any) -> None:
    """The `annotate` subcommand's flags."""
    annotate = sub.add_parser("annotate", help="write the scores of a scored output back as trace annotations")
    annotate.add_argument("scored", type=Path, metavar="SCORED",
                          help="a `tlmscore score` output, or a side file of annotations that failed")
    annotate.add_argument("--to", required=True, action="append", metavar="TARGET",
                          help=f"{ORIGIN} (where each row came from), {TARGETS_HELP} (repeatable)")
    annotate.add_argument("--threshold", type=float, default=0.5,
                          help="label: supported at or above it, unsupported below (default 0.5)")
    annotate.add_argument("--failed", type=Path, metavar="FILE",
                          help=f"side file for annotations that failed (default SCORED{SIDE_SUFFIX})")


def check_targets(targets: list[str], inputs: list[Path | str] | None = None, fmt: str | None = None) -> None:
    """Refuse a target that cannot be used, before any work is done.

    For `origin`, the targets the inputs' rows will go back to (known from the reader of each input)
    must be configured.
    """
    for target in targets:
        if target != ORIGIN:
            parse_target(target, os.environ)
            continue
        for text in needed(_input_destination(item, fmt) for item in inputs or []):
            try:
                parse_target(text, os.environ)
            except ConfigError as exc:
                raise ConfigError(f"--annotate (back to each row's origin): {exc}") from None


def _input_destination(item: Path | str, fmt: str | None) -> str | None:
    reader = find_reader(str(item), fmt)
    return input_destination(str(item), reader.name if reader is not None else None)


def side_file(scored: Path, given: Path | None) -> Path:
    """Where failed annotations go: `given`, a side file itself when replaying one, else beside SCORED."""
    if given is not None:
        return given
    return scored if scored.name.endswith(SIDE_SUFFIX) else scored.with_name(scored.name + SIDE_SUFFIX)


def annotate_file(scored: Path, targets: list[str], *, threshold: float, failed: Path | None = None) -> int:
    """Annotate every row of `scored` at every target; returns the number of rows whose annotation failed."""
    targets = list(dict.fromkeys(targets))  # a target given twice is written to once
    parsed = {t: parse_target(t, os.environ) for t in targets if t != ORIGIN}
    rows = read_scored(scored)
    failures: dict[str, dict[str, Any]] = {}
    for text in targets:
        if text == ORIGIN:
            _to_origins(rows, threshold, failures)
        else:
            _to_target(text, parsed[text], rows, threshold, failures)
    path = side_file(scored, failed)
    write_side_file(path, list(failures.values()))
    if failures:
        print(f"tlmscore: {len(failures)} rows not annotated; replay with: tlmscore annotate {path} --to ...",
              file=sys.stderr)
    return len(failures)


def _to_target(text: str, target: Target, rows: list[dict[str, Any]], threshold: float,
               failures: dict[str, dict[str, Any]], *, of: str = "") -> None:
    """Deliver `rows` to one target; print what was written and keep the rows that failed."""
    outcome = deliver(rows, target, threshold=threshold, env=os.environ)
    skipped = f" ({outcome.skipped} rows have no {_ids(target.kind)} to annotate)" if outcome.skipped else ""
    print(f"tlmscore: annotations to {_shown(text)}{of}: {outcome.written} of {len(rows)} written{skipped}",
          file=sys.stderr)
    for error in outcome.errors:
        print(f"tlmscore: warning: annotations to {_shown(text)} failed: {error}", file=sys.stderr)
    for row in outcome.failed_rows:
        failures.setdefault(str(row.get("id")), row)


def _to_origins(rows: list[dict[str, Any]], threshold: float, failures: dict[str, dict[str, Any]]) -> None:
    """Each row back to where it came from; a target that is not configured fails its rows (kept to replay)."""
    for text, group in by_destination(rows).items():
        if text is None:
            print(f"tlmscore: {NO_TRACE}: {len(group)} rows", file=sys.stderr)
            continue
        try:
            target = parse_target(text, os.environ)
        except ConfigError as exc:
            print(f"tlmscore: warning: {len(group)} rows not annotated: {exc}", file=sys.stderr)
            failures.update((str(r.get("id")), side_row(r)) for r in group)
            continue
        _to_target(text, target, group, threshold, failures, of=" (the rows' origin)")


def _ids(kind: str) -> str:
    """What a target annotates rows by, as the summary names it."""
    return {"langfuse": "trace", "langfuse-json": "trace", "langsmith": "run", "langsmith-json": "run"}.get(
        kind, "span")


def _shown(target: str) -> str:
    """A target as printed: its kind and location (URLs carry no secrets here; headers come from the env)."""
    return target if target != "otlp" else "otlp (OTEL_EXPORTER_OTLP_ENDPOINT)"


def run_annotate(args: argparse.Namespace) -> int:
    """`tlmscore annotate`: exit 0 when every annotation was written, 1 when some are in the side file."""
    failed = annotate_file(args.scored, args.to, threshold=args.threshold, failed=args.failed)
    return 1 if failed else 0
