"""The judge scorer against real HTTP servers on 127.0.0.1: a scripted fake and llama.cpp's server."""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.servers.judge_server import ChatReply, ChatServer, completion
from tlmscore._chat import Completion, TokenLogprob
from tlmscore.errors import ScorerError
from tlmscore.model import ScoringInput
from tlmscore.scoring import get_scorer
from tlmscore.scoring.judge import REFLECTION_PROMPTS, JudgeOptions, JudgeScorer, parse_rating, rate

INPUTS = [ScoringInput(prompt=f"User: What is {n} + {n}?\n\nAssistant:", response=str(2 * n)) for n in range(9)]
FAST = {"model": "fake", "timeout": 5.0}


def judge(server: ChatServer, **options: Any) -> JudgeScorer:
    scorer = get_scorer("judge", {**FAST, "base_url": server.url, **options})
    assert isinstance(scorer, JudgeScorer)
    return scorer


def run(scorer: JudgeScorer, inputs: list[ScoringInput] = INPUTS) -> list[Any]:
    """The scores of `inputs`: one each, in order (so a check over all of them covers every input)."""
    scores = asyncio.run(scorer.score_many(inputs))
    assert len(scores) == len(inputs), f"{len(scores)} scores for {len(inputs)} inputs"
    return list(scores)


def is_sampling(body: dict[str, Any]) -> bool:
    return len(body["messages"]) == 1


def confident(body: dict[str, Any], n: int) -> ChatReply:
    return ChatReply(body=completion("A", [("A", math.log(0.9)), ("B", math.log(0.05)), ("C", math.log(0.05))]))


# ---------------------------------------------------------------- ratings


@pytest.mark.parametrize(("text", "letter"), [
    ("A", "A"), (" B) incorrect", "B"), ("**C**", "C"), ("Answer: B", "B"), ("(A)", "A"),
    ("The answer is correct.", "A"), ("It is incorrect.", "B"), ("I am not sure", "C"),
    ("Question: What is", None), ("a banana", None), ("", None),
])
def test_parse_rating(text: str, letter: str | None) -> None:
    assert parse_rating(text) == letter


def test_rating_uses_letter_probabilities() -> None:
    reply = Completion("A", (TokenLogprob("A", math.log(0.6), (("A", math.log(0.6)), (" B", math.log(0.2)),
                                                                  ("C", math.log(0.2)), ("x", -1.0))),))
    rating = rate(reply)
    assert rating.letter == "A" and rating.from_logprobs
    assert rating.value == pytest.approx(0.6 * 1 + 0.2 * 0 + 0.2 * 0.5)


def test_unreadable_rating_is_unsure_and_flagged() -> None:
    rating = rate(Completion("Question: What is", (TokenLogprob("Question", -0.2, (("A", -5.0),)),)))
    assert rating.letter is None and rating.value == 0.5 and not rating.from_logprobs


def test_reflection_prompts_are_differently_worded() -> None:
    assert len({template for _, template in REFLECTION_PROMPTS}) == len(REFLECTION_PROMPTS) >= 2
    assert JudgeOptions(model="m").reflections >= 2


def test_every_rating_prompt_allows_any_language_and_keeps_the_evidence_as_written() -> None:
    item = ScoringInput(prompt="User: Wie hoch ist der Turm?\n\nTool: 東京タワーの高さは333メートルです。"
                               "\n\nAssistant:", response="Der Turm ist 333 Meter hoch.")
    with ChatServer(confident) as server:
        scores = run(judge(server, reflections=3, samples=1), [item])
    assert scores[0].score is not None and not math.isnan(scores[0].score)
    rating_requests = [b for b in server.bodies if not is_sampling(b)]
    assert len(rating_requests) == 4  # three reflections, one agreement
    for body in rating_requests:
        text = body["messages"][1]["content"]
        assert "may be in any language" in text and "keep the evidence in its language" in text
        assert "東京タワーの高さは333メートルです。" in text and "Der Turm ist 333 Meter hoch." in text


# ---------------------------------------------------------------- options and keys


def test_options_are_checked_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ScorerError, match="model"):
        get_scorer("judge", {})
    with pytest.raises(ScorerError, match="reflections"):
        get_scorer("judge", {"model": "m", "reflections": 1, "base_url": "http://127.0.0.1:9/v1"})
    monkeypatch.delenv("TLMSCORE_TEST_KEY", raising=False)
    with pytest.raises(ScorerError, match="TLMSCORE_TEST_KEY"):
        get_scorer("judge", {"model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "TLMSCORE_TEST_KEY"})
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ScorerError, match="OPENAI_API_KEY"):
        get_scorer("judge", {"model": "gpt-4.1-mini"})


def test_local_server_needs_no_key_and_key_is_sent_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ChatServer(confident) as server:
        run(judge(server), INPUTS[:1])
        assert "authorization" not in server.headers[0]
        monkeypatch.setenv("TLMSCORE_TEST_KEY", "sk-test")
        run(judge(server, api_key_env="TLMSCORE_TEST_KEY"), INPUTS[:1])
        assert server.headers[-1]["authorization"] == "Bearer sk-test"


# ---------------------------------------------------------------- scoring


def test_confident_ratings_use_token_probabilities() -> None:
    with ChatServer(confident) as server:
        scores = run(judge(server))
    assert len(scores) == len(INPUTS)
    for score in scores:
        assert score.error is None
        assert score.score == pytest.approx(0.9 + 0.05 * 0.5)
        assert score.details["reflections"][0]["from_logprobs"] is True
        assert "token probabilities" in score.explanation
    assert server.calls == 2 * len(INPUTS)
    assert all(body["logprobs"] is True and body["max_tokens"] == 8 for body in server.bodies)


def test_observed_consistency_is_combined_with_beta() -> None:
    def reply(body: dict[str, Any], n: int) -> ChatReply:
        if is_sampling(body):
            return ChatReply(body=completion("It is 5."))
        if "Answer 2:" in body["messages"][1]["content"]:
            return ChatReply(body=completion("B"))
        return ChatReply(body=completion("A"))

    with ChatServer(reply) as server:
        scores = run(judge(server, samples=3, logprobs=False), INPUTS[:2])
    for score in scores:
        assert score.details["self_reflection"] == 1.0 and score.details["observed_consistency"] == 0.0
        assert score.score == pytest.approx(0.7 * 0.0 + 0.3 * 1.0)
    assert server.calls == 2 * (2 + 3 + 3)


def test_garbage_ratings_become_nan_with_explanation_never_a_score() -> None:
    with ChatServer(lambda body, n: ChatReply(body=completion("Bananas are yellow."))) as server:
        scores = run(judge(server))
    assert len(scores) == len(INPUTS)
    for score in scores:
        assert math.isnan(score.score) and score.error is None
        assert "no readable rating" in score.explanation
        assert [r["rating"] for r in score.details["reflections"]] == [None, None]


def test_some_unreadable_ratings_count_as_unsure() -> None:
    with ChatServer(lambda body, n: ChatReply(body=completion("A" if n % 2 else "???"))) as server:
        scores = run(judge(server, logprobs=False, concurrency=1), INPUTS[:2])
    for score in scores:
        assert score.score == pytest.approx(0.75)
        assert "1 unreadable rating counted as unsure" in score.explanation


def test_every_third_call_failing_is_retried_and_nothing_is_lost() -> None:
    def flaky(body: dict[str, Any], n: int) -> ChatReply:
        return ChatReply(503, {"error": "overloaded"}) if n % 3 == 0 else confident(body, n)

    with ChatServer(flaky) as server:
        scores = run(judge(server, retries=3, concurrency=4))
    assert len(scores) == len(INPUTS)
    assert all(s.error is None and s.scored for s in scores)
    assert server.calls >= 2 * len(INPUTS) + (2 * len(INPUTS)) // 3


def test_every_third_call_failing_without_retries_fails_rows_not_the_batch() -> None:
    def flaky(body: dict[str, Any], n: int) -> ChatReply:
        return ChatReply(500, {"error": "boom"}) if n % 3 == 0 else confident(body, n)

    with ChatServer(flaky) as server:
        scores = run(judge(server, retries=0, concurrency=1))
    assert len(scores) == len(INPUTS)
    failed = [s for s in scores if s.error is not None]
    assert failed and len(failed) < len(INPUTS)
    assert all(math.isnan(s.score) and "HTTP 500" in s.error for s in failed)
    assert all(s.scored for s in scores if s.error is None)


def test_retry_after_and_429_are_honoured() -> None:
    def limited(body: dict[str, Any], n: int) -> ChatReply:
        return ChatReply(429, {"error": "slow down"}, {"Retry-After": "0"}) if n == 1 else confident(body, n)

    with ChatServer(limited) as server:
        scores = run(judge(server, concurrency=1), INPUTS[:1])
    assert scores[0].scored and server.calls == 3


def test_client_errors_are_not_retried() -> None:
    with ChatServer(lambda body, n: ChatReply(404, {"error": "no such model"})) as server:
        scores = run(judge(server), INPUTS[:2])
    assert all("HTTP 404" in (s.error or "") for s in scores)
    assert server.calls == 2 * 2


def test_endpoint_rejecting_logprobs_is_asked_without_them() -> None:
    def no_logprobs(body: dict[str, Any], n: int) -> ChatReply:
        if body.get("logprobs"):
            return ChatReply(400, {"error": {"message": "logprobs is not supported for this model"}})
        return ChatReply(body=completion("B"))

    with ChatServer(no_logprobs) as server:
        scores = run(judge(server, concurrency=1), INPUTS[:3])
    assert all(s.score == 0.0 and s.details["logprobs_available"] is False for s in scores)
    assert sum(1 for body in server.bodies if body.get("logprobs")) == 1


def reasoning_model(body: dict[str, Any], n: int) -> ChatReply:
    """OpenAI's replies for a reasoning model, word for word: no max_tokens, no temperature 0, no logprobs."""
    def unsupported(param: str, message: str) -> ChatReply:
        return ChatReply(400, {"error": {"message": message, "type": "invalid_request_error", "param": param,
                                         "code": "unsupported_parameter"}})

    if "max_tokens" in body:
        return unsupported("max_tokens", "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                         "Use 'max_completion_tokens' instead.")
    if body.get("temperature", 1) != 1:
        return unsupported("temperature", "Unsupported value: 'temperature' does not support 0 with this model. "
                                          "Only the default (1) value is supported.")
    if body.get("logprobs"):
        return unsupported("logprobs", "logprobs is not supported with this model.")
    return ChatReply(body=completion("B"))


def test_a_reasoning_model_gets_the_parameters_it_takes() -> None:
    with ChatServer(reasoning_model) as server:
        scores = run(judge(server, concurrency=1, max_tokens=256), INPUTS[:3])
    assert all(s.error is None and s.score == 0.0 for s in scores)
    assert all(s.details["logprobs_available"] is False for s in scores)
    last = server.bodies[-1]
    assert last["max_completion_tokens"] == 256 and "max_tokens" not in last
    assert "temperature" not in last and "logprobs" not in last
    assert server.calls == 3 + 2 * len(INPUTS[:3])  # three rejections, learnt once each


def test_other_bad_requests_are_not_retried_in_another_form() -> None:
    with ChatServer(lambda body, n: ChatReply(400, {"error": {"message": "context length exceeded"}})) as server:
        scores = run(judge(server, concurrency=1), INPUTS[:1])
    assert "HTTP 400" in (scores[0].error or "") and server.calls == 2


def test_timeouts_fail_the_row_after_retries() -> None:
    # The server answers after 3 s, the client gives up after 0.5 s: time enough, on a busy machine,
    # to connect and send each request (a client that timed out before sending would never be seen).
    with ChatServer(confident, latency=3.0) as server:
        scores = run(judge(server, timeout=0.5, retries=1), INPUTS[:1])
        # The server's thread may read the last request after the client gave up: wait (bounded), then count.
        deadline = time.monotonic() + 10
        while server.calls < 2 * 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # a fifth request, if one was sent, would be counted by now
    assert scores[0].error is not None and "Timeout" in scores[0].error
    assert server.calls == 2 * 2  # two reflections, each tried twice


def test_concurrency_limit_holds() -> None:
    with ChatServer(confident, hold_first=3) as server:  # the first three are answered together
        scores = run(judge(server, concurrency=3))
    assert all(s.error is None for s in scores)
    assert server.max_in_flight == 3


def test_invalid_json_body_fails_the_row() -> None:
    with ChatServer(lambda body, n: ChatReply(body="<html>oops</html>")) as server:
        scores = run(judge(server), INPUTS[:1])
    assert scores[0].error is not None and "unexpected body" in scores[0].error


def test_long_prompts_are_clipped_in_the_middle() -> None:
    long = ScoringInput(prompt="start " + "x" * 5000 + " end", response="ok")
    with ChatServer(confident) as server:
        scores = run(judge(server, max_prompt_chars=600), [long])
    content = server.bodies[0]["messages"][1]["content"]
    assert "start" in content and "end" in content and "characters omitted" in content
    assert scores[0].details["prompt_chars_omitted"] > 4000


# ---------------------------------------------------------------- the openai SDK, status, plan


def test_prepare_and_grounding_do_not_import_openai() -> None:
    code = ("import sys, tlmscore, tlmscore.cli._commands, tlmscore.pipeline._stages\n"
            "from tlmscore.scoring import get_scorer\n"
            "get_scorer('grounding')\n"
            "assert 'openai' not in sys.modules, sorted(m for m in sys.modules if m.startswith('openai'))\n"
            "get_scorer('judge', {'model': 'm', 'base_url': 'http://127.0.0.1:9/v1'})\n"
            "assert 'openai' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "OPENAI_API_KEY": ""})


def test_requests_go_through_the_openai_sdk() -> None:
    with ChatServer(confident) as server:
        run(judge(server), INPUTS[:1])
    assert all(h.get("x-stainless-lang") == "python" for h in server.headers)


def test_a_caller_owned_sdk_client_is_used_and_left_open() -> None:
    import openai

    async def main(url: str) -> tuple[list[Any], bool]:
        client = openai.AsyncOpenAI(base_url=url, api_key="sk-owned", max_retries=0)
        scorer = JudgeScorer(JudgeOptions(model="fake"), client=client)
        scores = await scorer.score_many(INPUTS[:1])
        closed = client.is_closed()
        await client.close()
        return scores, closed

    with ChatServer(confident) as server:
        scores, closed = asyncio.run(main(server.url))
    assert scores[0].scored and not closed
    assert server.headers[0]["authorization"] == "Bearer sk-owned"


def test_retired_backoff_options_warn_and_are_ignored() -> None:
    with pytest.warns(UserWarning, match="backoff"):
        options = JudgeOptions.model_validate({"model": "m", "backoff": 0.1, "max_backoff": 1.0})
    assert "backoff" not in options.model_dump()


@pytest.mark.parametrize(("status", "note"), [
    ("completed", None),
    ("incomplete:max_output_tokens", "cut short (max output tokens)"),
    ("incomplete:content_filter", "cut short (content filter)"),
    ("failed", "its status is failed"),
])
def test_the_judge_is_told_when_an_answer_did_not_finish(status: str, note: str | None) -> None:
    item = ScoringInput(prompt="User: Name three rivers.\n\nAssistant:", response="The Nile, the", status=status)
    with ChatServer(confident) as server:
        scores = run(judge(server), [item])
    contents = [body["messages"][1]["content"] for body in server.bodies]
    assert scores[0].details["response_status"] == status
    if note is None:
        assert not any("[Note:" in c for c in contents) and "did not finish" not in scores[0].explanation
    else:
        assert all(note in c and c.index("The Nile, the") < c.index(note) for c in contents)
        assert f"did not finish ({status})" in scores[0].explanation


def test_plan_counts_requests_and_estimates_tokens(caplog: pytest.LogCaptureFixture) -> None:
    scorer = JudgeScorer(JudgeOptions(model="m", base_url="http://127.0.0.1:9/v1", samples=2))
    plan = scorer.plan(INPUTS)
    assert plan.rows == len(INPUTS) and plan.requests == len(INPUTS) * (2 + 2 * 2)
    assert plan.max_output_tokens == len(INPUTS) * (2 * 8 + 2 * (512 + 8))
    longer = scorer.plan([ScoringInput(prompt=i.prompt * 20, response=i.response) for i in INPUTS])
    assert longer.input_tokens > plan.input_tokens > 0
    cjk = scorer.plan([ScoringInput(prompt="東京" * 100, response="x")]).input_tokens
    ascii_ = scorer.plan([ScoringInput(prompt="ab" * 100, response="x")]).input_tokens
    assert cjk > ascii_
    with ChatServer(confident) as server, caplog.at_level("INFO", logger="tlmscore"):
        run(judge(server), INPUTS[:2])
    assert any("judge: 4 requests for 2 rows" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------- a real model behind llama.cpp's server
# (the `llama_server` fixture: tests/servers/llama_server.py)


@pytest.mark.system("llama.cpp")
def test_judge_end_to_end_with_a_real_model(llama_server: str) -> None:
    inputs = [
        ScoringInput(prompt="User: What is the capital of France?\n\nAssistant:", response="Paris."),
        ScoringInput(prompt="System: " + "Our refund window is 14 days. " * 40 + "\n\nUser: Refund?\n\nAssistant:",
                     response="Yes, within 14 days."),
    ]
    scorer = get_scorer("judge", {"model": "gemma-3-270m", "base_url": llama_server, "concurrency": 2,
                                  "timeout": 120.0, "max_prompt_chars": 600, "samples": 1,
                                  "sample_max_tokens": 8})
    scores = asyncio.run(scorer.score_many(inputs))
    assert len(scores) == len(inputs)
    for score in scores:
        assert score.error is None, score.error
        assert score.explanation
        assert math.isnan(score.score) or 0.0 <= score.score <= 1.0
        assert len(score.details["reflections"]) == 2 and len(score.details["agreements"]) == 1
        assert score.details["logprobs_available"] is True
        if math.isnan(score.score):
            assert "no readable rating" in score.explanation
    assert scores[1].details["prompt_chars_omitted"] > 0


def test_sample_temperature_and_extra_body_are_what_the_judge_sends() -> None:
    def reply(body: dict[str, Any], n: int) -> ChatReply:
        return ChatReply(body=completion("It is 4." if len(body["messages"]) == 1 else "A"))

    with ChatServer(reply) as server:
        scorer = get_scorer("judge", {"model": "fake", "timeout": 5.0, "base_url": server.url, "samples": 2,
                                      "logprobs": False, "temperature": 0.0, "sample_temperature": 1.3,
                                      "extra_body": {"seed": 7, "top_k": 3}})
        (score,) = asyncio.run(scorer.score_many([ScoringInput(prompt="User: 2 + 2?\n\nAssistant:", response="4")]))
    assert score.scored
    samples = [b for b in server.bodies if len(b["messages"]) == 1]
    ratings = [b for b in server.bodies if len(b["messages"]) != 1]
    assert len(samples) == 2 and len(ratings) == 2 + 2  # two reflections, one agreement per sample
    assert [b["temperature"] for b in samples] == [1.3, 1.3]
    assert {b["temperature"] for b in ratings} == {0.0}
    assert all(b["seed"] == 7 and b["top_k"] == 3 for b in server.bodies)
