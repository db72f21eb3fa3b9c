"""`Endpoint`: one model server a run calls, configured one way whoever calls it.

The judge, the page model, Cleanlab's TLM and the stored-response pulls (`--hydrate`, `tlmscore
pull`) each name an API root, a model, the environment variables their key may be in and how many
requests may be in flight. A key is looked up here only, in the first of its variables that is set;
an endpoint that needs one and finds none is one line (`missing`), before any request. A key goes
only to its own endpoint's server: the client is built for that API root alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tlmscore.errors import ConfigError, TlmscoreError

if TYPE_CHECKING:
    import openai


@dataclass(frozen=True)
class Endpoint:
    """A model server: API root (None: the SDK's, `OPENAI_BASE_URL` or OpenAI's), model, key variables, concurrency.

    `key_envs` are tried in order; with `key_needed`, none being set is `missing` (raised as `error`);
    otherwise requests go without a key (a local server needs none).
    """

    base_url: str | None = None
    model: str = ""
    key_envs: tuple[str, ...] = ()
    key_needed: bool = False
    missing: str = "no API key is set"
    error: type[TlmscoreError] = ConfigError
    concurrency: int = 8

    def key(self, env: Mapping[str, str] | None = None) -> str | None:
        """The key, from the first of `key_envs` that is set; None when there is none and none is needed."""
        env = os.environ if env is None else env
        found = next((env[name] for name in self.key_envs if env.get(name)), None)
        if found is None and self.key_needed:
            raise self.error(self.missing)
        return found

    def client(self, *, timeout: float, retries: int, env: Mapping[str, str] | None = None) -> openai.AsyncOpenAI:
        """An SDK client for this endpoint alone, with its key (the caller closes it)."""
        from tlmscore._chat import open_client  # noqa: PLC0415  (openai only for an endpoint that is called)

        return open_client(self.base_url, self.key(env), timeout=timeout, retries=retries)
