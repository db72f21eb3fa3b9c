"""The labelled sets the validity benchmarks share, as transcript records, and what is measured on them.

- SummEdits (Laban et al., 2023; the shared `validity/summedits/`): each element becomes a record whose
  evidence is the document (the output of a `read_document` function call) and whose answer is the summary.
- WiCE (Kamoi et al., 2023; the shared `validity/wice/dev.jsonl.gz`), oracle chunks, development split: each
  row (a claim and one annotator's chunk) a record like SummEdits'; a claim scores its best chunk.
- The project's labelled fixtures (`fixtures/labelled`), label 1 for `faithful`.

Measures: AUROC (ties count half), balanced accuracy at the score's default threshold (0.5: at or above counts
as consistent), expected calibration error (ten equal-width bins of the raw score), and the same after
calibration (isotonic, each row mapped by a fit on the other four of five folds). Records are scored through
the real pipeline (`tlmscore.score`), offline.
"""

from __future__ import annotations

import gzip
import json
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _evidence_shapes
from _common import ROOT, VALIDITY

import tlmscore
from tlmscore.evidence.page import MemoryPages
from tlmscore.settings import Settings

SUMMEDITS = VALIDITY / "summedits"
WICE = VALIDITY / "wice" / "dev.jsonl.gz"
LABELLED = ROOT / "fixtures" / "labelled"
DOMAINS = ("ectsum", "news", "podcast", "qmsumm", "sales_call", "sales_email", "samsum", "scitldr")
THRESHOLD = 0.5
BINS = 10
_TOOL = {"type": "function", "name": "read_document", "description": "Read the document to summarise.",
         "parameters": {"type": "object", "properties": {}, "additionalProperties": False}, "strict": True}


@dataclass(frozen=True)
class Result:
    """One scorer on one labelled set."""

    data: str
    scorer: str
    rows: int
    positives: int
    unscored: int
    auroc: float
    balanced_accuracy: float
    ece: float
    seconds: float
    ece_calibrated: float = math.nan


def auroc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """The probability that a random positive scores above a random negative, ties counting half."""
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    positives = sum(labels)
    negatives = len(labels) - positives
    if not positives or not negatives:
        return math.nan
    rank_sum = sum(r for r, y in zip(ranks, labels, strict=True) if y)
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def balanced_accuracy(scores: Sequence[float], labels: Sequence[int], threshold: float = THRESHOLD) -> float:
    """The mean of the true-positive and true-negative rates with `score >= threshold` read as positive."""
    pos = [s >= threshold for s, y in zip(scores, labels, strict=True) if y]
    neg = [s < threshold for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return math.nan
    return (sum(pos) / len(pos) + sum(neg) / len(neg)) / 2


def expected_calibration_error(scores: Sequence[float], labels: Sequence[int], bins: int = BINS) -> float:
    """The row-weighted mean gap between the mean score and the share of positives, over equal-width bins."""
    groups: dict[int, list[tuple[float, int]]] = {}
    for s, y in zip(scores, labels, strict=True):
        groups.setdefault(min(int(s * bins), bins - 1), []).append((s, y))
    total = len(scores)
    return sum(abs(sum(s for s, _ in g) / len(g) - sum(y for _, y in g) / len(g)) * len(g) / total
               for g in groups.values()) if total else math.nan


def summedits_rows(folder: Path, domain: str, limit: int | None) -> list[dict[str, Any]]:
    """The elements of one SummEdits domain file, the first `limit` of them when given."""
    with gzip.open(folder / f"summedits_{domain}.json.gz", "rt", encoding="utf-8") as handle:
        rows: list[dict[str, Any]] = json.load(handle)
    return rows[:limit] if limit else rows


def document_record(domain: str, n: int, row: dict[str, Any]) -> dict[str, Any]:
    """A Responses API transcript record: the document as a function call's output, the summary as the answer."""
    call_id = f"call_{domain}_{n}"
    request = {"model": "gpt-4.1", "tools": [_TOOL], "input": [
        {"role": "user", "content": "Summarise the document in a few sentences."},
        {"type": "function_call", "name": "read_document", "arguments": "{}", "call_id": call_id,
         "id": f"fc_{domain}_{n}", "status": "completed"},
        {"type": "function_call_output", "call_id": call_id, "output": row["doc"]}]}
    response = {"id": f"resp_{domain}_{n}", "object": "response", "model": "gpt-4.1", "status": "completed",
                "output": [{"type": "message", "id": f"msg_{domain}_{n}", "role": "assistant",
                            "status": "completed",
                            "content": [{"type": "output_text", "text": row["summary"], "annotations": []}]}]}
    return {"id": f"{domain}-{n}", "request": request, "response": response,
            "metadata": {"label": int(row["label"]), "domain": domain}}


def labelled_records(path: Path) -> Iterator[dict[str, Any]]:
    """The project's labelled fixtures with label 1 for `faithful`, 0 otherwise."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            record["metadata"]["label"] = int(record["metadata"]["label"] == "faithful")
            yield record


def score_records(records: list[dict[str, Any]], scorer: str, options: dict[str, Any], *,
                  pages: MemoryPages | None, cache: Path, shape: str = "tool") -> tuple[dict[str, float], float]:
    """Each record's score (NaN when unscorable) by id, and the CPU seconds the scoring took.

    `shape` other than `tool` serves the records' function-call evidence as cited pages instead.
    """
    if shape != "tool":
        records, pages = _evidence_shapes.as_pages(records, shape)
    start = time.process_time()
    frame = tlmscore.score(records, scorer, Settings(offline=True, cache_dir=cache, progress=False),
                           options=options, pages=pages)
    scores = {str(i): math.nan if s is None else float(s) for i, s in zip(frame["id"], frame["score"], strict=True)}
    return scores, time.process_time() - start


def compare(data: str, scorer: str, scored: Sequence[tuple[float, int]], seconds: float) -> Result:
    """The figures of `(score, label)` pairs; NaN scores are counted as unscored and left out."""
    pairs = [(s, y) for s, y in scored if not math.isnan(s)]
    scores = [s for s, _ in pairs]
    ys = [y for _, y in pairs]
    return Result(data, scorer, len(scored), sum(y for _, y in scored), len(scored) - len(pairs),
                  auroc(scores, ys), balanced_accuracy(scores, ys), expected_calibration_error(scores, ys), seconds,
                  held_out_ece(scores, ys))


def measure(data: str, records: list[dict[str, Any]], scorer: str, options: dict[str, Any], *,
            pages: MemoryPages | None, cache: Path) -> Result:
    """Score `records` through the pipeline and compare the scores with their labels."""
    scores, seconds = score_records(records, scorer, options, pages=pages, cache=cache)
    return compare(data, scorer, [(scores[r["id"]], int(r["metadata"]["label"])) for r in records], seconds)


def wice_rows(path: Path, limit: int | None) -> list[dict[str, Any]]:
    """The rows of the WiCE file, those of its first `limit` claims when given."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    if limit:
        keep = set(list(dict.fromkeys(r["meta"]["id"] for r in rows))[:limit])
        rows = [r for r in rows if r["meta"]["id"] in keep]
    return rows


def wice_record(n: int, row: dict[str, Any]) -> dict[str, Any]:
    """One WiCE row as a transcript record: the chunk's sentences (one a line) as evidence, the claim as answer."""
    record = document_record("wice", n, {"doc": "\n".join(row["evidence"]), "summary": row["claim"],
                                         "label": int(row["label"] == "supported")})
    record["metadata"].update(claim=row["meta"]["id"], wice_label=row["label"])
    return record


def claim_scores(records: Sequence[dict[str, Any]], scores: dict[str, float]) -> dict[str, tuple[float, str]]:
    """Each claim's score (its best chunk's; NaN when no chunk was scorable) and its label."""
    found: dict[str, tuple[float, str]] = {}
    for record in records:
        meta = record["metadata"]
        score = scores[record["id"]]
        old = found.get(meta["claim"], (math.nan, meta["wice_label"]))[0]
        best = score if math.isnan(old) else old if math.isnan(score) else max(old, score)
        found[meta["claim"]] = (best, meta["wice_label"])
    return found


def held_out_ece(scores: Sequence[float], labels: Sequence[int]) -> float:
    """ECE after calibration (isotonic, `tlmscore calibrate`'s default), each row mapped by a fit on the other folds."""
    from tlmscore.errors import ConfigError
    from tlmscore.scoring.calibration import cross_validate

    try:
        return cross_validate(scores, labels, folds=5, bins=BINS).ece_calibrated
    except ConfigError:  # too few rows of a label to hold any out
        return math.nan

