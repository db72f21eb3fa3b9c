"""A small client for OpenAI-compatible chat completion endpoints (OpenAI, vLLM, Ollama, llama.cpp).

One request at a time per call, with a shared concurrency gate, timeouts, and retries with
exponential backoff and jitter on timeouts, connection errors, 408/409/425/429 and 5xx (honouring
`Retry-After`). Token log-probabilities are asked for when wanted; an endpoint that rejects the
request because of them is asked again without, and not asked for them again. Any other failure
is a `ScorerError` naming the status and the start of the body, for the caller's row.
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass
from typing import Any

import httpx

from tlmscore.errors import ScorerError
from tlmscore.retry_after import retry_after_seconds

__all__ = ["RETRY_STATUSES", "ChatClient", "Completion", "TokenLogprob"]

RETRY_STATUSES = frozenset({408, 409, 425, 429})
_BODY_CHARS = 300
_SERVER_ERROR = 500


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


def _tokens(choice: dict[str, Any]) -> tuple[TokenLogprob, ...]:
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list):
        return ()
    found = []
    for entry in content:
        if not isinstance(entry, dict) or not isinstance(entry.get("logprob"), (int, float)):
            continue
        top = tuple((str(t.get("token", "")), float(t["logprob"])) for t in entry.get("top_logprobs") or []
                    if isinstance(t, dict) and isinstance(t.get("logprob"), (int, float)))
        found.append(TokenLogprob(str(entry.get("token", "")), float(entry["logprob"]), top))
    return tuple(found)


def _completion(response: httpx.Response) -> Completion:
    try:
        body = response.json()
        choice = body["choices"][0]
        text = choice.get("message", {}).get("content") or ""
    except (json.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ScorerError(f"judge endpoint returned an unexpected body ({type(exc).__name__}): "
                          f"{response.text[:_BODY_CHARS]!r}") from None
    return Completion(str(text), _tokens(choice))


def _without_logprobs(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in ("logprobs", "top_logprobs")}


class ChatClient:
    """Chat completions against one endpoint and model, over a caller-owned `httpx.AsyncClient`."""

    def __init__(self, http: httpx.AsyncClient, model: str, *, gate: asyncio.Semaphore, retries: int = 3,
                 backoff: float = 0.5, max_backoff: float = 30.0, top_logprobs: int = 5,
                 extra_body: dict[str, Any] | None = None) -> None:
        self._http = http
        self._model = model
        self._gate = gate
        self._retries = retries
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._top_logprobs = top_logprobs
        self._extra = dict(extra_body or {})
        self._jitter = random.Random()  # noqa: S311  (jitter spreads retries; it is not security)
        self.logprobs_supported = True
        self.attempts = 0

    async def complete(self, messages: list[dict[str, str]], *, temperature: float, max_tokens: int,
                       logprobs: bool = False) -> Completion:
        """One completion; raises `ScorerError` when the endpoint fails for good."""
        payload: dict[str, Any] = {"model": self._model, "messages": messages, "temperature": temperature,
                                   "max_tokens": max_tokens, **self._extra}
        if logprobs and self.logprobs_supported:
            payload |= {"logprobs": True, "top_logprobs": self._top_logprobs}
        return await self._post(payload)

    async def _post(self, payload: dict[str, Any]) -> Completion:
        problem = "no attempt made"
        for attempt in range(self._retries + 1):
            wait = self._delay(attempt)
            try:
                async with self._gate:
                    if not self.logprobs_supported:
                        payload = _without_logprobs(payload)
                    self.attempts += 1
                    response = await self._http.post("chat/completions", json=payload)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                problem = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            else:
                if response.status_code == httpx.codes.OK:
                    return _completion(response)
                if self._logprobs_rejected(response, payload):
                    return await self._post(_without_logprobs(payload))
                if response.status_code not in RETRY_STATUSES and response.status_code < _SERVER_ERROR:
                    raise ScorerError(f"judge endpoint returned HTTP {response.status_code}: "
                                      f"{response.text[:_BODY_CHARS]!r}")
                problem = f"HTTP {response.status_code}"
                wait = min(self._max_backoff, retry_after_seconds(response.headers.get("retry-after")) or wait)
            if attempt < self._retries:
                await asyncio.sleep(wait)
        raise ScorerError(f"judge endpoint failed after {self._retries + 1} attempts: {problem}")

    def _delay(self, attempt: int) -> float:
        """Exponential backoff with jitter: half to all of `backoff * 2^attempt`, capped."""
        base: float = min(self._max_backoff, self._backoff * 2.0 ** attempt)
        return base * (0.5 + self._jitter.random() / 2)

    def _logprobs_rejected(self, response: httpx.Response, payload: dict[str, Any]) -> bool:
        if response.status_code not in (httpx.codes.BAD_REQUEST, httpx.codes.UNPROCESSABLE_ENTITY):
            return False
        if "logprobs" not in payload or "logprob" not in response.text.lower():
            return False
        self.logprobs_supported = False
        return True
