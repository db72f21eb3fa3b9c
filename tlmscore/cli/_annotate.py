"""`tlmscore annotate SCORED --to TARGET` and `score --annotate TARGET`: scores written back onto traces.

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

from tlmscore.annotate import deliver, parse_target, write_side_file
from tlmscore.compare import read_scored

SIDE_SUFFIX = ".annotate-failed.jsonl"


def add_annotate_flags(parser: argparse.ArgumentParser) -> None:
    """`score`'s `--annotate` flags."""
    parser.add_argument("--annotate", action="append", default=[], metavar="TARGET",
                        help="after writing OUT, annotate its rows: phoenix://HOST:PORT, otlp:URL, otlp "
                             "(OTEL_EXPORTER_OTLP_ENDPOINT) or otlp-json:FILE (repeatable)")
    parser.add_argument("--annotate-threshold", type=float, default=0.5, metavar="T",
                        help="annotation label: supported at or above T, unsupported below (default 0.5)")


def add_annotate_parser(sub: Any) -> None:
    """The `annotate` subcommand's flags."""
    annotate = sub.add_parser("annotate", help="write the scores of a scored output back as trace annotations")
    annotate.add_argument("scored", type=Path, metavar="SCORED",
                          help="a `tlmscore score` output, or a side file of annotations that failed")
    annotate.add_argument("--to", required=True, action="append", metavar="TARGET",
                          help="phoenix://HOST:PORT, otlp:URL, otlp (OTEL_EXPORTER_OTLP_ENDPOINT) or otlp-json:FILE "
                               "(repeatable)")
    annotate.add_argument("--threshold", type=float, default=0.5,
                          help="label: supported at or above it, unsupported below (default 0.5)")
    annotate.add_argument("--failed", type=Path, metavar="FILE",
                          help=f"side file for annotations that failed (default SCORED{SIDE_SUFFIX})")


def check_targets(targets: list[str]) -> None:
    """Refuse a target that cannot be used, before any work is done."""
    for target in targets:
        parse_target(target, os.environ)


def side_file(scored: Path, given: Path | None) -> Path:
    """Where failed annotations go: `given`, a side file itself when replaying one, else beside SCORED."""
    if given is not None:
        return given
    return scored if scored.name.endswith(SIDE_SUFFIX) else scored.with_name(scored.name + SIDE_SUFFIX)


def annotate_file(scored: Path, targets: list[str], *, threshold: float, failed: Path | None = None) -> int:
    """Annotate every row of `scored` at every target; returns the number of rows whose annotation failed."""
    parsed = [parse_target(t, os.environ) for t in targets]
    rows = read_scored(scored)
    failures: dict[str, dict[str, Any]] = {}
    for text, target in zip(targets, parsed, strict=True):
        outcome = deliver(rows, target, threshold=threshold, env=os.environ)
        skipped = f" ({outcome.skipped} rows have no span to annotate)" if outcome.skipped else ""
        print(f"tlmscore: annotations to {_shown(text)}: {outcome.written} of {len(rows)} written{skipped}",
              file=sys.stderr)
        for error in outcome.errors:
            print(f"tlmscore: warning: annotations to {_shown(text)} failed: {error}", file=sys.stderr)
        for row in outcome.failed_rows:
            failures.setdefault(str(row.get("id")), row)
    path = side_file(scored, failed)
    write_side_file(path, list(failures.values()))
    if failures:
        print(f"tlmscore: {len(failures)} rows not annotated; replay with: tlmscore annotate {path} --to ...",
              file=sys.stderr)
    return len(failures)


def _shown(target: str) -> str:
    """A target as printed: its kind and location (URLs carry no secrets here; headers come from the env)."""
    return target if target != "otlp" else "otlp (OTEL_EXPORTER_OTLP_ENDPOINT)"


def run_annotate(args: argparse.Namespace) -> int:
    """`tlmscore annotate`: exit 0 when every annotation was written, 1 when some are in the side file."""
    failed = annotate_file(args.scored, args.to, threshold=args.threshold, failed=args.failed)
    return 1 if failed else 0
