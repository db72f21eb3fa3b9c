"""The annotation label at thresholds other than 0.5: a score exactly at the threshold is `supported`, one step
below it `unsupported`, through `annotation_of`, `deliver`, `tlmscore annotate --threshold` and
`tlmscore score --annotate-threshold`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT
from tlmscore.annotate import NOT_SCORABLE, SUPPORTED, UNSUPPORTED, annotation_of, annotations_of, deliver, parse_target
from tlmscore.cli import main

LABELLED = ROOT / "fixtures" / "labelled"


def _below(value: float) -> float:
    return math.nextafter(value, -math.inf)


def _row(score: float | None, error: str | None = None) -> dict[str, Any]:
    return {"id": "r", "scorer": "grounding", "score": score, "error": error, "explanation": "why"}


@pytest.mark.parametrize("threshold", [0.0, 0.2, 0.5, 0.75, 1.0])
def test_a_score_at_the_threshold_is_supported_and_one_step_below_it_is_not(threshold: float) -> None:
    assert annotation_of(_row(threshold), threshold).label == SUPPORTED
    assert annotation_of(_row(min(1.0, threshold + 0.01)), threshold).label == SUPPORTED
    if threshold > 0.0:
        assert annotation_of(_row(_below(threshold)), threshold).label == UNSUPPORTED
        assert annotation_of(_row(0.0), threshold).label == UNSUPPORTED
    assert annotation_of(_row(None), threshold).label == NOT_SCORABLE
    assert annotation_of(_row(threshold, error="timeout"), threshold).label == NOT_SCORABLE


def test_the_default_threshold_is_one_half() -> None:
    assert annotation_of(_row(0.5)).label == SUPPORTED
    assert annotation_of(_row(_below(0.5))).label == UNSUPPORTED
    assert [a.label for a in annotations_of([_row(0.5), _row(0.49)])] == [SUPPORTED, UNSUPPORTED]


def test_annotations_of_and_deliver_pass_the_threshold_on(tmp_path: Path) -> None:
    rows = [_row(0.7) | {"id": "at"}, _row(_below(0.7)) | {"id": "below"}, _row(0.9) | {"id": "above"}]
    assert [a.label for a in annotations_of(rows, 0.7)] == [SUPPORTED, UNSUPPORTED, SUPPORTED]
    target = tmp_path / "events.jsonl"
    deliver(rows, parse_target(f"otlp-json:{target}", {}), threshold=0.7)
    assert _labels(target) == {"at": SUPPORTED, "below": UNSUPPORTED, "above": SUPPORTED}


def _labels(events: Path) -> dict[str, str]:
    """Each event's record id → its label, from OTLP/JSON lines."""
    labels = {}
    for line in events.read_text(encoding="utf-8").splitlines():
        for record in json.loads(line)["resourceLogs"][0]["scopeLogs"][0]["logRecords"]:
            values = {a["key"]: a["value"]["stringValue"] for a in record["attributes"] if "stringValue" in a["value"]}
            labels[values["tlmscore.record.id"]] = values["gen_ai.evaluation.score.label"]
    return labels


def test_annotate_threshold_flag(tmp_path: Path) -> None:
    scored = tmp_path / "scored.jsonl"
    rows = [_row(0.25) | {"id": "low"}, _row(0.75) | {"id": "high"}, _row(0.5) | {"id": "half"}]
    scored.write_text("".join(json.dumps({"source": "x", "line": i + 1} | r) + "\n" for i, r in enumerate(rows)),
                      encoding="utf-8")
    for threshold, expected in [("0.75", {"low": UNSUPPORTED, "high": SUPPORTED, "half": UNSUPPORTED}),
                                ("0.25", {"low": SUPPORTED, "high": SUPPORTED, "half": SUPPORTED}),
                                ("0.5", {"low": UNSUPPORTED, "high": SUPPORTED, "half": SUPPORTED})]:
        target = tmp_path / f"events-{threshold}.jsonl"
        assert main(["annotate", str(scored), "--to", f"otlp-json:{target}", "--threshold", threshold]) == 0
        assert _labels(target) == expected


def test_score_annotate_threshold_flag(tmp_path: Path) -> None:
    record = (LABELLED / "labelled.jsonl").read_text(encoding="utf-8").splitlines()[0]
    logs = tmp_path / "logs.jsonl"
    logs.write_text(record + "\n", encoding="utf-8")
    out, target = tmp_path / "scored.jsonl", tmp_path / "events.jsonl"
    assert main(["score", str(logs), "-o", str(out), "--offline", "--quiet", "--pages", str(LABELLED / "pages"),
                 "--cache-dir", str(tmp_path / "cache"), "--annotate", f"otlp-json:{target}",
                 "--annotate-threshold", "0"]) == 0
    (row,) = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert row["score"] is not None and row["score"] < 0.5
    assert _labels(target) == {row["id"]: SUPPORTED}  # at threshold 0 every score is supported
