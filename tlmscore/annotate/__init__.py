"""Scores written back where people look: annotations on the traces the rows came from.

    rows = [row.to_record() for row in read_rows("scored.jsonl")]   # tlmscore.output.read_rows
    outcome = deliver(rows, parse_target("otlp:http://127.0.0.1:4318", os.environ), env=os.environ)
    write_side_file(Path("scored.jsonl.annotate-failed.jsonl"), outcome.failed_rows)

- `_values`: a scored row → an `Annotation` (name `tlmscore.<scorer>`, score, label, explanation, ids).
- `_phoenix`: annotations → Phoenix span annotations (`arize-phoenix-client`), updated in place on a re-run.
- `_otlp`: annotations → OpenTelemetry `gen_ai.evaluation.result` events (OTLP/JSON, OTLP/HTTP protobuf).
- `_langfuse`: annotations → Langfuse scores (the `langfuse` SDK), one id per (trace, observation, name).
- `_langsmith`: annotations → LangSmith feedback (the `langsmith` SDK), one id per (run, key).
- `_route`: where each row goes back to by its `origin` (a bare `--annotate`).
- `_send`: targets, batches, retries; the side file of rows whose annotation failed.
"""

from __future__ import annotations

from tlmscore.annotate._langfuse import score_body
from tlmscore.annotate._langsmith import feedback
from tlmscore.annotate._otlp import EVENT_NAME, log_record, logs_protobuf, logs_request
from tlmscore.annotate._route import ORIGIN, by_destination, destination, input_destination, needed
from tlmscore.annotate._send import Outcome, Target, deliver, otlp_headers, parse_target, write_side_file
from tlmscore.annotate._values import (
    NOT_SCORABLE,
    SUPPORTED,
    UNSUPPORTED,
    Annotation,
    annotation_of,
    annotations_of,
    side_row,
)

__all__ = [
    "EVENT_NAME",
    "NOT_SCORABLE",
    "ORIGIN",
    "SUPPORTED",
    "UNSUPPORTED",
    "Annotation",
    "Outcome",
    "Target",
    "annotation_of",
    "annotations_of",
    "by_destination",
    "deliver",
    "destination",
    "feedback",
    "input_destination",
    "log_record",
    "logs_protobuf",
    "logs_request",
    "needed",
    "otlp_headers",
    "parse_target",
    "score_body",
    "side_row",
    "write_side_file",
]
