"""Annotations as Phoenix span annotations, through `arize-phoenix-client` (the `phoenix` extra).

One annotation per row that has a `span_id`: name `tlmscore.<scorer>`, annotator kind CODE, the
score, label and explanation, and the fixed identifier `tlmscore`, so re-running updates the
same annotation (Phoenix keeps one per span, name and identifier) instead of adding another.
The key, when the server needs one, is the client's own: `PHOENIX_API_KEY` from the environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tlmscore.annotate._values import Annotation

IDENTIFIER = "tlmscore"
BATCH = 100


def span_annotation(annotation: Annotation) -> dict[str, Any]:
    """One annotation as the client's `SpanAnnotationData` (the row must have a span id)."""
    result: dict[str, Any] = {"label": annotation.label, "explanation": annotation.explanation}
    if annotation.score is not None:
        result["score"] = annotation.score
    return {"name": annotation.name, "annotator_kind": "CODE", "span_id": annotation.span_id, "result": result,
            "identifier": IDENTIFIER, "metadata": {"tlmscore.record.id": annotation.row_id}}


def send_phoenix(base_url: str, annotations: Sequence[Annotation]) -> None:
    """Log the annotations (rows with a span id) to the Phoenix server at `base_url`; raises on failure."""
    from phoenix.client import Client  # noqa: PLC0415  (the `phoenix` extra, only when writing to Phoenix)

    data = [span_annotation(a) for a in annotations if a.span_id is not None]
    if not data:
        return
    client = Client(base_url=base_url)
    for start in range(0, len(data), BATCH):
        client.spans.log_span_annotations(span_annotations=data[start:start + BATCH],  # type: ignore[arg-type]
                                          sync=True)
