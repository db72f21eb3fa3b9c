"""Each extractor (`--extractor`): CPU per page, what survives of a page, and the grounding scorer's validity.

What is measured, per extractor, in one run:

- **CPU per page**: `extract` (the function the extraction workers run) over the real article pages of the shared
  corpus (`corpus/pages/`, 60 pages) and the validity sets' documents laid out as article pages; process
  CPU time of this one process, median and spread of `--passes` passes (the first pass warms up and is dropped).
- **Article text** on the 60 corpus pages against their human-annotated article body: token precision, recall
  and F1 (bags of lower-cased words, averaged over pages).
- **Supporting sentences kept**: WiCE (development split, oracle chunks): every claim's sentences as one article
  page among a site's boilerplate (`_page_sets.text_page`), extracted; the share of the annotators' supporting
  sentences whose words all come back in order, and the share of claims all of whose supporting sentences do.
  SummEdits has no supporting-sentence labels: the share of its documents' sentences kept.
- **Grounding AUROC** with that extracted text as the evidence, on both development sets
  (`validity_bench.py`'s rows and measures, from `_validity.py`: WiCE supported vs not supported and vs the rest;
  SummEdits pooled), beside the figure with the evidence given as text (`tool`, no extraction).

    python benchmarks/extractors.py                     # every extractor, 3 passes, a Markdown table
    python benchmarks/extractors.py --extractors recall resiliparse --summedits-limit 100
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _page_sets
import _validity as validity
from _common import SHARED, absent

from tlmscore.evidence.extract import EXTRACTORS, extract

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Figures:
    """One extractor's figures."""

    extractor: str
    cpu_ms: float
    cpu_spread: float
    precision: float
    recall: float
    f1: float
    wice_kept: float
    wice_claims_kept: float
    summedits_kept: float
    wice_strict: float
    wice_rest: float
    summedits: float


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def article_scores(extracted: str, truth: str) -> tuple[float, float]:
    """Token precision and recall of `extracted` against the annotated article body."""
    got, want = Counter(words(extracted)), Counter(words(truth))
    common = sum((got & want).values())
    return common / max(1, sum(got.values())), common / max(1, sum(want.values()))


def kept(sentence: str, extracted_words: str) -> bool:
    """Whether `sentence`'s words come back, in order and adjacent, in the extracted text's words."""
    wanted = " ".join(words(sentence))
    return not wanted or f" {wanted} " in f" {extracted_words} "


def corpus_pages(folder: Path) -> list[tuple[bytes, str, str]]:
    """(body, article body, url) of every real corpus page."""
    truth = json.loads((folder / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for path in sorted((folder / "html").glob("*.html.gz")):
        entry = truth[path.name.split(".")[0]]
        pages.append((gzip.decompress(path.read_bytes()), entry["articleBody"], entry["url"]))
    return pages


def wice_claims(path: Path) -> list[tuple[str, list[str], list[str]]]:
    """Per WiCE claim: its id, every sentence of its chunks (page order, once each), its supporting sentences."""
    claims: dict[str, tuple[dict[int, str], set[int]]] = {}
    for row in validity.wice_rows(path, None):
        meta = row["meta"]
        sentences, oracle = claims.setdefault(meta["id"], ({}, set()))
        sentences.update(zip(meta["chunk_idx"], row["evidence"], strict=True))
        oracle.update(meta.get("oracle_idx", ()))  # not-supported rows mark none
    return [(cid, [s for _, s in sorted(sentences.items())], [sentences[i] for i in sorted(oracle) if i in sentences])
            for cid, (sentences, oracle) in claims.items()]


def as_page(n: int, text: str) -> bytes:
    """`text` (one sentence or paragraph a line) as an article page among a site's boilerplate, seeded by `n`."""
    return _page_sets.text_page(random.Random(n), n, text)


def extracted_text(body: bytes, url: str, extractor: str) -> str:
    return extract(body, "text/html; charset=utf-8", url, extractor).text or ""  # type: ignore[arg-type]


def cpu_per_page(bodies: Sequence[tuple[bytes, str]], extractor: str, passes: int) -> tuple[float, float]:
    """Median CPU milliseconds per page over `passes` passes after a warm-up pass, and the spread (max/min - 1)."""
    times = []
    for n in range(passes + 1):
        start = time.process_time()
        for body, url in bodies:
            extracted_text(body, url, extractor)
        if n:
            times.append((time.process_time() - start) * 1000 / len(bodies))
    return statistics.median(times), max(times) / min(times) - 1


def wice_auroc(claims: Sequence[tuple[str, list[str], list[str]]], texts: dict[str, str], rows: list[dict[str, Any]],
               cache: Path) -> tuple[float, float]:
    """Grounding AUROC on WiCE with each row's evidence replaced by its claim page's extracted text."""
    records = [validity.wice_record(n, {**row, "evidence": [texts[row["meta"]["id"]]]})
               for n, row in enumerate(rows)]
    scores, _ = validity.score_records(records, "grounding", {}, pages=None, cache=cache)
    found = list(validity.claim_scores(records, scores).values())
    strict = [(s, int(label == "supported")) for s, label in found if label != "partially_supported"]
    rest = [(s, int(label == "supported")) for s, label in found]
    return (validity.compare("strict", "grounding", strict, 0.0).auroc,
            validity.compare("rest", "grounding", rest, 0.0).auroc)


def summedits_auroc(rows: Sequence[tuple[str, int, dict[str, Any]]], texts: dict[str, str], cache: Path) -> float:
    """Grounding AUROC on SummEdits (pooled) with each document replaced by its page's extracted text."""
    records = [validity.document_record(domain, n, {**row, "doc": texts[row["doc"]]})
               for domain, n, row in rows]
    scores, _ = validity.score_records(records, "grounding", {}, pages=None, cache=cache)
    pairs = [(scores[r["id"]], int(r["metadata"]["label"])) for r in records]
    return validity.compare("summedits", "grounding", pairs, 0.0).auroc


def measure(extractor: str, data: dict[str, Any], passes: int, cache: Path) -> Figures:
    """Every figure of one extractor (`tool`: the evidence as text, no page and no extraction)."""
    def run(body: bytes, text: str) -> str:
        return text if extractor == "tool" else extracted_text(body, "https://example.org/", extractor)

    cpu = spread = math.nan
    precision = recall = f1 = math.nan
    if extractor != "tool":
        bodies = [(b, u) for b, _, u in data["corpus"]] + [(b, "https://example.org/") for b in data["held"]]
        cpu, spread = cpu_per_page(bodies, extractor, passes)
        pr = [article_scores(extracted_text(b, u, extractor), truth) for b, truth, u in data["corpus"]]
        precision, recall = statistics.fmean(p for p, _ in pr), statistics.fmean(r for _, r in pr)
        f1 = 2 * precision * recall / (precision + recall)
    wice_texts = {cid: run(page, "\n".join(sentences)) for (cid, sentences, _), page in
                  zip(data["wice_claims"], data["wice_pages"], strict=True)}
    support = [(cid, [kept(s, " ".join(words(wice_texts[cid]))) for s in oracle])
               for cid, _, oracle in data["wice_claims"] if oracle]
    wice_kept = statistics.fmean(k for _, ks in support for k in ks)
    wice_claims_kept = statistics.fmean(all(ks) for _, ks in support)
    docs = {doc: run(page, doc) for doc, page in data["doc_pages"].items()}
    sentences = [(s, " ".join(words(docs[doc]))) for doc in docs for s in re.split(r"(?<=[.!?])\s+|\n", doc) if s]
    summedits_kept = statistics.fmean(kept(s, got) for s, got in sentences)
    strict, rest = wice_auroc(data["wice_claims"], wice_texts, data["wice_rows"], cache)
    return Figures(extractor, cpu, spread, precision, recall, f1, wice_kept, wice_claims_kept, summedits_kept,
                   strict, rest, summedits_auroc(data["summedits"], docs, cache))


def load(shared: Path, summedits_limit: int) -> dict[str, Any]:
    """The pages and rows every extractor is measured on."""
    wice = shared / "validity" / "wice" / "dev.jsonl.gz"
    claims = wice_claims(wice)
    summedits = [(domain, n, row) for domain in validity.DOMAINS
                 for n, row in enumerate(validity.summedits_rows(shared / "validity" / "summedits", domain,
                                                                       summedits_limit or None))]
    unique_docs = list(dict.fromkeys(row["doc"] for _, _, row in summedits))
    doc_pages = {doc: as_page(10_000 + i, doc) for i, doc in enumerate(unique_docs)}
    wice_pages = [as_page(i, "\n".join(sentences)) for i, (_, sentences, _) in enumerate(claims)]
    return {"corpus": corpus_pages(shared / "corpus" / "pages"), "wice_claims": claims, "wice_pages": wice_pages,
            "wice_rows": validity.wice_rows(wice, None), "summedits": summedits, "doc_pages": doc_pages,
            "held": [*wice_pages[:60], *list(doc_pages.values())[:60]]}


def table(rows: Sequence[Figures]) -> str:
    def cell(value: float, fmt: str = ".3f") -> str:
        return "—" if math.isnan(value) else format(value, fmt)

    lines = ["| extractor | CPU per page (ms) | spread | article P / R / F1 | WiCE supporting sentences kept "
             "| WiCE claims fully kept | SummEdits sentences kept | grounding AUROC WiCE strict / rest "
             "| SummEdits pooled |",
             "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {f.extractor} | {cell(f.cpu_ms, '.1f')} | {cell(100 * f.cpu_spread, '.0f')} % "
              f"| {cell(f.precision)} / {cell(f.recall)} / {cell(f.f1)} | {cell(f.wice_kept)} "
              f"| {cell(f.wice_claims_kept)} | {cell(f.summedits_kept)} | {cell(f.wice_strict)} / "
              f"{cell(f.wice_rest)} | {cell(f.summedits)} |" for f in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--extractors", nargs="+", default=["tool", *EXTRACTORS], choices=["tool", *EXTRACTORS])
    parser.add_argument("--passes", type=int, default=3, help="timed passes over the pages (after one warm-up)")
    parser.add_argument("--summedits-limit", type=int, default=100, help="rows per SummEdits domain (0: all)")
    parser.add_argument("--shared", type=Path, default=SHARED, help="the folder with corpus/ and validity/")
    args = parser.parse_args()
    for needed, what in ((args.shared / "corpus" / "pages", "the corpus pages"),
                         (args.shared / "validity", "the validity sets")):
        if not needed.is_dir():
            sys.exit(absent(needed, what) + "; --shared DIR gives their folder")
    data = load(args.shared, args.summedits_limit)
    print(f"pages: {len(data['corpus'])} corpus pages with article bodies, {len(data['held'])} validity pages timed; "
          f"WiCE {len(data['wice_claims'])} claims, SummEdits {len(data['summedits'])} rows "
          f"({args.summedits_limit or 'all'} a domain)", file=sys.stderr)
    with tempfile.TemporaryDirectory() as cache:
        results = [measure(name, data, args.passes, Path(cache)) for name in args.extractors]
    print(table(results))


if __name__ == "__main__":
    main()
