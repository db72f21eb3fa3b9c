"""`tlm`: Cleanlab's Trustworthy Language Model scores, through the `cleanlab-tlm` package.

Install with `pip install 'tlmscore[tlm]'` and set `CLEANLAB_API_KEY` (the package's own
`CLEANLAB_TLM_API_KEY` is read too). Inputs are sent in batches of `batch_size` to
`TLM.get_trustworthiness_score_async(prompts, responses)`; the quality preset and TLM options are
passed through unchanged, and TLM's explanation is asked for (`log=["explanation"]`, unless the
configuration cannot log explanations) and kept. A
missing package or key is one `ScorerError` when the scorer is built, before any work; a row TLM
could not score, or a batch whose call failed, becomes error rows. Every item has a timeout
(`timeout`, 120 s unless given, passed to TLM), and after three batch calls in a row have failed
the API is given up: the rows left fail at once, saying why, with no request sent. A run checks
that the API (`CLEANLAB_API_BASE_URL`, as cleanlab-tlm reads it) answers before its first batch.
"""

from __future__ import annotations

import asyncio
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, cast, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from tlmscore._breaker import Breaker
from tlmscore._endpoint import Endpoint
from tlmscore.errors import ScorerError
from tlmscore.model import ScoringInput
from tlmscore.scoring.base import Score, ScorerSpec, parse_options

__all__ = ["API_KEY_ENVS", "API_URL", "DEFAULT_TIMEOUT", "SPEC", "TLMClient", "TLMOptions", "TLMScorer", "create"]

API_KEY_ENVS = ("CLEANLAB_API_KEY", "CLEANLAB_TLM_API_KEY")
DEFAULT_TIMEOUT = 120.0
"""Seconds TLM may take per item unless `timeout` says otherwise (cleanlab-tlm's own default waits forever)."""
API_URL = "https://api.cleanlab.ai/api"
"""Cleanlab's API root, unless `CLEANLAB_API_BASE_URL` names another (cleanlab-tlm reads it so)."""
_INSTALL = "pip install 'tlmscore[tlm]'"


@runtime_checkable
class TLMClient(Protocol):
    """What this scorer needs of a `cleanlab_tlm.TLM`: batched scoring, async or sync."""

    def get_trustworthiness_score(self, prompt: Sequence[str], response: Sequence[str]) -> Any:
        """Scores for a batch (the sync form, run in a worker thread when no async form exists)."""
        ...


class TLMOptions(BaseModel):
    """Options of the `tlm` scorer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    quality_preset: Literal["base", "low", "medium", "high", "best"] = "medium"
    options: dict[str, Any] = Field(default_factory=dict, description="TLMOptions, passed through")
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0, description="seconds per item, passed to TLM")
    batch_size: int = Field(default=100, ge=1, le=10_000)
    api_key_env: str | None = Field(default=None, description="variable holding the key; default "
                                                              "CLEANLAB_API_KEY, then CLEANLAB_TLM_API_KEY")


def endpoint(env: str | None) -> Endpoint:
    """Cleanlab's API: its key from `env`, else `CLEANLAB_API_KEY`, then `CLEANLAB_TLM_API_KEY`."""
    names = (env,) if env else API_KEY_ENVS
    return Endpoint(key_envs=names, key_needed=True, error=ScorerError,
                    missing=f"tlm scorer: set {' or '.join(names)} to your Cleanlab API key")


def _tlm_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The TLM options, with the explanation asked for so it can be kept."""
    log = list(options.get("log") or [])
    return {**options, "log": log if "explanation" in log else [*log, "explanation"]}


def _build_client(opts: TLMOptions) -> TLMClient:
    try:
        from cleanlab_tlm import TLM  # noqa: PLC0415  (an optional extra, imported only when asked for)
    except ImportError:
        raise ScorerError(f"tlm scorer needs the cleanlab-tlm package: {_INSTALL}") from None
    key = endpoint(opts.api_key_env).key()
    attempts = [_tlm_options(opts.options), dict(opts.options)]
    for n, options in enumerate(attempts):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                client: TLMClient = TLM(opts.quality_preset, api_key=key,
                                        options=cast("Any", options or None), timeout=opts.timeout, verbose=False)
        except Exception as exc:  # noqa: BLE001  (any set-up failure of the package is a setup error)
            if n == 0 and "explanation" in str(exc) and options != attempts[1]:
                continue  # this configuration cannot log explanations: score without them
            raise ScorerError(f"tlm scorer could not be set up: {type(exc).__name__}: {exc}") from None
        return client
    raise ScorerError("tlm scorer could not be set up")  # pragma: no cover  (the loop returns or raises)


def _score(result: Any) -> Score:
    """One TLM result (a `TLMScore` dict) as a `Score`."""
    if not isinstance(result, Mapping):
        return Score.failed(f"TLM returned {type(result).__name__}, not a score")
    raw_log = result.get("log")
    log: Mapping[str, Any] = raw_log if isinstance(raw_log, Mapping) else {}
    value = result.get("trustworthiness_score")
    if not isinstance(value, (int, float)) or math.isnan(value):
        raw_error = log.get("error")
        error: Mapping[str, Any] = raw_error if isinstance(raw_error, Mapping) else {}
        return Score.failed(str(error.get("message") or "TLM returned no score"),
                            {"retryable": error.get("retryable")} if error else {})
    explanation = str(log.get("explanation") or "TLM trustworthiness score (no explanation logged)")
    details = {k: v for k, v in log.items() if k != "explanation" and _json_able(v)}
    return Score(min(max(float(value), 0.0), 1.0), explanation, details)


def _json_able(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool, list, dict)) or value is None


class TLMScorer:
    """Scores with Cleanlab TLM. `client` replaces the real `TLM` (tests pass a fake)."""

    name = "tlm"

    def __init__(self, options: TLMOptions | None = None, *, client: TLMClient | None = None) -> None:
        self.options = options or TLMOptions()
        self._client = client if client is not None else _build_client(self.options)
        self.breaker = Breaker(noun="TLM calls")

    async def score_many(self, inputs: Sequence[ScoringInput]) -> list[Score]:
        """One score per input, `batch_size` inputs per TLM call, batches one after another."""
        scores: list[Score] = []
        size = self.options.batch_size
        for start in range(0, len(inputs), size):
            scores += await self._batch(inputs[start:start + size])
        return scores

    async def _batch(self, batch: Sequence[ScoringInput]) -> list[Score]:
        if self.breaker.opened is not None:  # the API is given up: no more calls
            return [Score.failed(f"TLM not asked: {self.breaker.opened}") for _ in batch]
        prompts = [item.prompt for item in batch]
        responses = [item.response for item in batch]
        try:
            results = await self._call(prompts, responses)
        except Exception as exc:  # noqa: BLE001  (a failed call fails its batch's rows, not the run)
            problem = f"{type(exc).__name__}: {exc}"
            self.breaker.failed(problem)
            return [Score.failed(f"TLM call failed: {problem}") for _ in batch]
        self.breaker.succeeded()
        if isinstance(results, Mapping):
            results = [results]
        if not isinstance(results, Sequence) or len(results) != len(batch):
            return [Score.failed("TLM returned a different number of results than inputs") for _ in batch]
        return [_score(r) for r in results]

    async def _call(self, prompts: list[str], responses: list[str]) -> Any:
        method = getattr(self._client, "get_trustworthiness_score_async", None)
        if method is not None:
            return await method(prompts, responses)
        return await asyncio.to_thread(self._client.get_trustworthiness_score, prompts, responses)


def _endpoint(options: Mapping[str, Any]) -> str:
    return os.environ.get("CLEANLAB_API_BASE_URL") or API_URL


SPEC = ScorerSpec("tlm", endpoint=_endpoint)
"""What a run asks of TLM: that Cleanlab's API answers before the first batch."""


def create(options: Mapping[str, Any]) -> TLMScorer:
    """The registry's factory: a `TLMScorer` from option keywords."""
    return TLMScorer(parse_options(TLMOptions, options, "tlm"))
