"""Chat completions against any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp) via the openai SDK.

`open_client` builds an `openai.AsyncOpenAI` for one endpoint: its base URL, key, timeout and
`max_retries` (the SDK retries timeouts, connection errors, 408, 409, 429 and 5xx with exponential
backoff and jitter, and honours `Retry-After`).
`ChatClient` asks it for completions, one request per call under a shared concurrency gate. Token
log-probabilities are asked for when wanted; an endpoint that rejects a parameter the caller can do
without (log-probabilities, a temperature other than the model's default) or wants renamed
(`max_completion_tokens` for `max_tokens`, as OpenAI's reasoning models do) is asked again so, and
every later request is sent so. Any other failure is an error naming the status and the start of
the body, for the caller's row or page: a `ScorerError` by default (the judge), or what the
caller's `failure` makes of the message (the page source that asks a model to read pages).
An endpoint that fails for good three requests in a row (no connection, no answer in time, a status
the SDK retries) is given up (`tlmscore._breaker`): every later request fails at once, saying why,
instead of costing its own four tries.

`openai` is imported here only, and this module only by the judge and by that page source, so a
run that uses neither never pays for importing it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import openai

from tlmscore._breaker import Breaker
from tlmscore.errors import ScorerError

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletion


_BODY_CHARS = 300
_REJECTIONS = frozenset({400, 422})
_ADAPTATIONS = 3  # logprobs, max_tokens, temperature: each learnt once
_NO_KEY = "tlmscore-no-key"
_RETRIED = frozenset({408, 409, 429})
_SERVER_ERROR = 500
_LEFT_OUT = {"logprobs": ("logprobs", "top_logprobs"), "temperature": ("temperature",)}  # once rejected
# The fields of a body the SDK takes as arguments; any other (a caller's `extra_body`) is sent as given.
_NAMED = frozenset({"model", "messages", "temperature", "max_tokens", "max_completion_tokens", "logprobs",
                    "top_logprobs"})


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token, its log-probability, and the most likely alternatives at its position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Completion:
    """The generated text and, when the endpoint returned them, its tokens' log-probabilities."""

    text: str
    tokens: tuple[TokenLogprob, ...] = ()


def open_client(base_url: str | None, api_key: str | None, *, timeout: float, retries: int) -> openai.AsyncOpenAI:
    """An SDK client for one endpoint; the caller closes it (`async with` or `await client.close()`).

    With `api_key=None` requests go without an `Authorization` header (local servers need none):
    the SDK insists on a key when it is built, so it gets a placeholder that `request_headers`
    then omits from every request, as the SDK documents.
    """
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key or _NO_KEY, max_retries=retries,
                              timeout=openai.Timeout(timeout, connect=min(timeout, 10.0)))


def request_headers(client: openai.AsyncOpenAI) -> dict[str, Any]:
    """Per-request headers: the `Authorization` header omitted when the client has no real key."""
    return {"Authorization": openai.omit} if client.api_key == _NO_KEY else {}


def _tokens(completion: ChatCompletion) -> tuple[TokenLogprob, ...]:
    logprobs = completion.choices[0].logprobs
    content = logprobs.content if logprobs is not None else None
    if not content:
        return ()
    found = []
    for entry in content:
        if not isinstance(entry.logprob, (int, float)):
            continue
        top = tuple((str(t.token), float(t.logprob)) for t in entry.top_logprobs or []
                    if isinstance(t.logprob, (int, float)))
        found.append(TokenLogprob(str(entry.token), float(entry.logprob), top))
    return tuple(found)


def _completion(completion: ChatCompletion, endpoint: str = "judge endpoint",
                failure: Callable[[str], Exception] = ScorerError) -> Completion:
    """A `Completion` from the SDK's parsed value; raises `failure(...)` when it has no choice."""
    if not isinstance(completion.choices, list) or not completion.choices:
        raise failure(f"{endpoint} returned a completion without choices")
    choice = completion.choices[0]
    message = choice.message
    text = message.content if message is not None else None
    return Completion(str(text or ""), _tokens(completion))


def completion_from_body(body: Any) -> Completion:
    """A `Completion` from a chat.completion JSON body (a Batch API output line's `response.body`)."""
    from openai.types.chat import ChatCompletion  # noqa: PLC0415  (types only where bodies are read)

    if not isinstance(body, dict):
        raise ScorerError(f"judge endpoint returned an unexpected body: {str(body)[:_BODY_CHARS]!r}")
    try:
        # validated first (fast: pydantic-core), else built leniently as the SDK builds live replies, so a
        # field a server left out is not a failure (model_construct costs ten times more per body)
        try:
            parsed = ChatCompletion.model_validate(body)
        except ValueError:
            parsed = ChatCompletion.model_construct(**body)
        return _completion(parsed)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ScorerError(f"judge endpoint returned an unexpected body ({type(exc).__name__}): "
                          f"{str(body)[:_BODY_CHARS]!r}") from None


def rejected_parameter(status: int, text: str, body: Mapping[str, Any]) -> str | None:
    """The parameter of `body` an error reply rejects, when the judge can do without it or rename it.

    `logprobs` (models without token probabilities), `max_tokens` (reasoning models want
    `max_completion_tokens`) or `temperature` (models that take only their default); None for any
    other error. Read from the error's text, as OpenAI and compatible servers word it.
    """
    if status not in _REJECTIONS:
        return None
    lowered = text.lower()
    if "logprobs" in body and "logprob" in lowered:
        return "logprobs"
    if "max_tokens" in body and "max_completion_tokens" in lowered:
        return "max_tokens"
    if "temperature" in body and "temperature" in lowered and "unsupported" in lowered:
        return "temperature"
    return None


class ChatClient:
    """Chat completions against one endpoint and model, over a caller-owned `openai.AsyncOpenAI`.

    What the endpoint rejected once (see `rejected_parameter`) is left out of, or renamed in, every
    later request: `rejected` says what was learnt.
    A request that fails for good raises `failure(message)`, the message starting with `endpoint`.
    """

    def __init__(self, client: openai.AsyncOpenAI, model: str, *, gate: asyncio.Semaphore, top_logprobs: int = 5,
                 extra_body: Mapping[str, Any] | None = None, endpoint: str = "judge endpoint",
                 failure: Callable[[str], Exception] = ScorerError) -> None:
        self._client = client
        self._endpoint = endpoint
        self._failed = failure
        self._model = model
        self._gate = gate
        self._top_logprobs = top_logprobs
        self._extra = dict(extra_body or {})
        self.rejected: set[str] = set()  # the parameters the endpoint rejected, as `rejected_parameter` names them
        self.breaker = Breaker(noun="requests")

    @property
    def logprobs_supported(self) -> bool:
        """Whether token log-probabilities are still asked for (the endpoint has not rejected them)."""
        return "logprobs" not in self.rejected

    def adjusted(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """`body` with what the endpoint rejected so far left out (`max_tokens`: renamed)."""
        left_out = {name for parameter in self.rejected for name in _LEFT_OUT.get(parameter, ())}
        out = {name: value for name, value in body.items() if name not in left_out}
        if "max_tokens" in self.rejected and "max_tokens" in out:
            out["max_completion_tokens"] = out.pop("max_tokens")
        return out

    def body(self, messages: Sequence[Mapping[str, str]], *, temperature: float, max_tokens: int,
             logprobs: bool = False) -> dict[str, Any]:
        """The request body of one completion (also what a Batch API input line carries)."""
        body: dict[str, Any] = {"model": self._model, "messages": [dict(m) for m in messages],
                                "temperature": temperature, "max_tokens": max_tokens}
        if logprobs:
            body |= {"logprobs": True, "top_logprobs": self._top_logprobs}
        return self.adjusted(body | self._extra)

    async def complete(self, messages: Sequence[Mapping[str, str]], *, temperature: float, max_tokens: int,
                       logprobs: bool = False) -> Completion:
        """One completion; raises `failure(...)` (a `ScorerError` by default) when the endpoint fails for good."""
        async with self._gate:
            if self.breaker.opened is not None:  # a dead endpoint: no more tries
                raise self._failed(f"{self._endpoint} not asked: {self.breaker.opened}")
            # built inside the gate: a request that waited sees what was learnt meanwhile
            body = self.body(messages, temperature=temperature, max_tokens=max_tokens, logprobs=logprobs)
            for attempt in range(_ADAPTATIONS + 1):
                try:
                    return await self._post(body)
                except openai.APIStatusError as exc:
                    parameter = rejected_parameter(exc.status_code, exc.response.text, body)
                    if parameter is None or attempt == _ADAPTATIONS:
                        raise self._failure(exc) from None
                    self.rejected.add(parameter)
                    body = self.adjusted(body)
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def _post(self, body: dict[str, Any]) -> Completion:
        named = {k: v for k, v in body.items() if k in _NAMED}
        extra = {k: v for k, v in body.items() if k not in _NAMED}
        try:
            raw = await self._client.chat.completions.with_raw_response.create(
                **named, extra_body=extra or None, extra_headers=request_headers(self._client))
        except openai.APIConnectionError as exc:
            problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self.breaker.failed(problem)
            raise self._failed(f"{self._endpoint} failed after {self._client.max_retries + 1} attempts: "
                               f"{problem}") from None
        self.breaker.succeeded()
        try:
            return _completion(raw.parse(), self._endpoint, self._failed)
        except (ValueError, TypeError, AttributeError, IndexError) as exc:
            raise self._failed(f"{self._endpoint} returned an unexpected body ({type(exc).__name__}): "
                               f"{raw.http_response.text[:_BODY_CHARS]!r}") from None

    def _failure(self, exc: openai.APIStatusError) -> Exception:
        status = exc.status_code
        text = exc.response.text[:_BODY_CHARS]
        retried = status in _RETRIED or status >= _SERVER_ERROR
        if retried:
            self.breaker.failed(f"HTTP {status}")
        if retried and self._client.max_retries:
            return self._failed(f"{self._endpoint} failed after {self._client.max_retries + 1} attempts: "
                                f"HTTP {status}: {text!r}")
        return self._failed(f"{self._endpoint} returned HTTP {status}: {text!r}")
