"""Scores written back where people look: annotations on the traces the rows came from.

    rows = read_scored(Path("scored.jsonl"))          # tlmscore.compare.read_scored
    outcome = deliver(rows, parse_target("otlp:http://127.0.0.1:4318", os.environ), env=os.environ)
    write_side_file(Path("scored.jsonl.annotate-failed.jsonl"), outcome.failed_rows)

- `_values`: a scored row → an `Annotation` (name `tlmscore.<scorer>`, score, label, explanation, ids).
- `_phoenix`: annotations → Phoenix span annotations (`arize-phoenix-client`), updated in place on a re-run.
- `_otlp`: annotations → OpenTelemetry `gen_ai.evaluation.result` events (OTLP/JSON, OTLP/HTTP protobuf).
- `_send`: targets, batches, retries; the side file of rows whose annotation failed.
"""

from __future__ import annotations

from tlmscore.annotate._otlp import EVENT_NAME, log_record, logs_protobuf, logs_request
from tlmscore.annotate._send import Outcome, Target, deliver, otlp_headers, parse_target, write_side_file
from tlmscore.annotate._values import (
    NOT_SCORABLE,
    SUPPORTED,
    UNSUPPORTED,
    Annotation,
    annotation_of,
    annotations_of,
)

__all__ = [
    "EVENT_NAME",
    "NOT_SCORABLE",
    "SUPPORTED",
    "UNSUPPORTED",
    "Annotation",
    "Outcome",
    "Target",
    "annotation_of",
    "annotations_of",
    "deliver",
    "log_record",
    "logs_protobuf",
    "logs_request",
    "otlp_headers",
    "parse_target",
    "write_side_file",
]
