"""The grounding scorer on render's evidence values: scripts, citation styles, failed pages, parts, status."""
# ruff: noqa: RUF001  (text in other scripts is what these tests are about)

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from typing import Any

import pytest

import tlmscore
from tlmscore.evidence.page import MemoryPages
from tlmscore.model import Evidence, ScoringInput
from tlmscore.scoring import Score
from tlmscore.scoring.grounding import GroundingOptions, GroundingScorer
from tlmscore.scoring.grounding._claims import answer_sentences
from tlmscore.scoring.grounding._evidence import documents
from tlmscore.scoring.grounding._recent import Recent
from tlmscore.scoring.grounding._text import analyse, clean_markdown, is_negated, marker_numbers, sentences
from tlmscore.scoring.grounding._tokens import normalise, stem, tokens
from tlmscore.settings import Settings

URL = "https://bridge.example/oresund"
OTHER = "https://other.example/traffic"
ENGLISH = ("The Øresund Bridge opened to traffic on 1 July 2000. It is 7,845 metres long and links Copenhagen "
           "in Denmark with Malmö in Sweden. The bridge carries four lanes of road traffic and two railway tracks.")
ANSWER = "The Øresund Bridge opened on 1 July 2000. It is 7,845 metres long and links Copenhagen with Malmö."


def page(text: str, *, url: str = URL, number: int | None = 1, **fields: Any) -> Evidence:
    return Evidence(kind="page", text=text, url=url, title=fields.pop("title", "Øresund Bridge"), number=number,
                    call_id="ws_1", tool="web_search", **fields)


def score(response: str, *evidence: Evidence, status: str = "completed", **options: Any) -> Score:
    """Score one input whose prompt says nothing: everything the scorer knows comes from the values."""
    item = ScoringInput(prompt="When did the bridge open?", response=response, evidence=evidence, status=status)
    return GroundingScorer(GroundingOptions(**options)).score_one(item)


# ---------------------------------------------------------------- every script


@pytest.mark.parametrize(("evidence", "correct", "wrong"), [
    pytest.param("厄勒海峡大桥于2000年7月1日正式通车。大桥全长7845米，连接丹麦哥本哈根和瑞典马尔默。",
                 "厄勒海峡大桥于2000年7月1日通车，全长7845米，连接哥本哈根和马尔默。",
                 "厄勒海峡大桥于1998年3月5日通车，全长9120米，连接哥本哈根和马尔默。", id="chinese"),
    pytest.param("エーレスンド橋は2000年7月1日に開通した。橋の全長は7845メートルで、デンマークとスウェーデンを結んでいる。",
                 "エーレスンド橋は2000年7月1日に開通し、全長は7845メートルです。",
                 "エーレスンド橋は1998年3月5日に開通し、全長は9120メートルです。", id="japanese"),
    pytest.param("외레순 다리는 2000년 7월 1일에 개통되었다. 다리의 길이는 7845미터이며 덴마크와 스웨덴을 연결한다.",
                 "외레순 다리는 2000년 7월 1일에 개통되었고 길이는 7845미터이다.",
                 "외레순 다리는 1998년 3월 5일에 개통되었고 길이는 9120미터이다.", id="korean"),
    pytest.param("افتُتح جسر أوريسند في الأول من يوليو عام ٢٠٠٠. يبلغ طول الجسر ٧٨٤٥ مترًا ويربط بين الدنمارك والسويد.",
                 "افتتح جسر أوريسند في يوليو 2000، ويبلغ طوله 7845 مترا ويربط الدنمارك والسويد.",
                 "افتتح جسر أوريسند في يوليو 1998، ويبلغ طوله 9120 مترا ويربط الدنمارك والسويد.", id="arabic"),
    pytest.param("สะพานเออเรซุนด์เปิดใช้เมื่อปี 2000 สะพานมีความยาว 7845 เมตร เชื่อมเดนมาร์กกับสวีเดน",
                 "สะพานเออเรซุนด์เปิดใช้เมื่อปี 2000 และมีความยาว 7845 เมตร",
                 "สะพานเออเรซุนด์เปิดใช้เมื่อปี 1998 และมีความยาว 9120 เมตร", id="thai"),
    pytest.param("Мост через Эресунн открылся 1 июля 2000 года. Его длина составляет 7845 метров.",
                 "Мост через Эресунн открыт 1 июля 2000 года, длина моста 7845 метров.",
                 "Мост через Эресунн открыт 5 марта 1998 года, длина моста 9120 метров.", id="russian"),
])
def test_an_answer_in_any_script_with_near_identical_evidence_is_supported_and_wrong_figures_are_not(
        evidence: str, correct: str, wrong: str) -> None:
    good, bad = score(correct, page(evidence)), score(wrong, page(evidence))
    assert good.score >= 0.5, good.explanation
    assert bad.score < good.score, (good.explanation, bad.explanation)
    assert any("number" in m for u in bad.details["unsupported"] for m in u["missing"]), bad.details


def test_tokens_split_unspaced_scripts_into_bigrams_and_normalise_digits_and_marks() -> None:
    assert [t.text for t in tokens(normalise("大桥全长"))] == ["大桥", "桥全", "全长"]
    assert normalise("٢٠٠٠ و２０００") == "2000 و2000"
    assert normalise("مَكْتَبَة") == "مكتبة"  # harakat dropped, so vocalised and plain text meet
    assert analyse("2000年7月1日").numbers == ("2000", "7", "1")
    assert analyse("The U.K. government").names == ("uk",)


def test_stems_are_symmetric() -> None:
    assert stem("uses") == stem("used") == stem("using") == stem("use")
    assert stem("launched") == stem("launches") == stem("launching")
    assert stem("المكتبة") == stem("مكتبة")  # the article does not keep the same word apart
    assert stem("الكتاب") == stem("كتاب")
    assert stem("книги") == stem("книга")


def test_negation_in_other_languages() -> None:
    assert is_negated("Die Brücke ist nicht geöffnet.")
    assert is_negated("大桥没有通车。")
    assert is_negated("الجسر ليس مفتوحا")
    assert not is_negated("大桥已经通车。")


# ---------------------------------------------------------------- citation styles


@pytest.mark.parametrize("marked", [
    pytest.param("The Øresund Bridge opened on 1 July 2000.[1] It is 7,845 metres long and links Copenhagen "
                 "with Malmö.[1][2]", id="perplexity"),
    pytest.param("The Øresund Bridge opened on 1 July 2000 [1]. It is 7,845 metres long and links Copenhagen "
                 "with Malmö [1, 2].", id="bracket-before-stop"),
    pytest.param(f"The Øresund Bridge opened on 1 July 2000 [[1]]({URL}). It is 7,845 metres long and links "
                 f"Copenhagen with Malmö [[1]]({URL})[[2]]({OTHER}).", id="xai"),
    pytest.param("The Øresund Bridge opened on 1 July 2000.【1†source】 It is 7,845 metres long and links "
                 "Copenhagen with Malmö.【4:0†bridge.pdf】", id="assistants"),
    pytest.param(f"The Øresund Bridge opened on 1 July 2000. ([bridge.example]({URL})) It is 7,845 metres "
                 f"long and links Copenhagen with Malmö. ([bridge.example]({URL}))", id="openai"),
    pytest.param(f"The Øresund Bridge opened on 1 July 2000.[^1] It is 7,845 metres long and links Copenhagen "
                 f"with Malmö.[^1]\n\n[^1]: [Øresund Bridge]({URL})", id="footnote"),
])
def test_supported_answers_with_citation_markers_score_as_without_them(marked: str) -> None:
    evidence = (page(ENGLISH), page("Traffic on the bridge grew every year.", url=OTHER, number=2))
    plain = score(ANSWER, *evidence)
    cited = score(marked, *evidence)
    assert plain.score >= 0.8
    assert cited.score >= 0.8 * plain.score, cited.explanation
    assert cited.details["claims"] == plain.details["claims"]
    assert not cited.details["unsupported"]


def test_numbered_markers_cite_the_evidence_with_that_number() -> None:
    evidence = (page(ENGLISH), page("Traffic on the bridge grew every year.", url=OTHER, number=2))
    found = score("The Øresund Bridge opened on 1 July 2000.[2]", *evidence)
    assert found.details["citations_checked"] == 1
    assert found.details["citations"][0]["url"] == OTHER
    assert found.details["citations"][0]["status"] == "unsupported"


def test_markers_are_no_numbers_and_name_their_sources() -> None:
    assert analyse(clean_markdown("It opened in 2000.[1][2] It is long【3†source】.")).numbers == ("2000",)
    assert sentences(clean_markdown("It opened in 2000. It is long.")) == ["It opened in 2000.", "It is long."]
    found = answer_sentences("Data of FRED/St. Louis Fed.[2][5] Next one is here.")
    assert [(x.text, x.numbers) for x in found] == [("Data of FRED/St. Louis Fed.", (2, 5)), ("Next one is here.", ())]
    assert marker_numbers("[1, 3-4]") == (1, 3, 4)
    assert marker_numbers(f"[[5]]({URL})") == (5,)
    assert marker_numbers("【7:2†file.pdf】") == (7,)
    assert marker_numbers(f"([bridge.example]({URL}))") == ()


def test_reasoning_in_think_tags_is_never_a_claim() -> None:
    plain = score(ANSWER, page(ENGLISH))
    thought = score(f"<think>Maybe it opened in 1995 and is 99 km long.</think>\n{ANSWER}", page(ENGLISH))
    unclosed = score(f"{ANSWER}\n<think>Perhaps 1995 or 1996", page(ENGLISH))
    assert thought.score == plain.score == unclosed.score
    assert thought.details["claims"] == plain.details["claims"]


# ---------------------------------------------------------------- failed pages and other evidence values


@pytest.mark.parametrize("wording", [
    "This page could not be retrieved (timeout).",
    "Die Seite konnte nicht geladen werden.",
    "The Øresund Bridge opened on 1 July 2000. It is 7,845 metres long and links Copenhagen with Malmö.",
    "",
])
def test_a_failed_page_is_missing_evidence_whatever_its_rendered_wording(wording: str) -> None:
    failed = page(wording, available=False, status="timeout")
    alone = score(ANSWER, failed)
    assert math.isnan(alone.score)
    assert alone.details["evidence"]["pages_unavailable"] == 1
    cited = score("The Øresund Bridge opened on 1 July 2000.[1]", failed,
                  page("The bridge carries four lanes of road traffic.", url=OTHER, number=2))
    assert cited.details["evidence"] == {"pages": 1, "pages_unavailable": 1, "files": 0, "tool_outputs": 0,
                                         "messages": 0}
    assert cited.details["citations"] == [{"url": URL, "claim": "The Øresund Bridge opened on 1 July 2000.",
                                           "status": "unavailable", "support": None, "reason": "timeout"}]
    assert cited.score < 0.5


def test_documents_come_from_the_values_not_the_prompt() -> None:
    prompt = '<tool_response>\n{"name": "web_search", "output": [{"url": "https://x.example", "content": "x"}]}\n' \
             "</tool_response>"
    item = ScoringInput(prompt=prompt, response=ANSWER, evidence=(
        page(ENGLISH), Evidence(kind="file", text="Policy text.", title="policy.pdf", doc_id="file-1"),
        Evidence(kind="tool", text='{"flight": "LH 454", "gate": "Z25"}', tool="flight_status"),
        Evidence(kind="message", text="Answer briefly.", origin="developer")))
    docs = documents(item, "context")
    assert [(d.kind, d.source) for d in docs] == [("page", URL), ("file", "policy.pdf"),
                                                   ("tool", "flight_status"), ("message", "developer")]
    assert docs[2].text == "flight: LH 454\ngate: Z25"
    assert docs[2].structured
    assert docs[1].key == "file:file-1"


def test_citation_spans_in_the_values_check_the_cited_source() -> None:
    response = "The Øresund Bridge opened on 1 July 2000. Traffic shrank every year."
    span = (response.index("Traffic"), len(response))
    evidence = (page(ENGLISH, number=None),
                page("Traffic on the bridge grew every year.", url=OTHER, number=None, cited=(span,)))
    found = score(response, *evidence)
    assert found.details["citations_checked"] == 1
    assert found.details["citations"][0]["url"] == OTHER
    assert "shrank: the source says grew" in found.details["citations"][0]["missing"]


# ---------------------------------------------------------------- partial support and status


def test_a_claim_supported_in_part_scores_between_supported_and_contradicted() -> None:
    supported = score("The Øresund Bridge opened on 1 July 2000 and is 7,845 metres long.", page(ENGLISH))
    partial = score("The Øresund Bridge opened on 1 July 2000 and is 9,999 metres long.", page(ENGLISH))
    wrong = score("The Øresund Bridge opened on 5 March 1998 and is 9,999 metres long.", page(ENGLISH))
    assert supported.score > partial.score > wrong.score
    listed = partial.details["partially_supported"] + partial.details["unsupported"]
    assert [p["part"] for c in listed for p in c["unsupported_parts"]] == ["is 9,999 metres long."]
    assert "9,999 metres" in partial.explanation


def test_an_incomplete_answer_is_scored_on_what_it_finished_times_a_factor() -> None:
    cut = ANSWER + " The bridge carries four lanes and 99"
    complete = score(ANSWER, page(ENGLISH))
    incomplete = score(cut, page(ENGLISH), status="incomplete:max_output_tokens")
    assert incomplete.score == pytest.approx(complete.score * GroundingOptions().incomplete, abs=1e-3)
    assert incomplete.details["status"] == "incomplete:max_output_tokens"
    assert incomplete.details["claims"] == complete.details["claims"]
    assert "incomplete:max_output_tokens" in incomplete.explanation
    assert score(cut, page(ENGLISH), status="incomplete:max_output_tokens", incomplete=1.0).score == complete.score


# ---------------------------------------------------------------- provider shapes through the pipeline

SF_PAGE = ("San Francisco population. The city of San Francisco had an estimated population of 827,526 in 2024. "
           "The 2020 census counted 873,965 residents. The population declined after 2020 because of high costs.")
SF_ANSWER = ("San Francisco had an estimated population of 827,526 in 2024.[1][2] The 2020 census counted 873,965 "
             "residents.[2] The population declined after 2020 because of high costs.[1]")
SF_URLS = ("https://stats.example/san-francisco", "https://census.example/sf")


def _perplexity(content: str) -> dict[str, Any]:
    """A Perplexity Sonar record in the shape the API returns (top-level `citations`, `[n]` markers)."""
    return {"id": "pplx", "request": {"model": "sonar", "messages": [
        {"role": "user", "content": "What is the population of San Francisco?"}]},
        "response": {"id": "702738a1", "object": "chat.completion", "model": "sonar", "created": 1770768226,
                     "citations": list(SF_URLS), "choices": [{"index": 0, "finish_reason": "stop", "message": {
                         "role": "assistant", "content": content}}]}}


def _xai(content: str) -> dict[str, Any]:
    """An xAI Responses-compatible record: a web search call with `arguments`, `[[n]](url)` markers."""
    return {"id": "xai", "request": {"model": "grok-4", "input": "What is the population of San Francisco?",
                                     "tools": [{"type": "web_search"}]},
            "response": {"id": "resp_xai", "object": "response", "model": "grok-4", "status": "completed", "output": [
                {"type": "web_search_call", "id": "ws_1", "status": "completed",
                 "arguments": '{"query": "San Francisco population"}'},
                {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [
                    {"type": "output_text", "text": content, "annotations": [
                        {"type": "url_citation", "url": url, "title": "SF"} for url in SF_URLS]}]}]}}


@pytest.mark.parametrize(("record", "marked"), [
    pytest.param(_perplexity, SF_ANSWER, id="perplexity"),
    pytest.param(_xai, SF_ANSWER.replace("[1]", f"[[1]]({SF_URLS[0]})").replace("[2]", f"[[2]]({SF_URLS[1]})"),
                 id="xai"),
])
def test_provider_answers_with_markers_score_as_the_same_answer_without_them(
        record: Any, marked: str) -> None:
    plain = re.sub(r"\[\[?\d\]\]?(?:\([^)]*\))?", "", SF_ANSWER)
    pages = MemoryPages({SF_URLS[0]: SF_PAGE, SF_URLS[1]: SF_PAGE})
    frame = tlmscore.score([record(marked), record(plain)], "grounding", Settings(offline=True), pages=pages)
    with_markers, without = frame["score"].tolist()
    assert without >= 0.8, frame["explanation"].tolist()
    assert with_markers >= 0.8 * without, frame["explanation"].tolist()


def test_the_scorer_caches_are_bounded_by_characters() -> None:
    made: list[str] = []

    def make(key: str) -> str:
        made.append(key)
        return key.upper()

    cache = Recent(make, len, budget=10)
    assert [cache(k) for k in ("abcd", "efgh", "abcd")] == ["ABCD", "EFGH", "ABCD"]
    assert made == ["abcd", "efgh"]
    assert cache("ijkl") == "IJKL"  # 12 characters: the least recently used key goes
    assert len(cache) == 2
    cache("efgh")
    assert made == ["abcd", "efgh", "ijkl", "efgh"]
    assert cache("x" * 11) == "X" * 11  # larger than the budget: made, not kept
    assert len(cache) == 2


def _tool_outputs(prompt: str) -> list[str]:
    """The outputs of the prompt's non-web tool responses as render shows them: JSON text."""
    found = []
    for block in re.findall(r"<tool_response>\n(.*?)\n</tool_response>", prompt, re.DOTALL):
        output = json.loads(block)["output"]
        if not (isinstance(output, list) and output and all(isinstance(e, dict) for e in output)):
            found.append(output if isinstance(output, str) else json.dumps(output))
    return found


def test_the_labelled_fixtures_score_the_same_from_values_as_from_the_prompt() -> None:
    from tests.scoring.test_grounding import LABELLED, rendered

    scorer = GroundingScorer()
    for _, item in rendered(LABELLED / "labelled.jsonl", LABELLED / "pages"):
        outputs = iter(_tool_outputs(item.prompt))
        values = tuple(Evidence(kind=d.kind, text=next(outputs) if d.kind == "tool" else d.text,
                                url=d.source if d.kind == "page" else None, available=d.reason is None,
                                status=d.reason or "ok", tool=d.source if d.kind == "tool" else None)
                       for d in documents(item, "none"))
        from_prompt = scorer.score_one(replace(item, evidence=None))  # read back from the prompt's text
        from_values = scorer.score_one(replace(item, evidence=values))
        assert from_values.score == from_prompt.score, (from_prompt.explanation, from_values.explanation)


def test_the_weakest_claim_weighs_more_than_the_mean() -> None:
    """The score is 0.3 of the claims' mean support and 0.7 of the weakest (chosen on both development sets)."""
    found = score(f"{ANSWER} The bridge cost 99 billion euros to build.", page(ENGLISH))
    supports = found.details["support_by_claim"]
    assert len(supports) >= 2 and min(supports) < 0.5 < max(supports)
    assert found.score == pytest.approx(0.3 * sum(supports) / len(supports) + 0.7 * min(supports), abs=1e-3)
    assert found.score < (sum(supports) / len(supports) + min(supports)) / 2  # below the old half-and-half
