"""The tlm scorer: clear set-up errors, and batching and results through a fake TLM (no network); what
the real client sends (preset, key, options) is held in test_surface.py against a fake Cleanlab API."""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Sequence
from typing import Any

import pytest

from tlmscore.errors import ScorerError
from tlmscore.model import ScoringInput
from tlmscore.scoring import get_scorer
from tlmscore.scoring.tlm import TLMOptions, TLMScorer

INPUTS = [ScoringInput(prompt=f"User: question {n}\n\nAssistant:", response=f"answer {n}") for n in range(5)]


class FakeTLM:
    """Stands in for `cleanlab_tlm.TLM`: records batches; row 3 fails the way TLM reports failures."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def get_trustworthiness_score(self, prompt: Sequence[str], response: Sequence[str]) -> list[dict[str, Any]]:
        self.batches.append(list(prompt))
        results: list[dict[str, Any]] = []
        for p, r in zip(prompt, response, strict=True):
            n = int(r.split()[-1])
            if n == 3:
                results.append({"trustworthiness_score": None,
                                "log": {"error": {"message": "rate limited", "retryable": True}}})
            else:
                results.append({"trustworthiness_score": n / 10,
                                "log": {"explanation": f"checked {p[:6]}", "per_field_score": {"x": 1}}})
        return results


class AsyncFakeTLM(FakeTLM):
    async def get_trustworthiness_score_async(self, prompt: Sequence[str],
                                              response: Sequence[str]) -> list[dict[str, Any]]:
        return self.get_trustworthiness_score(prompt, response)


def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CLEANLAB_API_KEY", "CLEANLAB_TLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def test_missing_key_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    no_key(monkeypatch)
    with pytest.raises(ScorerError, match="CLEANLAB_API_KEY"):
        get_scorer("tlm")
    with pytest.raises(ScorerError, match="MY_KEY"):
        get_scorer("tlm", {"api_key_env": "MY_KEY"})


def test_missing_package_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLEANLAB_API_KEY", "test-key")
    monkeypatch.setitem(sys.modules, "cleanlab_tlm", None)
    with pytest.raises(ScorerError, match=r"pip install 'tlmscore\[tlm\]'"):
        get_scorer("tlm")


def test_bad_options_are_rejected_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLEANLAB_API_KEY", "test-key")
    with pytest.raises(ScorerError, match="quality_preset"):
        get_scorer("tlm", {"quality_preset": "ultra"})
    with pytest.raises(ScorerError, match="could not be set up"):
        get_scorer("tlm", {"options": {"no_such_option": 1}})


@pytest.mark.parametrize("fake", [FakeTLM, AsyncFakeTLM])
def test_batches_scores_explanations_and_row_errors(fake: type[FakeTLM]) -> None:
    client = fake()
    scorer = TLMScorer(TLMOptions(batch_size=2), client=client)
    scores = asyncio.run(scorer.score_many(INPUTS))
    assert [len(b) for b in client.batches] == [2, 2, 1]
    assert len(scores) == len(INPUTS)
    assert [s.score for s in scores if s.scored] == [0.0, 0.1, 0.2, 0.4]
    assert scores[1].explanation == "checked User: " and scores[1].details == {"per_field_score": {"x": 1}}
    assert math.isnan(scores[3].score) and scores[3].error == "rate limited"
    assert scores[3].details == {"retryable": True}


def test_a_failed_call_fails_its_batch_only() -> None:
    class Flaky(FakeTLM):
        def get_trustworthiness_score(self, prompt: Sequence[str], response: Sequence[str]) -> list[dict[str, Any]]:
            if len(self.batches) == 1:
                self.batches.append(list(prompt))
                raise TimeoutError("TLM timed out")
            return super().get_trustworthiness_score(prompt, response)

    scores = asyncio.run(TLMScorer(TLMOptions(batch_size=2), client=Flaky()).score_many(INPUTS))
    assert len(scores) == len(INPUTS)
    assert [s.error for s in scores[2:4]] == ["TLM call failed: TimeoutError: TLM timed out"] * 2
    assert scores[0].scored and scores[1].scored and scores[4].scored


def test_a_wrong_number_of_results_fails_the_batch() -> None:
    class Short(FakeTLM):
        def get_trustworthiness_score(self, prompt: Sequence[str], response: Sequence[str]) -> list[dict[str, Any]]:
            return super().get_trustworthiness_score(prompt, response)[:-1]

    scores = asyncio.run(TLMScorer(TLMOptions(batch_size=5), client=Short()).score_many(INPUTS))
    assert len(scores) == len(INPUTS) and all(s.error for s in scores)
