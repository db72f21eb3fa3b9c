"""The extractor benchmark measures what it says: a dropped sentence is counted, article text is scored by words,
and a WiCE claim's supporting sentences are the annotators' (oracle) ones."""

from __future__ import annotations

import gzip
import importlib
import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.paths import ROOT

BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the script imports its neighbours, as when it is run
    return importlib.import_module("extractors")


def test_a_sentence_counts_as_kept_only_when_its_words_come_back_in_order(bench: ModuleType) -> None:
    page = " ".join(bench.words("Intro. The council voted on Tuesday, 4 May, to extend the line! Outro."))
    assert bench.kept("The council voted on Tuesday (4 May) to extend the line.", page)
    assert not bench.kept("The council voted on Tuesday to extend the line.", page)  # a word is missing between
    assert not bench.kept("The line was extended.", page)
    assert not bench.kept("council voted", "the councils voted")  # whole words, not a substring of one


def test_article_text_is_scored_by_its_words(bench: ModuleType) -> None:
    precision, recall = bench.article_scores("Home News The tram line opens", "the tram line opens in May")
    assert precision == pytest.approx(4 / 6)
    assert recall == pytest.approx(4 / 6)
    assert bench.article_scores("", "some text") == (0.0, 0.0)


def test_a_claims_supporting_sentences_are_its_oracle_sentences_in_page_order(bench: ModuleType,
                                                                             tmp_path: Path) -> None:
    rows = [
        {"label": "supported", "claim": "c", "evidence": ["s5", "s2"],
         "meta": {"id": "d1", "chunk_idx": [5, 2], "oracle_idx": [5]}},
        {"label": "supported", "claim": "c", "evidence": ["s2", "s9"],
         "meta": {"id": "d1", "chunk_idx": [2, 9], "oracle_idx": [9]}},
        {"label": "not_supported", "claim": "e", "evidence": ["t1"], "meta": {"id": "d2", "chunk_idx": [1]}},
    ]
    path = tmp_path / "dev.jsonl.gz"
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    assert bench.wice_claims(path) == [("d1", ["s2", "s5", "s9"], ["s5", "s9"]), ("d2", ["t1"], [])]
