"""The judge's claims mode against fake OpenAI-compatible servers on 127.0.0.1: one request per claim, P(yes)."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import pytest

from tests.servers.judge_server import ChatReply, ChatServer, completion
from tlmscore._chat import Completion, TokenLogprob
from tlmscore.errors import ScorerError
from tlmscore.model import ScoringInput
from tlmscore.scoring import get_scorer
from tlmscore.scoring.grounding import GroundingScorer
from tlmscore.scoring.judge import FACT_PROMPT, JudgeScorer, p_yes

TOOL = "Tool: <tool_response>\n{json}\n</tool_response>\n\nAssistant:"
HARBOUR = ("The council approved the new harbour budget of 12 million euros on Monday. "
           "Work on the northern pier starts in March and ends in 2027.")
FILLER = " ".join(f"Sentence {n} is about the weather in the town of Exampleton, which was mild." for n in range(60))


def tool_input(output: str, response: str) -> ScoringInput:
    body = json.dumps({"name": "read_document", "call_id": "c1", "output": output})
    return ScoringInput(TOOL.format(json=body), response)


def yes_no(yes: float, no: float) -> Any:
    """A reply function: "Yes" with the log-probabilities log(yes), log(no) among the alternatives."""
    def reply(body: dict[str, Any], n: int) -> ChatReply:
        return ChatReply(body=completion("Yes", [("Yes", math.log(yes)), (" No", math.log(no)), ("Maybe", -9.0)]))
    return reply


def claims_judge(server: ChatServer, **options: Any) -> JudgeScorer:
    scorer = get_scorer("judge", {"model": "fake", "timeout": 5.0, "base_url": server.url, "mode": "claims",
                                  **options})
    assert isinstance(scorer, JudgeScorer)
    return scorer


def run(scorer: JudgeScorer, inputs: list[ScoringInput]) -> list[Any]:
    scores = asyncio.run(scorer.score_many(inputs))
    assert len(scores) == len(inputs)
    return list(scores)


def test_one_request_per_claim_with_its_passage_and_one_token() -> None:
    item = tool_input(HARBOUR, "The council approved a budget of 12 million euros. Work on the pier ends in 2027.")
    with ChatServer(yes_no(0.6, 0.2)) as server:
        [score] = run(claims_judge(server), [item])
    assert server.calls == 2
    for body in server.bodies:
        assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 20
        assert body["messages"][0] == {"role": "system", "content": FACT_PROMPT[0]}
        assert body["messages"][1]["content"].startswith(f"PASSAGE: {HARBOUR}\n\nCLAIM: ")
    claims = sorted(b["messages"][1]["content"].split("CLAIM: ")[1] for b in server.bodies)
    assert claims[0].startswith("The council approved") and claims[1].startswith("Work on the pier")
    # P(yes) normalised over yes and no: 0.6 / 0.8; both claims alike, so mean and min agree
    assert score.score == pytest.approx(0.75)
    assert all(c["from_logprobs"] and c["p_yes"] == pytest.approx(0.75) for c in score.details["claims"])
    assert "token probabilities" in score.explanation


def test_the_weakest_claim_weighs_most() -> None:
    def reply(body: dict[str, Any], n: int) -> ChatReply:
        doubtful = "2030" in body["messages"][1]["content"]
        return ChatReply(body=completion("No" if doubtful else "Yes",
                                         [("No", math.log(0.9)), ("Yes", math.log(0.1))] if doubtful
                                         else [("Yes", math.log(0.9)), ("No", math.log(0.1))]))

    item = tool_input(HARBOUR, "The council approved a budget of 12 million euros. Work on the pier ends in 2030.")
    with ChatServer(reply) as server:
        [score] = run(claims_judge(server), [item])
    assert score.score == pytest.approx(0.3 * (0.9 + 0.1) / 2 + 0.7 * 0.1)
    assert "2030" in score.explanation.split("weakest:")[1]


def test_without_log_probabilities_the_verdict_text_decides() -> None:
    def reply(body: dict[str, Any], n: int) -> ChatReply:
        return ChatReply(body=completion("No." if "2030" in body["messages"][1]["content"] else "yes"))

    inputs = [tool_input(HARBOUR, "Work on the pier ends in 2027."),
              tool_input(HARBOUR, "Work on the pier ends in 2030.")]
    with ChatServer(reply) as server:
        scores = run(claims_judge(server), inputs)
    assert [s.score for s in scores] == [1.0, 0.0]
    assert all(not c["from_logprobs"] for s in scores for c in s.details["claims"])
    assert "verdict text" in scores[0].explanation


def test_an_endpoint_rejecting_logprobs_is_asked_without_them() -> None:
    def reply(body: dict[str, Any], n: int) -> ChatReply:
        if body.get("logprobs"):
            return ChatReply(400, {"error": {"message": "logprobs are not supported"}})
        return ChatReply(body=completion("Yes"))

    with ChatServer(reply) as server:
        [score] = run(claims_judge(server, concurrency=1), [tool_input(HARBOUR, "Work on the pier ends in 2027.")])
    assert score.score == 1.0 and score.details["logprobs_available"] is False


def test_unreadable_verdicts_are_nan_never_a_score() -> None:
    with ChatServer(lambda body, n: ChatReply(body=completion("Perhaps"))) as server:
        [score] = run(claims_judge(server), [tool_input(HARBOUR, "Work on the pier ends in 2027.")])
    assert math.isnan(score.score) and score.error is None
    assert "no readable verdict" in score.explanation and "Perhaps" in score.explanation


def test_rows_without_evidence_are_not_sent() -> None:
    with ChatServer(yes_no(0.5, 0.5)) as server:
        [score] = run(claims_judge(server), [ScoringInput("User: hello\n\nAssistant:", "Work ends in 2027.")])
    assert server.calls == 0 and math.isnan(score.score) and "no evidence" in score.explanation


def test_a_failed_request_fails_its_row_only() -> None:
    def reply(body: dict[str, Any], n: int) -> ChatReply:
        if "2030" in body["messages"][1]["content"]:
            return ChatReply(400, {"error": {"message": "bad request"}})
        return ChatReply(body=completion("Yes"))

    inputs = [tool_input(HARBOUR, "Work on the pier ends in 2030."),
              tool_input(HARBOUR, "Work on the pier ends in 2027.")]
    with ChatServer(reply) as server:
        scores = run(claims_judge(server, retries=0), inputs)
    assert scores[0].error is not None and "HTTP 400" in scores[0].error
    assert scores[1].score == 1.0


def test_long_evidence_sends_the_sentences_the_claim_needs() -> None:
    output = f"{FILLER} {HARBOUR} {FILLER}"
    item = tool_input(output, "Work on the northern pier ends in 2027.")
    [found] = GroundingScorer().claim_passages(item, 600)  # type: ignore[misc]
    assert len(found.passage) <= 600 and "ends in 2027" in found.passage and "…" in found.passage
    with ChatServer(yes_no(0.9, 0.1)) as server:
        scorer = claims_judge(server, passage_chars=600)
        plan = scorer.plan([item])
        run(scorer, [item])
    content = server.bodies[0]["messages"][1]["content"]
    assert len(content) < 800 and "ends in 2027" in content
    assert plan.requests == 1 and plan.input_tokens < 300 and plan.max_output_tokens == 1


def test_claims_mode_refuses_batch_and_samples() -> None:
    for bad in ({"samples": 2}, {"batch": True, "batch_dir": "x"}):
        with pytest.raises(ScorerError, match="mode claims"):
            get_scorer("judge", {"model": "m", "base_url": "http://127.0.0.1:9/v1", "mode": "claims", **bad})


@pytest.mark.parametrize(("tokens", "text", "expected"), [
    ((TokenLogprob("Yes", math.log(0.7), (("Yes", math.log(0.7)), ("YES", math.log(0.1)), ("No", math.log(0.2)))),),
     "Yes", (0.8, True)),
    ((TokenLogprob("No", math.log(0.5), (("No", math.log(0.5)), ("Sure", math.log(0.5)))),), "No", (0.0, True)),
    ((TokenLogprob("Maybe", -0.1, (("Maybe", -0.1),)),), "Maybe yes", (None, False)),
    ((), " Yes, it is", (1.0, False)),
    ((), "", (None, False)),
])
def test_p_yes(tokens: tuple[TokenLogprob, ...], text: str, expected: tuple[float | None, bool]) -> None:
    value, from_logprobs = p_yes(Completion(text, tokens))
    assert from_logprobs is expected[1]
    assert value == (pytest.approx(expected[0]) if expected[0] is not None else None)


# ---------------------------------------------------------------- a real model behind llama.cpp's server
# (the `llama_server` fixture: tests/servers/llama_server.py, `tlmscore judge-server`)


@pytest.mark.system("llama.cpp")
def test_claims_mode_with_a_real_model(llama_server: str) -> None:
    inputs = [tool_input(HARBOUR, "Work on the northern pier ends in 2027."),
              tool_input(HARBOUR, "The council rejected the harbour budget. Work on the pier starts in June.")]
    scorer = get_scorer("judge", {"model": "gemma-3-270m", "base_url": llama_server, "mode": "claims",
                                  "timeout": 120.0, "cache": False})
    assert isinstance(scorer, JudgeScorer)
    scores = run(scorer, inputs)
    assert [len(s.details["claims"]) for s in scores] == [1, 2]
    for score in scores:
        assert score.error is None, score.error
        assert 0.0 <= score.score <= 1.0
        assert score.details["logprobs_available"] is True
        assert all(c["from_logprobs"] for c in score.details["claims"]), score.details  # P(yes) from the token
