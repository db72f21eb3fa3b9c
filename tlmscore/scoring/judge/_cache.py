"""The judge's verdict cache: each completion kept on disk by a hash of what decides it.

The key is a SHA-256 of the canonical JSON of the request as the judge means it: the endpoint's
base URL, the model, the messages, the temperature, the token cap, whether log-probabilities were
asked for (and how many alternatives), the extra body fields and, for the `k` sampled answers of a
row, the sample's number. The API key is no part of it. A rerun, a resumed run or another row
with the same prompt and answer finds the completion there and sends nothing. Storage is a
`diskcache.Cache` in a `judge/` folder beside the page cache (`Settings.cache_dir`), safe to share
between processes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import diskcache
import orjson

from tlmscore._chat import ChatClient, Completion, TokenLogprob
from tlmscore.scoring.judge._options import JudgeOptions

_VERSION = 1


def verdict_key(request: Mapping[str, Any]) -> str:
    """The cache key of a request (a mapping of JSON values): a hash of its canonical JSON."""
    return hashlib.sha256(orjson.dumps({"v": _VERSION, **request}, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _encode(completion: Completion) -> bytes:
    tokens = [[t.token, t.logprob, [list(pair) for pair in t.top]] for t in completion.tokens]
    return orjson.dumps({"text": completion.text, "tokens": tokens})


def _decode(raw: bytes) -> Completion:
    value = orjson.loads(raw)
    tokens = tuple(TokenLogprob(str(token), float(logprob), tuple((str(t), float(lp)) for t, lp in top))
                   for token, logprob, top in value["tokens"])
    return Completion(str(value["text"]), tokens)


class CachedChat:
    """`ChatClient.complete` through the verdict cache in `options.cache_dir` (no cache: every request sent)."""

    def __init__(self, chat: ChatClient, options: JudgeOptions) -> None:
        self.chat = chat
        self._fixed = {"base_url": options.base_url.rstrip("/"), "model": options.model,
                       "extra_body": dict(options.extra_body)}
        self._top_logprobs = options.alternatives
        self._cache: diskcache.Cache | None = None
        if options.cache and options.cache_dir is not None:
            Path(options.cache_dir).mkdir(parents=True, exist_ok=True)
            self._cache = diskcache.Cache(options.cache_dir)
        self.hits = 0
        self.sent = 0

    @property
    def logprobs_supported(self) -> bool:
        """What the endpoint taught the client (True while nothing was sent)."""
        return self.chat.logprobs_supported

    def close(self) -> None:
        """Close the cache's database."""
        if self._cache is not None:
            self._cache.close()

    async def complete(self, messages: Sequence[Mapping[str, str]], *, temperature: float, max_tokens: int,
                       logprobs: bool = False, number: int = 0) -> Completion:
        """A completion from the cache, else from the endpoint (then kept); `number` tells equal samples apart."""
        key = verdict_key({**self._fixed, "messages": [dict(m) for m in messages], "temperature": temperature,
                           "max_tokens": max_tokens,
                           "logprobs": self._top_logprobs if logprobs else None, "number": number})
        if self._cache is not None and isinstance(raw := self._cache.get(key), bytes):
            self.hits += 1
            return _decode(raw)
        self.sent += 1
        completion = await self.chat.complete(messages, temperature=temperature, max_tokens=max_tokens,
                                              logprobs=logprobs)
        if self._cache is not None:
            self._cache.set(key, _encode(completion))
        return completion
