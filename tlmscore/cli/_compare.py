"""`tlmscore compare BASE NEW`: two scored outputs joined row by row, gates, reports; exit 1 when a gate fails."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tlmscore.compare import Gates, check_gates, compare_rows, render_report, report_kind
from tlmscore.errors import ConfigError
from tlmscore.output import read_rows


def _between(low: float, high: float) -> Callable[[str], float]:
    """An argument type: a number from `low` to `high`."""

    def number(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is not between {low:g} and {high:g}")
        return value

    return number


_fraction, _signed = _between(0.0, 1.0), _between(-1.0, 1.0)


def add_compare_parser(sub: Any) -> None:
    """The `compare` subcommand's flags."""
    compare = sub.add_parser("compare", help="compare two scored outputs row by row; exit 1 when a gate fails")
    compare.add_argument("base", type=Path, metavar="BASE", help="the scored output before the change")
    compare.add_argument("new", type=Path, metavar="NEW", help="the scored output after the change")
    compare.add_argument("--key", default="id", metavar="COL", help="the column rows are joined on (default: id)")
    compare.add_argument("--by", metavar="COL", help="figures per value of COL (a column or a metadata key)")
    compare.add_argument("--threshold", type=_fraction, default=0.5,
                         help="scores below it are flagged (default 0.5, the grounding scorer's)")
    compare.add_argument("--max-drop", type=_fraction, metavar="D", help="gate: no row's score drops more than D")
    compare.add_argument("--fail-under", type=_fraction, metavar="X", help="gate: the new mean score is at least X")
    compare.add_argument("--max-flagged-rate", type=_fraction, metavar="R",
                         help="gate: at most R of the new run's scored rows are below the threshold")
    compare.add_argument("--min-delta", type=_signed, metavar="M",
                         help="gate: the confidence interval of the mean difference does not lie below M")
    compare.add_argument("--report", type=Path, action="append", default=[], metavar="FILE",
                         help="write a report: .md, .xml (JUnit), .json or .html (repeatable)")
    compare.add_argument("--summary", type=Path, metavar="FILE",
                         help='append the Markdown report to FILE, e.g. "$GITHUB_STEP_SUMMARY" (any name)')
    compare.add_argument("--allow-empty", action="store_true",
                         help="pass when no row is scored on both sides (otherwise exit 2: no data is not a pass)")
    compare.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")
    compare.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")


def run_compare(args: argparse.Namespace) -> int:
    """Compare, write the reports, print the verdict on stderr; 0 when every gate holds, 1 when one fails."""
    kinds = [(path, report_kind(path)) for path in args.report]
    if args.resamples < 1:
        raise ConfigError("--resamples must be at least 1")
    names = (str(args.base), str(args.new))
    comparison = compare_rows(read_rows(args.base), read_rows(args.new), key=args.key,
                              threshold=args.threshold, by=args.by, seed=args.seed, resamples=args.resamples,
                              names=names)
    if not comparison.summary.paired and not args.allow_empty:
        raise ConfigError(f"{args.base} and {args.new}: no row is scored on both sides (outputs of prepare, or "
                          "only error rows): nothing to compare; --allow-empty lets it pass")
    gates = Gates(max_drop=args.max_drop, fail_under=args.fail_under, max_flagged_rate=args.max_flagged_rate,
                  min_delta=args.min_delta, allow_empty=args.allow_empty)
    results = check_gates(comparison, gates)
    for path, kind in kinds:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_report(kind, comparison, gates, results, names), encoding="utf-8")
    if args.summary is not None:
        with args.summary.open("a", encoding="utf-8") as summary:
            summary.write(render_report(".md", comparison, gates, results, names))
    s = comparison.summary
    ci = s.mean_delta
    print(f"tlmscore: compared {s.rows} rows ({s.paired} scored on both sides): mean {s.base_mean:.3f} → "
          f"{s.new_mean:.3f}, difference {ci.mean:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}]; "
          f"{s.dropped} dropped, {s.rose} rose, {s.new_errors} new errors, {s.newly_unscored} newly unscored, "
          f"{s.fixed_errors} fixed; "
          f"{len(comparison.only_base)} only in base, {len(comparison.only_new)} only in new", file=sys.stderr)
    for result in results:
        print(f"tlmscore: gate {result.name}: {'pass' if result.ok else 'FAIL'}: {result.reason}", file=sys.stderr)
    return 0 if all(r.ok for r in results) else 1
