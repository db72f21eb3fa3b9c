"""What the judge costs: the verdict cache (a rerun sends nothing) and the money estimate with `max_cost`."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

import tlmscore
from tests.servers.judge_server import ChatReply, ChatServer, completion
from tlmscore.cli import main
from tlmscore.errors import ConfigError
from tlmscore.model import ScoringInput
from tlmscore.scoring import get_scorer
from tlmscore.scoring.judge import JudgeOptions, JudgeScorer

INPUTS = [ScoringInput(prompt=f"User: What is {n} + {n}?\n\nAssistant:", response=str(2 * n)) for n in range(4)]
EXIT_USAGE = 2
SECRET = "sk-test-secret-never-shown"  # noqa: S105  (a fake key, to check that outputs never show it)


def judge(server: ChatServer, **options: Any) -> JudgeScorer:
    scorer = get_scorer("judge", {"model": "fake", "timeout": 5.0, "base_url": server.url, **options})
    assert isinstance(scorer, JudgeScorer)
    return scorer


def run(scorer: JudgeScorer, inputs: list[ScoringInput] = INPUTS) -> list[Any]:
    return asyncio.run(scorer.score_many(inputs))


def replies(body: dict[str, Any], n: int) -> ChatReply:
    """Ratings with token probabilities; sampled answers that differ call by call."""
    if len(body["messages"]) == 1:
        return ChatReply(body=completion(f"answer number {n}"))
    return ChatReply(body=completion("A", [("A", math.log(0.8)), ("B", math.log(0.1)), ("C", math.log(0.1))]))


# ---------------------------------------------------------------- the verdict cache


def test_a_rerun_makes_no_request_and_gives_the_same_scores(tmp_path: Path) -> None:
    cache = str(tmp_path / "judge")
    with ChatServer(replies) as server:
        first = run(judge(server, samples=2, cache_dir=cache))
        sent = server.calls
        assert sent == len(INPUTS) * (2 + 2 * 2)
        again = run(judge(server, samples=2, cache_dir=cache))
        assert server.calls == sent  # nothing sent the second time
    assert [s.score for s in again] == [s.score for s in first]
    assert [s.details for s in again] == [s.details for s in first]
    assert all(len(s.details["agreements"]) == 2 for s in again)


def test_the_sampled_answers_are_cached_apart(tmp_path: Path) -> None:
    seen: list[str] = []

    def record(body: dict[str, Any], n: int) -> ChatReply:
        if len(body["messages"]) == 2 and "Answer 2:" in body["messages"][1]["content"]:
            seen.append(body["messages"][1]["content"].rsplit("Answer 2:\n", 1)[1].split("\n")[0])
        return replies(body, n)

    with ChatServer(record) as server:
        run(judge(server, samples=3, cache_dir=str(tmp_path)), INPUTS[:1])
    assert len(set(seen)) == 3


def test_what_changes_a_verdict_changes_the_key_and_no_cache_sends_again(tmp_path: Path) -> None:
    cache = str(tmp_path / "judge")
    with ChatServer(replies) as server:
        run(judge(server, cache_dir=cache))
        sent = server.calls
        run(judge(server, cache_dir=cache, temperature=0.5))  # another option: asked again
        assert server.calls == 2 * sent
        run(judge(server, cache_dir=cache, model="other"))  # another model: asked again
        assert server.calls == 3 * sent
        run(judge(server, cache_dir=cache, cache=False))  # the cache off: asked again, nothing read
        assert server.calls == 4 * sent
        run(judge(server))  # no folder: no cache
        assert server.calls == 5 * sent
        run(judge(server, cache_dir=cache, concurrency=1, timeout=9.0))  # options that change no reply
        assert server.calls == 5 * sent


def test_failed_requests_are_not_cached(tmp_path: Path) -> None:
    def failing(body: dict[str, Any], n: int) -> ChatReply:
        return ChatReply(status=400, body={"error": {"message": "bad request"}})

    with ChatServer(failing) as server:
        scores = run(judge(server, cache_dir=str(tmp_path), retries=0), INPUTS[:1])
        assert scores[0].error
    with ChatServer(replies) as server:
        scores = run(judge(server, cache_dir=str(tmp_path)), INPUTS[:1])
        assert server.calls == 2 and not scores[0].error


def test_the_library_run_keeps_verdicts_beside_the_page_cache_and_never_the_key(
        tmp_path: Path, demo_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TLMSCORE_TEST_KEY", SECRET)
    settings = tlmscore.Settings(offline=True, cache_dir=tmp_path / "c", page_files=(demo_path.parent / "pages",),
                                 progress=False)
    options = {"model": "fake", "timeout": 5.0, "api_key_env": "TLMSCORE_TEST_KEY"}
    with ChatServer(replies) as server:
        options["base_url"] = server.url
        tlmscore.run([demo_path], tmp_path / "a.jsonl", scorer="judge", options=options, settings=settings)
        sent = server.calls
        assert sent > 0
        tlmscore.run([demo_path], tmp_path / "b.jsonl", scorer="judge", options=options, settings=settings)
        assert server.calls == sent
    assert (tmp_path / "c" / "judge").is_dir()
    scores = [json.loads(line)["score"] for line in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert scores == [json.loads(line)["score"] for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    for path in (tmp_path / "c" / "judge", tmp_path):
        for file in path.rglob("*"):
            if file.is_file():
                assert SECRET.encode() not in file.read_bytes(), file


# ---------------------------------------------------------------- the cost estimate


def test_known_models_are_priced_and_the_batch_api_costs_half(tmp_path: Path) -> None:
    live = JudgeScorer(JudgeOptions(model="gpt-4o-mini-2024-07-18", base_url="http://127.0.0.1:9/v1"))
    plan = live.plan(INPUTS)
    expected = (plan.input_tokens * 0.15 + plan.max_output_tokens * 0.60) / 1e6
    assert plan.cost == pytest.approx(expected)
    assert f"at most about ${plan.cost:.3g}" in plan.describe()  # below a cent: three digits
    batch = JudgeScorer(JudgeOptions(model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1", batch=True,
                                     batch_dir=str(tmp_path)))
    assert batch.plan(INPUTS).cost == pytest.approx(expected / 2)


def test_other_models_need_prices_given() -> None:
    unknown = JudgeScorer(JudgeOptions(model="qwen2.5", base_url="http://127.0.0.1:9/v1"))
    assert unknown.plan(INPUTS).cost is None
    assert "no price known" in unknown.plan(INPUTS).describe()
    priced = JudgeScorer(JudgeOptions(model="qwen2.5", base_url="http://127.0.0.1:9/v1", price_in=1.0,
                                      price_out=3.0))
    plan = priced.plan(INPUTS)
    assert plan.cost == pytest.approx((plan.input_tokens * 1.0 + plan.max_output_tokens * 3.0) / 1e6)
    mine = JudgeScorer(JudgeOptions(model="gpt-4o", base_url="http://127.0.0.1:9/v1", price_in=0.0, price_out=0.0))
    assert mine.plan(INPUTS).cost == 0.0  # given prices win over the table


def test_max_cost_refuses_before_any_request(caplog: pytest.LogCaptureFixture) -> None:
    with ChatServer(replies) as server:
        cheap = judge(server, price_in=1.0, price_out=1.0)
        cost = cheap.plan(INPUTS).cost
        assert cost is not None and cost > 0
        with pytest.raises(ConfigError, match=r"above max_cost \$"):
            run(judge(server, price_in=1.0, price_out=1.0, max_cost=cost / 2))
        assert server.calls == 0
        with pytest.raises(ConfigError, match="no price is known"):
            run(judge(server, max_cost=100.0))
        assert server.calls == 0
        with caplog.at_level("INFO", logger="tlmscore"):
            run(judge(server, price_in=1.0, price_out=1.0, max_cost=cost * 1.01))
        assert server.calls > 0
        assert any("at most about $" in r.getMessage() for r in caplog.records)


def test_the_command_line_prints_the_cost_and_max_cost_exits_2_in_one_line(
        tmp_path: Path, demo_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TLMSCORE_TEST_KEY", SECRET)
    with ChatServer(replies) as server:
        base = ["score", str(demo_path), "--offline", "--cache-dir", str(tmp_path / "c"),
                "--pages", str(demo_path.parent / "pages"), "--quiet", "--scorer", "judge", "--model", "m",
                "--base-url", server.url, "--api-key-env", "TLMSCORE_TEST_KEY", "--price-in", "2", "--price-out", "8"]
        code = main([*base, "-o", str(tmp_path / "refused.jsonl"), "--max-cost", "0.0000001"])
        err = capsys.readouterr().err
        assert code == EXIT_USAGE
        assert server.calls == 0
        lines = [line for line in err.splitlines() if line.startswith("tlmscore: error:")]
        assert len(lines) == 1 and "is above max_cost $1e-07; no request of these" in lines[0]
        assert SECRET not in err
        code = main([*base, "-o", str(tmp_path / "o.jsonl"), "--max-cost", "5"])
        err = capsys.readouterr().err
        assert code == 0 and server.calls > 0
        # the refused run resumes with a higher limit: spending options are not the run's options
        code = main([*base, "-o", str(tmp_path / "refused.jsonl"), "--max-cost", "5", "--resume"])
        capsys.readouterr()
        assert code == 0
        assert (tmp_path / "refused.jsonl").read_text() == (tmp_path / "o.jsonl").read_text()
        assert "at most about $0.0" in err and SECRET not in err
        sent = server.calls
        code = main([*base, "-o", str(tmp_path / "again.jsonl")])
        err = capsys.readouterr().err
        assert code == 0 and server.calls == sent and "from the verdict cache" in err
        code = main([*base, "-o", str(tmp_path / "fresh.jsonl"), "--no-judge-cache"])
        capsys.readouterr()
        assert code == 0 and server.calls == 2 * sent
    code = main(["score", str(demo_path), "-o", str(tmp_path / "g.jsonl"), "--offline", "--max-cost", "1"])
    assert code == EXIT_USAGE
    assert "need --scorer judge" in capsys.readouterr().err
