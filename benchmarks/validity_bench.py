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
- Corpus edits (`benchmarks/_corpus_edits.py`): extractive summaries of the corpus's public articles,
  kept, reordered, or edited in one fact (number, name, negation, opposite, word); the development
  set of the grounding scorer, with the labelled fixtures.

`--evidence` gives WiCE and SummEdits their evidence in another shape (`_evidence_shapes.py`): the
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

`--scorer-table PAGE` scores a fixed sample of each development set (`--sample`, 150 rows) with
grounding and, with `--judge-options`, the judge, keeps the rows' scores in `--scores` (JSON), and
writes the table of every scorer into PAGE between its markers (`_scorer_table.py` says how the
samples and the combinations of the two scorers are made); `--from-scores FILE` writes it from a
file kept before, scoring nothing:

    python benchmarks/validity_bench.py --scorer-table docs/scorers.md --judge-options \
        '{"base_url": "http://127.0.0.1:8080/v1", "model": "qwen2.5-coder-1.5b-instruct", "mode": "claims"}'

Public sets you download (`benchmarks/_public_sets.py` reads their published formats): RAGTruth
(response-level F1, published references printed beside), LLM-AggreFact (balanced accuracy per
dataset and their mean, references beside), HaluEval (AUROC).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import _corpus_edits
import _evidence_shapes
import _public_sets
import _scorer_table
from _common import absent
from _validity import (
    DOMAINS,
    LABELLED,
    SUMMEDITS,
    THRESHOLD,
    WICE,
    Result,
    auroc,
    claim_scores,
    compare,
    document_record,
    labelled_records,
    measure,
    score_records,
    summedits_rows,
    wice_record,
    wice_rows,
)

import tlmscore
from tlmscore.evidence.layers import load_page_records
from tlmscore.evidence.page import MemoryPages
from tlmscore.settings import Settings


def scorers(judge_options: str | None, grounding_options: str = "{}") -> list[tuple[str, dict[str, Any]]]:
    """The scorers to run: grounding always (with `grounding_options`), judge and tlm when configured."""
    chosen: list[tuple[str, dict[str, Any]]] = [("grounding", json.loads(grounding_options))]
    if judge_options:
        chosen.append(("judge", json.loads(judge_options)))
    if os.environ.get("CLEANLAB_TLM_API_KEY"):
        chosen.append(("tlm", {}))
    return chosen


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


def lexicon_name(options: dict[str, Any], cache: Path) -> str:
    """What the grounding scorer matches synonyms and antonyms with under `options`, as its rows' details say."""
    record = next(labelled_records(LABELLED / "labelled.jsonl"))
    frame = tlmscore.score([record], "grounding", Settings(offline=True, cache_dir=cache, progress=False),
                           options=options, pages=MemoryPages(load_page_records(LABELLED / "pages")))
    return str(frame["details"][0].get("lexicon") or "none (word stems only)")


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
        records = _public_sets.ragtruth(Path(args.ragtruth))
        scores, seconds = score_records(records, scorer, options, pages=None, cache=cache)
        pairs = [(scores[r["id"]], int(r["metadata"]["label"])) for r in records]
        results.append(compare("RAGTruth test", scorer, pairs, seconds))
        references = ", ".join(f"{name} {value}" for name, value in _public_sets.RAGTRUTH_REFERENCES)
        notes.append(f"RAGTruth test, {scorer}: response-level F1 {100 * hallucination_f1(pairs):.1f} "
                     f"(hallucinated = score below {THRESHOLD}); published: {references}")
    if args.aggrefact:
        records = _public_sets.aggrefact(Path(args.aggrefact))
        scores, seconds = score_records(records, scorer, options, pages=None, cache=cache)
        by: dict[str, list[tuple[float, int]]] = {}
        for r in records:
            by.setdefault(r["metadata"]["dataset"], []).append((scores[r["id"]], int(r["metadata"]["label"])))
        parts = [compare(f"LLM-AggreFact {name}", scorer, pairs, 0.0) for name, pairs in sorted(by.items())]
        results += parts
        results.append(_mean_row("LLM-AggreFact mean of datasets", scorer, parts))
        references = ", ".join(f"{name} {value}" for name, value in _public_sets.AGGREFACT_REFERENCES)
        notes.append(f"LLM-AggreFact, {scorer}: mean balanced accuracy "
                     f"{100 * results[-1].balanced_accuracy:.1f} (at {THRESHOLD}); published: {references}")
    if args.halueval:
        records = _public_sets.halueval(Path(args.halueval))
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
            print(absent(Path(args.wice), "WiCE") + ": skipped", file=sys.stderr)
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
            print(absent(folder, "SummEdits") + ": skipped", file=sys.stderr)
    return results


def _dev(scorer: str, options: dict[str, Any], cache: Path) -> list[Result]:
    """The development sets: the labelled fixtures and, when the corpus is here, the corpus edits."""
    pages = MemoryPages(load_page_records(LABELLED / "pages"))
    results = [measure("fixtures/labelled", list(labelled_records(LABELLED / "labelled.jsonl")),
                       scorer, options, pages=pages, cache=cache)]
    if _corpus_edits.GROUND_TRUTH.exists():
        edits = [document_record("edits", n, row) for n, row in enumerate(_corpus_edits.rows())]
        results.append(measure("corpus edits (dev)", edits, scorer, options, pages=None, cache=cache))
    else:
        print(absent(_corpus_edits.GROUND_TRUTH, "the corpus") + ": corpus edits skipped", file=sys.stderr)
    return results


def write_scorer_table(args: argparse.Namespace) -> None:
    """`--scorer-table`: the samples scored (or read from `--from-scores`), and the table written into the page."""
    if args.from_scores:
        result = json.loads(Path(args.from_scores).read_text(encoding="utf-8"))
    else:
        folder = Path(args.summedits)
        wice = (_scorer_table.wice_sample(wice_rows(Path(args.wice), None), wice_record, args.sample)
                if Path(args.wice).is_file() else [])
        domains = [d for d in DOMAINS if (folder / f"summedits_{d}.json.gz").exists()]
        summedits = _scorer_table.summedits_sample(
            {d: [document_record(d, n, row) for n, row in enumerate(summedits_rows(folder, d, None))] for d in domains},
            args.sample)
        judge = json.loads(args.judge_options) if args.judge_options else None
        result = _scorer_table.run(wice, summedits, judge, Path(args.scores))
    _scorer_table.write(Path(args.scorer_table), _scorer_table.table(result, auroc))


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
    parser.add_argument("--evidence", choices=_evidence_shapes.SHAPES, default="tool",
                        help="WiCE and SummEdits evidence as a function output (tool), a cited page, a page a model "
                             "summarised (summary), or half of each (mixed)")
    parser.add_argument("--grounding-options", default="{}",
                        help='JSON options of the grounding scorer, e.g. \'{"lexicon": true}\' for WordNet')
    parser.add_argument("--scorer-table", default=None, metavar="PAGE",
                        help="score the development samples and write the table of every scorer into PAGE")
    parser.add_argument("--sample", type=int, default=150, help="--scorer-table: rows of each development set")
    parser.add_argument("--scores", default="scorer_table.json", help="--scorer-table: where the rows' scores go")
    parser.add_argument("--from-scores", default=None, help="--scorer-table: write the table from this file")
    args = parser.parse_args()
    if args.scorer_table:
        write_scorer_table(args)
        return
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            results = run(args, Path(tmp), notes)
        except _public_sets.FormatError as exc:
            sys.exit(f"validity_bench: {exc}")
        lexicon = lexicon_name(json.loads(args.grounding_options), Path(tmp))
    print(f"validity_bench {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}, tlmscore {tlmscore.__version__}, "
          f"grounding lexicon: {lexicon}, evidence: {args.evidence}")
    print(table(results))
    print()
    print(side_by_side(results))
    for note in notes:
        print(f"\n{note}")



if __name__ == "__main__":
    main()
