"""Grounding on answers as people write them: closing questions, links, derived figures, images, short tables."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import FIXTURES
from tlmscore import read_transcripts
from tlmscore.cli import main
from tlmscore.convert import convert_transcript
from tlmscore.model import Evidence, ScoringInput
from tlmscore.output import read_rows
from tlmscore.rendering import render
from tlmscore.scoring import Score
from tlmscore.scoring.grounding import GroundingScorer
from tlmscore.scoring.grounding._claims import about_the_calls, answer_sentences, claims_of, to_the_reader
from tlmscore.scoring.grounding._evidence import IMAGE_ONLY, documents, table_lines, without_images
from tlmscore.scoring.grounding._support import derived
from tlmscore.scoring.grounding._text import clauses, clean_markdown
from tlmscore.settings import Settings

IMAGE = "[image: image/png, 70 bytes, sha256:497790947d46]"


def tool_answer(output: Any, answer: str, question: str = "What did the tool find?") -> ScoringInput:
    """A Responses record whose evidence is one function call's output, rendered as the pipeline renders it."""
    record = {"id": "r", "request": {"model": "gpt-4.1", "input": [
        {"role": "user", "content": question},
        {"type": "function_call", "name": "lookup", "arguments": "{}", "call_id": "c1", "id": "fc1",
         "status": "completed"},
        {"type": "function_call_output", "call_id": "c1",
         "output": output if isinstance(output, str | list) else json.dumps(output)}]},
        "response": {"id": "resp_1", "object": "response", "model": "gpt-4.1", "status": "completed",
                     "output": [{"type": "message", "id": "m1", "role": "assistant", "status": "completed",
                                 "content": [{"type": "output_text", "text": answer, "annotations": []}]}]}}
    transcript = next(iter(read_transcripts([record])))
    return render(convert_transcript(transcript, Settings()), {}, Settings())


@pytest.fixture(scope="module")
def scorer() -> GroundingScorer:
    return GroundingScorer()


def score(scorer: GroundingScorer, output: Any, answer: str) -> Score:
    return scorer.score_one(tool_answer(output, answer))


def claim_texts(answer: str) -> list[str]:
    return [c.text for s in answer_sentences(answer) for c in claims_of(s, 3)]


SHORT_LINK = ("Short URL: https://zip1.io/oMAchr\nOriginal URL: https://ai-sdk.dev/\nMax clicks: 100\n"
              "Stats page: https://zip1.io/stats/oMAchr")
ZIP1 = ("Short URL created: https://zip1.io/oMAchr\nGenerated code: oMAchr\nMax clicks: 100\n"
        "Original URL: https://ai-sdk.dev/\nView stats: https://zip1.io/stats/oMAchr")


# ---------------------------------------------------------------- what is not a claim


@pytest.mark.parametrize("sentence", [
    "Would you like a custom alias, password protection, or a description added to this short link?",
    "If you'd like any adjustments or another style, just let me know!",
    "If you want the code saved to a file, tell me and I can adjust.",
    "Let me know if you need anything else.",
    "Feel free to ask for more details.",
    "I'll check the delivery logs next.",
    "I can also export it as CSV.",
    "Want me to pull the precinct results as well?",
    "Hope this helps!",
])
def test_questions_offers_and_intents_are_not_claims(sentence: str) -> None:
    assert to_the_reader(sentence)
    assert claim_texts(f"The order shipped on 3 May 2025. {sentence}") == ["The order shipped on 3 May 2025."]


@pytest.mark.parametrize("sentence", [
    "I can confirm that the order shipped on 3 May 2025.",
    "If you earn more than 50,000 euros, you pay the higher rate.",
    "Prices fell 4% in March.",
])
def test_statements_that_look_like_offers_stay_claims(sentence: str) -> None:
    assert not to_the_reader(sentence)
    assert claim_texts(sentence)


def test_the_options_an_offer_lists_are_not_claims() -> None:
    answer = ("Vercel raised a Series F.\n\nWould you like me to:\n- open more tech sites from today and run the "
              "same search, or\n- search for a different keyword?\n\nThe round valued it at 9.3 billion dollars.")
    assert claim_texts(answer) == ["Vercel raised a Series F.", "The round valued it at 9.3 billion dollars."]


def test_a_closing_question_does_not_lower_an_answer_that_matches_its_tool_output(scorer: GroundingScorer) -> None:
    plain = score(scorer, ZIP1, f"Done, I created a short link for you.\n\n{SHORT_LINK}")
    asked = score(scorer, ZIP1, f"Done, I created a short link for you.\n\n{SHORT_LINK}\n\nWould you like a custom "
                                f"alias, password protection, or a description added to this short link?")
    assert asked.score == plain.score and asked.score > 0.8
    assert asked.details["claims"] == plain.details["claims"]


def test_an_answer_that_only_asks_is_not_scored(scorer: GroundingScorer) -> None:
    found = score(scorer, ZIP1, "Would you like me to create another short link?")
    assert math.isnan(found.score) and "makes no statement" in found.explanation


# ---------------------------------------------------------------- links, URLs and quoted labels


def test_links_of_any_scheme_keep_their_label_and_lose_their_target() -> None:
    assert clean_markdown("[Download the file](sandbox:/mnt/data/sums.txt) now") == "Download the file now"
    assert clean_markdown("Write to mailto:help@example.com or see www.example.com/help today") \
        == "Write to   or see   today"


@pytest.mark.parametrize(("text", "expected"), [
    ('The file ends with a total line, e.g. "TOTAL: 70024"',
     ["The file ends with a total line", 'e.g. "TOTAL: 70024"']),
    ("Download it here [the file](sandbox:/mnt/data/two_dice_sums.txt)",
     ["Download it here [the file](sandbox:/mnt/data/two_dice_sums.txt)"]),
    ("The page https://example.com/a:b lists it", ["The page https://example.com/a:b lists it"]),
    ("Two parts: one; and another", ["Two parts", "one", "and another"]),
])
def test_clauses_are_not_cut_inside_quotes_links_or_urls(text: str, expected: list[str]) -> None:
    assert clauses(text) == expected


def test_a_link_to_a_file_is_not_cut_into_claims() -> None:
    found = claim_texts("You can download it here: [Download the file](sandbox:/mnt/data/two_dice_sums_10000.txt)")
    assert not any("sandbox" in text or text.startswith("/mnt") for text in found)


# ---------------------------------------------------------------- figures derived from the evidence


@pytest.mark.parametrize(("number", "found", "expected"), [
    ("11", {"42", "31"}, True),        # a difference
    ("73", {"42", "31"}, True),        # a sum
    ("58.3", {"120", "190"}, True),    # a percent change, rounded as written
    ("18.75", {"160", "190"}, True),
    ("25", {"12", "48"}, True),        # a percentage
    ("12", {"42", "31"}, False),
    ("58.4", {"120", "190"}, False),
    ("3", {"4", "1"}, False),          # small whole numbers are too easily made
    ("2002", {"2000", "2"}, False),    # nor is a year
    ("1998", {"1990", "8"}, False),
])
def test_derived_figures(number: str, found: set[str], expected: bool) -> None:
    assert derived(number, frozenset(found)) is expected


def test_a_figure_derived_from_the_tool_output_is_supported(scorer: GroundingScorer) -> None:
    output = {"sku": "sku_123", "availableUnits": 42, "requestedUnits": 31, "sufficient": True}
    right = score(scorer, output, "Inventory is sufficient: 42 units available versus 31 units requested, "
                                  "leaving a surplus of 11 units.")
    wrong = score(scorer, output, "Inventory is sufficient: 42 units available versus 31 units requested, "
                                  "leaving a surplus of 14 units.")
    assert right.score >= 0.7 and not right.details["unsupported"]
    assert wrong.score < 0.5 and "number 14" in json.dumps(wrong.details["unsupported"])


def test_json_keys_in_camel_case_read_as_words() -> None:
    docs = documents(tool_answer({"availableUnits": 42, "requested_units": 31}, "Fine."))
    assert docs[0].text.splitlines() == ["available units: 42", "requested units: 31"]


# ---------------------------------------------------------------- images are no evidence


def test_a_tool_output_that_is_only_an_image_is_no_evidence(scorer: GroundingScorer) -> None:
    found = score(scorer, {"image": IMAGE}, "Here is a tiny teal square icon.")
    assert math.isnan(found.score)
    assert "only an image" in found.explanation
    assert found.details["evidence"]["tool_outputs_image_only"] == 1
    assert documents(tool_answer({"image": IMAGE}, "x."))[0].reason == IMAGE_ONLY


def test_an_image_beside_text_leaves_the_text(scorer: GroundingScorer) -> None:
    output = [{"logs": "growth 58.3%\n"}, {"image": IMAGE}]
    assert without_images(f"logs: growth 58.3%\nimage: {IMAGE}") == "logs: growth 58.3%"
    found = score(scorer, output, "Growth was 58.3%.")
    assert found.score > 0.5 and found.details["evidence"]["tool_outputs"] == 1


# ---------------------------------------------------------------- short structured outputs


@pytest.mark.parametrize(("text", "expected"), [
    ("count\n17", ["count: 17"]),
    ("city,temp\nRome,24\nOslo,9", ["city: Rome", "temp: 24", "city: Oslo", "temp: 9"]),
    ("| city | temp |\n|---|---|\n| Rome | 24 |", ["city: Rome", "temp: 24"]),
    ("name\tqty\nbolts\t400", ["name: bolts", "qty: 400"]),
    ("The run finished.\nIt took 17 seconds.", None),
    ("Anna: I will come at 5, ok\nTom: fine, see you", None),
    ("count\nseventeen", None),
])
def test_short_tables_read_as_column_value_lines(text: str, expected: list[str] | None) -> None:
    assert table_lines(text) == expected


def test_a_sentence_stating_a_short_tool_outputs_values_is_supported(scorer: GroundingScorer) -> None:
    right = score(scorer, "count\n17", "17 orders are currently late.")
    wrong = score(scorer, "count\n17", "18 orders are currently late.")
    assert right.score >= 0.7 and wrong.score < 0.5
    table = "city,temp_c\nRome,24\nOslo,9"
    assert score(scorer, table, "Rome is warmer: 24 °C against 9 °C in Oslo.").score >= 0.7
    assert score(scorer, table, "Rome is warmer: 26 °C against 9 °C in Oslo.").score < 0.5
    assert score(scorer, table, "Rome is warmer: 24 °C against 9 °C in Madrid.").score < 0.5


def test_the_audit_notebooks_least_supported_list_is_not_topped_by_a_supported_answer(tmp_path: Path) -> None:
    """The notebook lists the lowest scores first; `count` over `17` supports "17 orders are currently late"."""
    import tlmscore

    frame = tlmscore.score(FIXTURES / "items.jsonl", "grounding",
                           Settings(offline=True, progress=False, cache_dir=tmp_path / "cache"))
    scored = frame[frame.score.notna()].sort_values("score")
    assert float(frame.set_index("id").loc["custom-tool-grammar", "score"]) >= 0.7
    assert "custom-tool-grammar" not in set(scored.head(3)["id"])


def test_an_empty_structured_output_beside_a_readable_one_is_no_error(scorer: GroundingScorer) -> None:
    evidence = (Evidence(kind="tool", text="{}", call_id="c1", tool="lookup"),
                Evidence(kind="tool", text="count\n17", call_id="c2", tool="sql"))
    found = scorer.score_one(ScoringInput("q", "17 orders are currently late.", evidence=evidence))
    assert found.error is None and found.score >= 0.7


# ---------------------------------------------------------------- remarks on the answer's own tool calls


@pytest.mark.parametrize(("sentence", "expected"), [
    ("Note: The tools were called sequentially because getDemand cannot be called in parallel with other tools.",
     True),
    ("Both tools were invoked in parallel.", True),
    ("The function call was executed twice.", True),
    ("The function call returned 17 late orders.", False),     # a figure: a claim
    ("The new tools help farmers plant faster.", False),        # tools, but not how they were called
    ("We call this function the loss of the model.", False),    # a call, but no tool
])
def test_remarks_on_how_the_tools_were_called_are_not_claims(sentence: str, expected: bool) -> None:
    assert about_the_calls(sentence) is expected
    found = claim_texts(f"The order shipped on 3 May 2025. {sentence}")
    assert (found == ["The order shipped on 3 May 2025."]) is expected


# ---------------------------------------------------------------- the four recorded shapes through `tlmscore score`


def _response(n: int, items: list[dict[str, Any]], text: str) -> dict[str, Any]:
    message = {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}
    return {"id": f"resp_{n}", "object": "response", "model": "gpt-5", "status": "completed",
            "output": [*items, message]}


def _recorded_shapes() -> list[dict[str, Any]]:
    """Records shaped like four recorded answers: an MCP call, a program's output, an image, a code run."""
    mcp = {"type": "mcp_call", "id": "mcp_1", "status": "completed", "server_label": "zip1",
           "name": "create_short_url", "arguments": '{"url": "https://ai-sdk.dev/", "max_clicks": 100}',
           "error": None, "output": f"\u2705 {ZIP1}"}
    program = {"type": "program_output", "id": "cmo_1", "status": "completed", "call_id": "call_1",
               "result": json.dumps({"sku": "sku_123", "availableUnits": 42, "requestedUnits": 31,
                                     "sufficient": True})}
    image = {"type": "image_generation_call", "id": "ig_1", "status": "completed", "output_format": "png",
             "result": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kg"
                       "AAAABJRU5ErkJggg=="}
    code = {"type": "code_interpreter_call", "id": "ci_1", "status": "completed", "container_id": "cntr_1",
            "code": "sums = roll(10000)\ntotal_sum = sum(sums)\nlen(sums), total_sum",
            "outputs": [{"type": "logs", "logs": "(10000, 70024)"}]}
    answers: list[tuple[str, str, list[dict[str, Any]], str]] = [
        ("closing-question", "Make a short link for https://ai-sdk.dev/ with at most 100 clicks.", [mcp],
         f"Done \u2014 I created a short link for you.\n\n{SHORT_LINK}\n\nWould you like a custom alias, password "
         f"protection, or a description added to this short link?"),
        ("derived-figure", "Is there enough stock of sku_123?", [program],
         "Inventory is sufficient for `sku_123`: **42 units available** versus **31 units requested**, leaving a "
         "**surplus of 11 units**.\n\n*Note: The tools were called sequentially because `getDemand` cannot be "
         "called in parallel with other tools.*"),
        ("image-placeholder", "Draw a tiny teal square icon.", [image], "Here is a tiny teal square icon."),
        ("markdown-link", "Roll two dice 10,000 times and give me the total.", [code],
         "I ran 10,000 trials of rolling two dice and summed the results.\n\n- Total sum across all 10,000 rolls: "
         "70024\n- You can download it here:\n  [Download the file](sandbox:/mnt/data/two_dice_sums_10000.txt)"),
    ]
    return [{"id": name, "request": {"model": "gpt-5", "input": question}, "response": _response(n, items, text)}
            for n, (name, question, items, text) in enumerate(answers)]


def test_the_four_recorded_shapes_score_right_through_the_command(tmp_path: Path) -> None:
    source = tmp_path / "answers.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in _recorded_shapes()), encoding="utf-8")
    out = tmp_path / "scored.jsonl"
    assert main(["score", str(source), "-o", str(out), "--offline", "--cache-dir", str(tmp_path / "c")]) == 0
    rows = {row["id"]: dict(row) for row in read_rows(out)}
    assert list(rows) == ["closing-question", "derived-figure", "image-placeholder", "markdown-link"]
    asked = rows["closing-question"]
    assert asked["score"] >= 0.8 and "Would you like" not in json.dumps(asked["details"])
    derived_row = rows["derived-figure"]
    assert derived_row["score"] >= 0.7 and not derived_row["details"]["unsupported"]
    assert derived_row["details"]["claims"] == 3  # the note on how the tools were called is not one
    image_row = rows["image-placeholder"]
    assert image_row["score"] is None or math.isnan(image_row["score"])
    assert "only an image" in image_row["explanation"]
    linked = rows["markdown-link"]
    claims = json.dumps([*linked["details"]["unsupported"], *linked["details"]["partially_supported"]])
    assert "sandbox" not in claims and "/mnt" not in claims
    # The link's sentence and the total are supported; only the account of the run, which the code (not its
    # output) states, is not.
    assert [u["claim"] for u in linked["details"]["unsupported"]] == [
        "I ran 10,000 trials of rolling two dice and summed the results."]
    assert linked["details"]["claims"] == 3
