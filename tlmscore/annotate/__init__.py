"""Scores written back where people look: annotations on the traces the rows came from.

    rows = list(read_rows("scored.jsonl"))             # tlmscore.output.read_rows
    outcome = deliver(rows, parse_target("otlp:http://127.0.0.1:4318", os.environ))
    write_side_file(Path("scored.jsonl.annotate-failed.jsonl"), outcome.failed_rows)

What each store is sent, and how, is its connector's (`tlmscore.stores`); this package is what is
the same for every store:

- `_values`: a scored row (any mapping of its columns) → an `Annotation`: name `tlmscore.<scorer>`,
  score, label, explanation (for a row that is not scorable, why), ids.
- `_route`: where each row goes back to by its `origin` (a bare `--annotate`).
- `_send`: the delivery loop, fed at once or chunk by chunk (`Delivery`): batches, retries, giving up
  on a target that keeps failing, a total deadline, counts of what was stored; and the side file
  that names each row's target.
- `_write_back`: `WriteBack`, rows handed over as a run saves them, written back to every target on
  a thread of their own; its progress file, so a resumed run writes back only what is left.
"""

from __future__ import annotations

from tlmscore.annotate._route import ORIGIN, destination, input_destination, needed
from tlmscore.annotate._send import (
    Clock,
    Delivery,
    Outcome,
    Policy,
    deliver,
    parse_target,
    read_side_file,
    write_side_file,
)
from tlmscore.annotate._values import (
    NOT_SCORABLE,
    SUPPORTED,
    UNSUPPORTED,
    annotation_of,
    annotations_of,
    side_row,
)
from tlmscore.annotate._write_back import Finished, Report, WriteBack, bound, named_servers, progress_path
from tlmscore.stores import Annotation, Target

__all__ = [
    "NOT_SCORABLE",
    "ORIGIN",
    "SUPPORTED",
    "UNSUPPORTED",
    "Annotation",
    "Clock",
    "Delivery",
    "Finished",
    "Outcome",
    "Policy",
    "Report",
    "Target",
    "WriteBack",
    "annotation_of",
    "annotations_of",
    "bound",
    "deliver",
    "destination",
    "input_destination",
    "named_servers",
    "needed",
    "parse_target",
    "progress_path",
    "read_side_file",
    "side_row",
    "write_side_file",
]
