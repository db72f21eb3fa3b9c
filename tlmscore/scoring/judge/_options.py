"""The judge's options and the values its parts share: `JudgeOptions`, `JudgePlan`, `Judged`."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tlmscore._cost import dollars
from tlmscore.scoring.judge._prompts import REFLECTION_PROMPTS

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_RETIRED_OPTIONS = ("backoff", "max_backoff")


class JudgeOptions(BaseModel):
    """Options of the `judge` scorer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1, description="the judge model's name at the endpoint")
    base_url: str = Field(default=DEFAULT_BASE_URL, description="the OpenAI-compatible API root, e.g. "
                                                                 "http://127.0.0.1:8000/v1")
    api_key_env: str | None = Field(default=None, description="environment variable holding the API key; "
                                                              "default OPENAI_API_KEY, optional for local servers")
    mode: Literal["answer", "claims"] = Field(
        default="answer", description="answer: rate the whole answer against the whole prompt (self-reflection, "
                                      "and consistency with samples); claims: ask about each claim with the "
                                      "evidence it needs, P(yes) from one token")
    passage_chars: int = Field(default=2000, ge=200, description="claims mode: most characters of evidence sent "
                                                                 "with a claim")
    reflections: int = Field(default=2, ge=2, le=len(REFLECTION_PROMPTS))
    samples: int = Field(default=0, ge=0, le=20, description="alternative answers for observed consistency")
    beta: float = Field(default=0.7, ge=0.0, le=1.0, description="weight of observed consistency")
    logprobs: bool = True
    top_logprobs: int = Field(default=5, ge=1, le=20)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="for ratings")
    sample_temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=8, ge=1, description="tokens of a rating")
    sample_max_tokens: int = Field(default=512, ge=1)
    concurrency: int = Field(default=8, ge=1, le=1024, description="requests in flight")
    timeout: float = Field(default=60.0, gt=0)
    retries: int = Field(default=3, ge=0, le=10, description="the SDK's max_retries")
    max_prompt_chars: int | None = Field(default=None, ge=200, description="clip longer prompts in the middle")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="more request fields, sent as is")
    batch: bool = Field(default=False, description="send requests through the Batch API")
    batch_dir: str | None = Field(default=None, description="batch mode: folder of the state, inputs and results")
    poll_interval: float = Field(default=10.0, gt=0, description="batch mode: first wait between polls")
    max_poll_interval: float = Field(default=300.0, gt=0, description="batch mode: longest wait between polls")
    batch_wait: float = Field(default=26 * 3600.0, gt=0, description="batch mode: seconds to wait for results")
    batch_max_requests: int = Field(default=50_000, ge=1, le=50_000, description="batch mode: requests per batch")
    batch_submit_only: bool = Field(default=False, description="batch mode: submit the first round and return "
                                                               "unscored rows; a later run collects")
    cache: bool = Field(default=True, description="keep verdicts in cache_dir and send no request twice")
    cache_dir: str | None = Field(default=None, description="folder of the verdict cache (a run puts it in "
                                                            "Settings.cache_dir/judge); None: no cache")
    price_in: float | None = Field(default=None, ge=0, description="dollars per million input tokens "
                                                                   "(default: the price table's, for known models)")
    price_out: float | None = Field(default=None, ge=0, description="dollars per million output tokens")
    max_cost: float | None = Field(default=None, ge=0, description="refuse to send requests estimated to cost "
                                                                   "more dollars than this")

    @model_validator(mode="before")
    @classmethod
    def _retired(cls, data: Any) -> Any:
        """`backoff` and `max_backoff` are the SDK's now: accepted with a warning, not used."""
        if isinstance(data, dict) and any(key in data for key in _RETIRED_OPTIONS):
            warnings.warn("tlmscore: judge options backoff and max_backoff are ignored: the openai SDK's "
                          "backoff (exponential, with jitter, honouring Retry-After) is used",
                          UserWarning, stacklevel=2)
            data = {k: v for k, v in data.items() if k not in _RETIRED_OPTIONS}
        return data

    @model_validator(mode="after")
    def _batch_needs_a_folder(self) -> JudgeOptions:
        if self.batch and not self.batch_dir:
            raise ValueError("batch mode needs batch_dir, the folder that keeps its state for resuming")
        if self.mode == "claims" and (self.batch or self.samples):
            raise ValueError("mode claims sends live requests without samples: it takes neither batch nor samples")
        return self

    @property
    def rating_tokens(self) -> int:
        """`max_tokens` of a rating: the option when given, else 8 (answer mode) or 1 (claims mode: Yes or No)."""
        return self.max_tokens if "max_tokens" in self.model_fields_set or self.mode == "answer" else 1

    @property
    def alternatives(self) -> int:
        """`top_logprobs` asked for: the option when given, else 5 (answer mode) or 20 (claims mode)."""
        return self.top_logprobs if "top_logprobs" in self.model_fields_set or self.mode == "answer" else 20


@dataclass(frozen=True)
class JudgePlan:
    """What scoring some rows will ask of the endpoint: requests and an estimate of their tokens.

    Input tokens are estimated from the UTF-8 size of the messages (about 4 bytes a token for
    English; a CJK character counts as 3/4 of a token); output tokens are the `max_tokens` caps.
    """

    rows: int
    requests: int
    input_tokens: int
    max_output_tokens: int
    batch: bool = False
    cost: float | None = None
    """Estimated dollars (output tokens at their caps; Batch API at half price); None: no price known."""

    def describe(self) -> str:
        """One line for a person about to spend them."""
        how = " through the Batch API" if self.batch else ""
        money = (f", at most about {dollars(self.cost)}" if self.cost is not None
                 else " (no price known for this model: give price_in/price_out for a cost estimate)")
        return (f"judge: {self.requests:,} requests{how} for {self.rows:,} rows, about {self.input_tokens:,} "
                f"input tokens and at most {self.max_output_tokens:,} output tokens{money}")


@dataclass(frozen=True)
class Judged:
    """One input as the judge sees it: the template fields, characters clipped, the response status."""

    fields: Mapping[str, str]
    clipped: int
    status: str
