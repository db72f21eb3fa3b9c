"""Validity: how well each scorer ranks consistent answers above inconsistent ones, on labelled data.

Data sets (each row: an answer, its evidence, and a label 1 = consistent / 0 = not):

- SummEdits (Laban et al., 2023; `--summedits`, default `../shared/validity/summedits`), per domain
  and pooled. Each element becomes a transcript record whose evidence is the document — the output
  of a `read_document` function call — and whose answer is the summary, scored through the real
  pipeline (`tlmscore.score`). Changes were kept or dropped on its figures (docs/validity.md lists
  which), so it is a development set, not a held-out one.
- WiCE (Kamoi et al., 2023; `--wice`, default `../shared/validity/wice/dev.jsonl.gz`), the
  oracle-chunk variant, development split only: a Wikipedia claim against sentences of the web page
  it cites. Each row (a claim and one annotator's chunk) becomes a record like SummEdits'; a claim
  scores its best chunk, and is measured supported vs not supported, and supported vs the rest
  (partially or not supported).
- The project's labelled fixtures (`fixtures/labelled`): web search and tool answers, faithful or
  contradicted, with their saved pages.
- Corpus edits (`benchmarks/corpus_edits.py`): extractive summaries of the corpus's public articles,
  kept, reordered, or edited in one fact (number, name, negation, opposite, word); the development
  set of the grounding scorer, with the labelled fixtures.

`--evidence` gives WiCE and SummEdits their evidence in another shape (`evidence_shapes.py`): the
document as a cited web page (`page`), as a page a model read and summarised (`summary`, what
`--page-source chat` gives), or split in a fetched half and a summarised half (`mixed`).

Per scorer and set: AUROC (ties count half), balanced accuracy with the score's default threshold
(0.5: at or above counts as consistent), and expected calibration error (ten equal-width bins of the
raw score). `grounding` always runs; `judge` runs when `--judge-options` gives its options (a JSON
object: base_url, model, ...), `tlm` when `CLEANLAB_TLM_API_KEY` is set. Unscorable rows (NaN) are
counted and left out.

    python benchmarks/validity_bench.py                 # grounding on every set, a Markdown table
    python benchmarks/validity_bench.py --limit 100     # the first 100 rows of each SummEdits domain
    python benchmarks/validity_bench.py --sets dev      # only the project's own sets (fixtures, corpus edits)
    python benchmarks/validity_bench.py --sets wice summedits   # the two development sets, side by side
    python benchmarks/validity_bench.py --grounding-options '{"lexicon": true}'   # with WordNet (extra wordnet)
    python benchmarks/validity_bench.py --sets wice summedits --evidence summary   # evidence a model summarised
    python benchmarks/validity_bench.py --sets --ragtruth DIR --aggrefact FILE --halueval FILE   # sets you bring

Public sets you download (`benchmarks/public_sets.py` reads their published formats): RAGTruth
(response-level F1, published references printed beside), LLM-AggreFact (balanced accuracy per
dataset and their mean, references beside), HaluEval (AUROC).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import corpus_edits  # beside this script
import evidence_shapes  # beside this script
import public_sets  # beside this script

import tlmscore
from tlmscore.evidence.layers import load_page_records
from tlmscore.evidence.page import MemoryPages
from tlmscore.scoring.grounding import GroundingOptions
from tlmscore.scoring.grounding._lexicon import load_lexicon, wordnet_folder
from tlmscore.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
SUMMEDITS = corpus_edits.shared() / "validity" / "summedits"
WICE = corpus_edits.shared() / "validity" / "wice" / "dev.jsonl.gz"
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


def scorers(judge_options: str | None, grounding_options: str = "{}") -> list[tuple[str, dict[str, Any]]]:
    """The scorers to run: grounding always (with `grounding_options`), judge and tlm when configured."""
    chosen: list[tuple[str, dict[str, Any]]] = [("grounding", json.loads(grounding_options))]
    if judge_options:
        chosen.append(("judge", json.loads(judge_options)))
    if os.environ.get("CLEANLAB_TLM_API_KEY"):
        chosen.append(("tlm", {}))
    return chosen


def score_records(records: list[dict[str, Any]], scorer: str, options: dict[str, Any], *,
                  pages: MemoryPages | None, cache: Path, shape: str = "tool") -> tuple[dict[str, float], float]:
    """Each record's score (NaN when unscorable) by id, and the CPU seconds the scoring took.

    `shape` other than `tool` serves the records' function-call evidence as cited pages instead.
    """
    if shape != "tool":
        records, pages = evidence_shapes.as_pages(records, shape)
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


def measure_wice(path: Path, limit: int | None, scorer: str, options: dict[str, Any], cache: Path, *,
                 shape: str = "tool") -> list[Result]:
    """WiCE claims, each scored by its best chunk: supported vs not supported, and supported vs the rest."""
    records = [wice_record(n, row) for n, row in enumerate(wice_rows(path, limit))]
    scores, seconds = score_records(records, scorer, options, pages=None, cache=cache, shape=shape)
    claims = list(claim_scores(records, scores).values())
    strict = [(s, int(label == "supported")) for s, label in claims if label != "partially_supported"]
    rest = [(s, int(label == "supported")) for s, label in claims]
    return [compare("WiCE dev: supported vs not", scorer, strict, seconds),
            compare("WiCE dev: supported vs rest", scorer, rest, 0.0)]


def held_out_ece(scores: Sequence[float], labels: Sequence[int]) -> float:
    """ECE after calibration (isotonic, `tlmscore calibrate`'s default), each row mapped by a fit on the other folds."""
    from tlmscore.errors import ConfigError
    from tlmscore.scoring.calibration import cross_validate

    try:
        return cross_validate(scores, labels, folds=5, bins=BINS).ece_calibrated
    except ConfigError:  # too few rows of a label to hold any out
        return math.nan


def lexicon_name(options: dict[str, Any]) -> str:
    """What the grounding scorer matches synonyms and antonyms with under `options`."""
    folder = wordnet_folder() if options.get("lexicon", GroundingOptions().lexicon) else None
    return load_lexicon(folder).source or "none (word stems only)"


def table(results: Iterable[Result]) -> str:
    """The results as a Markdown table."""
    lines = ["| data | scorer | rows | consistent | unscored | AUROC | bal. acc. @0.5 | ECE | ECE calibrated | CPU s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r.data} | {r.scorer} | {r.rows} | {r.positives} | {r.unscored} | {r.auroc:.3f} | "
              f"{r.balanced_accuracy:.3f} | {r.ece:.3f} | {r.ece_calibrated:.3f} | {r.seconds:.1f} |"
              for r in results]
    return "\n".join(lines)


def hallucination_f1(scored: Sequence[tuple[float, int]], threshold: float = THRESHOLD) -> float:
    """F1 of finding hallucinated answers (label 0), an answer flagged when its score is below `threshold`."""
    pairs = [(s < threshold, y == 0) for s, y in scored if not math.isnan(s)]
    hits = sum(1 for flagged, bad in pairs if flagged and bad)
    flagged_total = sum(1 for flagged, _ in pairs if flagged)
    bad_total = sum(1 for _, bad in pairs if bad)
    return 2 * hits / (flagged_total + bad_total) if flagged_total + bad_total else math.nan


def measure_public(args: argparse.Namespace, scorer: str, options: dict[str, Any],
                   cache: Path) -> tuple[list[Result], list[str]]:
    """The public sets the user brought (`--ragtruth`, `--aggrefact`, `--halueval`), with published references."""
    results: list[Result] = []
    notes: list[str] = []
    if args.ragtruth:
        records = public_sets.ragtruth(Path(args.ragtruth))
        scores, seconds = score_records(records, scorer, options, pages=None, cache=cache)
        pairs = [(scores[r["id"]], int(r["metadata"]["label"])) for r in records]
        results.append(compare("RAGTruth test", scorer, pairs, seconds))
        references = ", ".join(f"{name} {value}" for name, value in public_sets.RAGTRUTH_REFERENCES)
        notes.append(f"RAGTruth test, {scorer}: response-level F1 {100 * hallucination_f1(pairs):.1f} "
                     f"(hallucinated = score below {THRESHOLD}); published: {references}")
    if args.aggrefact:
        records = public_sets.aggrefact(Path(args.aggrefact))
        scores, seconds = score_records(records, scorer, options, pages=None, cache=cache)
        by: dict[str, list[tuple[float, int]]] = {}
        for r in records:
            by.setdefault(r["metadata"]["dataset"], []).append((scores[r["id"]], int(r["metadata"]["label"])))
        parts = [compare(f"LLM-AggreFact {name}", scorer, pairs, 0.0) for name, pairs in sorted(by.items())]
        results += parts
        results.append(_mean_row("LLM-AggreFact mean of datasets", scorer, parts))
        references = ", ".join(f"{name} {value}" for name, value in public_sets.AGGREFACT_REFERENCES)
        notes.append(f"LLM-AggreFact, {scorer}: mean balanced accuracy "
                     f"{100 * results[-1].balanced_accuracy:.1f} (at {THRESHOLD}); published: {references}")
    if args.halueval:
        records = public_sets.halueval(Path(args.halueval))
        results.append(measure(f"HaluEval {Path(args.halueval).stem}", records, scorer, options,
                               pages=None, cache=cache))
    return results, notes


def side_by_side(results: Iterable[Result]) -> str:
    """The two development sets' headline AUROCs per scorer, on one line each."""
    wanted = ("WiCE dev: supported vs not", "WiCE dev: supported vs rest", "SummEdits mean of domains",
              "SummEdits pooled")
    by: dict[str, dict[str, float]] = {}
    for r in results:
        by.setdefault(r.scorer, {})[r.data] = r.auroc
    lines = ["| scorer | WiCE dev s vs not | WiCE dev s vs rest | SummEdits mean | SummEdits pooled |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {scorer} | " + " | ".join(f"{found.get(w, math.nan):.3f}" for w in wanted) + " |"
              for scorer, found in by.items()]
    return "\n".join(lines)


def _mean_row(data: str, scorer: str, parts: Sequence[Result]) -> Result:
    def mean(values: Iterable[float]) -> float:
        kept = [v for v in values if not math.isnan(v)]
        return sum(kept) / len(kept) if kept else math.nan
    return Result(data, scorer, sum(r.rows for r in parts), sum(r.positives for r in parts),
                  sum(r.unscored for r in parts), mean(r.auroc for r in parts),
                  mean(r.balanced_accuracy for r in parts), mean(r.ece for r in parts), sum(r.seconds for r in parts),
                  mean(r.ece_calibrated for r in parts))


def run(args: argparse.Namespace, cache: Path, notes: list[str]) -> list[Result]:
    """Every configured scorer on every available set; lines about the public sets go to `notes`."""
    results: list[Result] = []
    folder = Path(args.summedits)
    for scorer, options in scorers(args.judge_options, args.grounding_options):
        public, said = measure_public(args, scorer, options, cache)
        results += public
        notes += said
        if "dev" in args.sets:
            results += _dev(scorer, options, cache)
        if "wice" in args.sets and Path(args.wice).is_file():
            results += measure_wice(Path(args.wice), args.limit, scorer, options, cache, shape=args.evidence)
        elif "wice" in args.sets:
            print(f"WiCE not found at {args.wice}: skipped", file=sys.stderr)
        if "summedits" in args.sets and folder.is_dir():
            domains = [d for d in DOMAINS if (folder / f"summedits_{d}.json.gz").exists()]
            records = {d: [document_record(d, n, row) for n, row in enumerate(summedits_rows(folder, d, args.limit))]
                       for d in domains}
            parts, pooled = [], []
            for d in domains:  # pooled: every domain's scores together, not scored twice
                scores, seconds = score_records(records[d], scorer, options, pages=None, cache=cache,
                                                shape=args.evidence)
                pairs = [(scores[r["id"]], int(r["metadata"]["label"])) for r in records[d]]
                parts.append(compare(f"SummEdits {d}", scorer, pairs, seconds))
                pooled += pairs
            results += parts
            results.append(_mean_row("SummEdits mean of domains", scorer, parts))
            results.append(compare("SummEdits pooled", scorer, pooled, 0.0))
        elif "summedits" in args.sets:
            print(f"SummEdits not found at {folder}: skipped", file=sys.stderr)
    return results


def _dev(scorer: str, options: dict[str, Any], cache: Path) -> list[Result]:
    """The development sets: the labelled fixtures and, when the corpus is here, the corpus edits."""
    pages = MemoryPages(load_page_records(LABELLED / "pages"))
    results = [measure("fixtures/labelled", list(labelled_records(LABELLED / "labelled.jsonl")),
                       scorer, options, pages=pages, cache=cache)]
    if corpus_edits.GROUND_TRUTH.exists():
        edits = [document_record("edits", n, row) for n, row in enumerate(corpus_edits.rows())]
        results.append(measure("corpus edits (dev)", edits, scorer, options, pages=None, cache=cache))
    else:
        print(f"corpus not found at {corpus_edits.GROUND_TRUTH}: corpus edits skipped", file=sys.stderr)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--summedits", default=str(SUMMEDITS), help="folder of summedits_<domain>.json.gz")
    parser.add_argument("--wice", default=str(WICE), help="the WiCE development file (dev.jsonl.gz)")
    parser.add_argument("--limit", type=int, default=None,
                        help="first N rows of each SummEdits domain, first N claims of WiCE")
    parser.add_argument("--sets", nargs="*", choices=("dev", "wice", "summedits"),
                        default=["dev", "wice", "summedits"])
    parser.add_argument("--ragtruth", default=None, help="a RAGTruth folder (response.jsonl, source_info.jsonl)")
    parser.add_argument("--aggrefact", default=None, help="an LLM-AggreFact file (JSON lines or CSV)")
    parser.add_argument("--halueval", default=None, help="a HaluEval task file (qa, summarization or dialogue)")
    parser.add_argument("--judge-options", default=None, help="JSON options of the judge scorer; runs it")
    parser.add_argument("--evidence", choices=evidence_shapes.SHAPES, default="tool",
                        help="WiCE and SummEdits evidence as a function output (tool), a cited page, a page a model "
                             "summarised (summary), or half of each (mixed)")
    parser.add_argument("--grounding-options", default="{}",
                        help='JSON options of the grounding scorer, e.g. \'{"lexicon": true}\' for WordNet')
    args = parser.parse_args()
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            results = run(args, Path(tmp), notes)
        except public_sets.FormatError as exc:
            sys.exit(f"validity_bench: {exc}")
    print(f"validity_bench {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}, tlmscore {tlmscore.__version__}, "
          f"grounding lexicon: {lexicon_name(json.loads(args.grounding_options))}, evidence: {args.evidence}")
    print(table(results))
    print()
    print(side_by_side(results))
    for note in notes:
        print(f"\n{note}")


if __name__ == "__main__":
    main()
