"""The grounding scorer: labelled answers ranked, details, edge cases, determinism, and its text tools."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import FIXTURES, ROOT
from tlmscore import read_transcripts
from tlmscore.convert import convert_transcript
from tlmscore.errors import ScorerError
from tlmscore.evidence.layers import load_page_records
from tlmscore.evidence.page import MemoryPages, keyed_pages
from tlmscore.evidence.plan import Plan
from tlmscore.model import Conversation, Message, ScoringInput, Transcript
from tlmscore.rendering import render
from tlmscore.scoring import Score, get_scorer, scorer_names
from tlmscore.scoring.grounding import GroundingOptions, GroundingScorer
from tlmscore.scoring.grounding._evidence import documents
from tlmscore.scoring.grounding._text import analyse, clauses, clean_markdown, expand_dates, is_negated, sentences
from tlmscore.settings import Settings

LABELLED = FIXTURES / "labelled"


def rendered(path: Path, pages_dir: Path) -> list[tuple[Transcript, ScoringInput]]:
    """Every readable transcript of `path`, rendered with the page records of `pages_dir`."""
    pages = MemoryPages(load_page_records(pages_dir))
    found = []
    for transcript in read_transcripts(path):
        if transcript.error is not None:
            continue
        conversation = convert_transcript(transcript, Settings())
        known = asyncio.run(keyed_pages(pages, Plan.of([conversation.urls])))
        found.append((transcript, render(conversation, known, Settings())))
    return found


@pytest.fixture(scope="module")
def labelled() -> list[tuple[Transcript, ScoringInput]]:
    return rendered(LABELLED / "labelled.jsonl", LABELLED / "pages")


def score_all(inputs: list[ScoringInput], **options: Any) -> list[Score]:
    return asyncio.run(get_scorer("grounding", options).score_many(inputs))


def by_id(labelled: list[tuple[Transcript, ScoringInput]], scores: list[Score]) -> dict[str, Score]:
    return {t.id: s for (t, _), s in zip(labelled, scores, strict=True)}


# ---------------------------------------------------------------- the labelled fixtures


def test_labelled_fixtures_cover_topics_labels_and_evidence_kinds(labelled: list[tuple[Transcript,
                                                                                      ScoringInput]]) -> None:
    topics: dict[str, set[str]] = defaultdict(set)
    for transcript, _ in labelled:
        topics[transcript.metadata["topic"]].add(transcript.metadata["label"])
    assert len(topics) >= 4 and all(labels == {"faithful", "contradicted"} for labels in topics.values())
    kinds = {d.kind for _, item in labelled for d in documents(item)}
    assert {"page", "file", "tool"} <= kinds
    assert any("url_citation" in json.dumps(t.response) for t, _ in labelled)


@pytest.mark.parametrize("with_conversation", [True, False])
def test_grounding_ranks_every_faithful_answer_above_every_contradicted_one(
        labelled: list[tuple[Transcript, ScoringInput]], with_conversation: bool) -> None:
    inputs = [item if with_conversation else ScoringInput(item.prompt, item.response) for _, item in labelled]
    scores = score_all(inputs)
    table: dict[str, dict[str, list[tuple[float, str]]]] = defaultdict(lambda: defaultdict(list))
    for (transcript, _), score in zip(labelled, scores, strict=True):
        assert score.scored, (transcript.id, score.explanation)
        table[transcript.metadata["topic"]][transcript.metadata["label"]].append((score.score, transcript.id))
    report = json.dumps(table, indent=1)
    for labels in table.values():
        assert min(labels["faithful"])[0] > max(labels["contradicted"])[0], report


def test_scores_do_not_depend_on_the_conversation_being_present(labelled: list[tuple[Transcript,
                                                                                      ScoringInput]]) -> None:
    with_conversation = score_all([item for _, item in labelled])
    prompt_only = score_all([ScoringInput(item.prompt, item.response) for _, item in labelled])
    assert [s.score for s in with_conversation] == [s.score for s in prompt_only]


def test_details_name_what_did_not_match(labelled: list[tuple[Transcript, ScoringInput]]) -> None:
    scores = by_id(labelled, score_all([item for _, item in labelled]))
    date = scores["oresund-contradicted-3"].details["unsupported"]
    assert any("2002" in u["claim"] and "number 2002" in u["missing"] for u in date)
    names = scores["flight-contradicted-4"].details["unsupported"]
    assert any("name munich" in u["missing"] for u in names)
    negation = scores["python-3.12-contradicted-4"].details["unsupported"]
    assert any("negation differs" in u["missing"] for u in negation)
    assert "weakest" in scores["oresund-contradicted-3"].explanation


def test_citations_to_pages_that_do_not_support_or_could_not_be_fetched_are_listed(
        labelled: list[tuple[Transcript, ScoringInput]]) -> None:
    scores = by_id(labelled, score_all([item for _, item in labelled]))
    unavailable = [c for c in scores["oresund-faithful-2"].details["citations"] if c["status"] == "unavailable"]
    assert unavailable and "timeout" in unavailable[0]["reason"]
    assert unavailable[0]["url"].startswith("https://www.example-travel.com/")
    contradicted = scores["nimbus-pricing-contradicted-3"].details["citations"]
    assert any(c["status"] == "unsupported" and "5.99" in c["claim"] for c in contradicted)
    assert scores["oresund-faithful-2"].details["citations_checked"] >= 3


def test_demo_rows_without_tool_evidence_are_not_scored(demo_path: Path) -> None:
    rows = rendered(demo_path, FIXTURES / "pages")
    scores = {t.id: s for (t, _), s in zip(rows, score_all([i for _, i in rows]), strict=True)}
    assert math.isnan(scores["support-password-reset"].score)
    assert "no evidence" in scores["support-password-reset"].explanation
    assert math.isnan(scores["analytics-pending-tool-call"].score)
    assert scores["hr-file-search-results"].score > scores["web-search-jwst-sources"].score
    jwst = scores["web-search-jwst-sources"].details
    assert any(c["status"] == "unavailable" and "404" in c["reason"] for c in jwst["citations"])


# ---------------------------------------------------------------- edge cases and the seam


def test_no_evidence_and_no_claims_are_nan_with_an_explanation() -> None:
    plain, empty = score_all([ScoringInput("What is 2 + 2?", "It is 4."),
                              ScoringInput("Tool: <tool_response>\n{\"name\": \"f\", \"call_id\": \"c\", "
                                           "\"output\": \"the stock is 4 units\"}\n</tool_response>\n\nAssistant:",
                                           "Ok!")])
    assert math.isnan(plain.score) and "no evidence" in plain.explanation and plain.error is None
    assert math.isnan(empty.score) and "no statement" in empty.explanation


def test_instructions_count_alone_only_when_asked() -> None:
    conv = Conversation(turns=(Message("user", "Can I get a refund?"),),
                        instructions="Annual plans can be refunded in full within 14 days of purchase.")
    item = ScoringInput("System: ...", "Annual plans can be refunded in full within 14 days.", conv)
    wrong = ScoringInput("System: ...", "Annual plans can be refunded in full within 30 days.", conv)
    assert math.isnan(score_all([item])[0].score)
    right, bad = score_all([item, wrong], messages="system")
    assert right.score > 0.8 > bad.score


def test_a_failing_row_fails_alone() -> None:
    class Flaky(GroundingScorer):
        def score_one(self, item: ScoringInput) -> Score:
            if item.response == "boom":
                raise RuntimeError("broken row")
            return super().score_one(item)

    scores = asyncio.run(Flaky().score_many([ScoringInput("a", "b"), ScoringInput("a", "boom"),
                                             ScoringInput("a", "c")]))
    assert len(scores) == 3 and scores[1].error == "RuntimeError: broken row" and math.isnan(scores[1].score)
    assert scores[0].error is None and scores[2].error is None


def test_registry_and_options() -> None:
    assert {"grounding", "judge", "tlm"} <= set(scorer_names())
    assert isinstance(get_scorer("grounding", {"threshold": 0.4}), GroundingScorer)
    with pytest.raises(ScorerError, match=r"unknown scorer 'nope'.*grounding"):
        get_scorer("nope")
    with pytest.raises(ScorerError, match="bogus"):
        get_scorer("grounding", {"bogus": 1})
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        Score(1.5)
    assert GroundingOptions().messages == "context"


def test_scores_are_the_same_in_another_process(labelled: list[tuple[Transcript, ScoringInput]]) -> None:
    here = [s.score for s in score_all([item for _, item in labelled])]
    code = (
        "import asyncio, json\n"
        "from tests.scoring.test_grounding import LABELLED, rendered\n"
        "from tlmscore.scoring import get_scorer\n"
        "rows = rendered(LABELLED / 'labelled.jsonl', LABELLED / 'pages')\n"
        "scores = asyncio.run(get_scorer('grounding').score_many([i for _, i in rows]))\n"
        "print(json.dumps([[s.score, s.details] for s in scores], sort_keys=True))\n"
    )
    root = ROOT
    outputs = [subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")]
    assert outputs[0] == outputs[1]
    assert [score for score, _ in json.loads(outputs[0])] == here


# ---------------------------------------------------------------- text analysis


def test_numbers_dates_and_names_are_normalised() -> None:
    found = analyse("On 25th December 2021, NASA paid US$10,000 for two L2 parts at 1.50 each.")
    assert set(found.numbers) == {"25", "2021", "10000", "2", "1.5"}
    assert {"december", "nasa", "us", "l2"} <= set(found.names)
    assert "pay" not in found.names
    assert expand_dates("eta 2026-02-03T15:40:00+01:00") == "eta 3 February 2026, 15:40"


@pytest.mark.parametrize(("text", "negated"), [
    ("Monthly plans are not refundable.", True), ("You can't split it.", True),
    ("Split into no more than two blocks.", False), ("Refunds are allowed.", False),
])
def test_negation(text: str, negated: bool) -> None:
    assert is_negated(text) is negated


def test_sentences_clauses_and_markdown() -> None:
    text = "Dr. Who paid 1.5 m, e.g. for parts. It works!\n- **Cost:** about $10 ([example.com](https://example.com/a))"
    assert sentences(text) == ["Dr. Who paid 1.5 m, e.g. for parts.", "It works!",
                               "- **Cost:** about $10 ([example.com](https://example.com/a))"]
    assert clean_markdown("- **Cost:** about $10 ([example.com](https://example.com/a))") == "Cost: about $10"
    assert clauses("It left at 13:05, but it was late; sorry") == ["It left at 13:05", "it was late", "sorry"]
