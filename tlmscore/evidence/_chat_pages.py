"""Pages read by a model: a search-augmented model at an OpenAI-compatible chat endpoint, asked page by page.

A page that refuses fetchers (a bot wall's 403, a paywall, a page empty without JavaScript, a site
that times out) can often still be read by a search-augmented model (Perplexity Sonar, a browsing
model, a self-hosted one). `ChatPages` asks such a model for each page in a request of its own
(`read_messages`: the URL, and the form of the answer) and makes its answer the page's text
(`answer_page`), with `source="model"`, the model's name in `model` and the time of reading in
`fetched_at`. Rendering marks such a page as "summarised by MODEL on DATE, not the page itself".

Modes (`Settings.page_source`): `chat` asks only for the pages the source below it (the cache,
the web and the archive) could not give, any failure but `blocked`; `chat:always` asks for every
page, and the web is never fetched (for sites the fetcher must not touch).

- **The address guard first.** A URL the guard refuses (`guard.check_url`: loopback, private,
  link-local such as `169.254.169.254`, ...) is never sent to the model: a model asked to read an
  internal address is a way in too. A name that does not resolve here is sent only when it does
  not name a private host as written (single-label names, `.local`, `.internal`, ...).
- **The answer is untrusted text.** It is kept as text, cut to `_MAX_CHARS` characters (and the
  title to one line of `_MAX_TITLE`); nothing in it is followed, fetched or parsed as a link. An
  answer that says the page could not be read, or holds no text, is the page's failure
  (`model_failed`, or in `chat` mode the failure below with the model's reason added).
- **Cached on disk** by URL, in a folder of its own per endpoint, model and prompt version
  (`Settings.cache_dir / model-pages / ...`, through `cache.PageCache`: the same freshness rules
  and the same guard on cached pages), so a rerun sends no request. Offline, only the cache is read.
- **Cost**: before a set of requests is sent, their number and an estimate of their tokens and
  dollars are logged (logger `tlmscore.evidence._chat_pages`, INFO), and `page_max_cost` is held
  over the whole run as the judge's `max_cost` is (`ConfigError`, nothing of that set sent).
- One request per URL, at most `page_concurrency` at once; the openai SDK retries timeouts,
  connection errors, 429 and 5xx, honouring `Retry-After`. A failure is that page's alone.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import AsyncExitStack, aclosing, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from tlmscore._chat import ChatClient, open_client
from tlmscore._cost import Budget, dollars, estimate_tokens, price_of, token_cost
from tlmscore._endpoint import Endpoint
from tlmscore._urls import url_key
from tlmscore.convert import split_think
from tlmscore.errors import FetchError
from tlmscore.evidence._archive import names_private_host
from tlmscore.evidence._download import as_done
from tlmscore.evidence._guard import Resolver, check_url, system_resolver
from tlmscore.evidence.cache import PageCache
from tlmscore.evidence.page import AsOf, Fallback, Page, PageSource
from tlmscore.evidence.plan import Plan
from tlmscore.settings import Settings

if TYPE_CHECKING:
    import openai

PROMPT_VERSION = 1
"""Changes when the request changes: a cached answer to another request is not this one's."""
READ_PROMPT = """\
You read one web page for a fact-checking tool. The user message is the page's URL.
Open that exact page and report what it says.

Reply in this form:
Title: <the page's title>

<the page's main content: its facts, figures, names and dates, in the page's own words where \
you can and in its language; no navigation, advertisements or links>

If you cannot open that exact page, reply with one line: UNAVAILABLE: <why>
Never answer from memory or from other pages."""
_ENDPOINT = "page model endpoint"
_MAX_CHARS = 20_000
_MAX_TITLE = 300
_MAX_REASON = 300
_UNAVAILABLE = re.compile(r"^[\W_]*unavailable\b[\W_]*(.*)", re.IGNORECASE | re.DOTALL)
_TITLE = re.compile(r"^[\W_]*title[\W_]*:\s*(.*)$", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_MESSAGE_TOKENS = 4  # a chat message's own tokens (role, separators), beside its content
_LOG = logging.getLogger(__name__)


def read_messages(url: str) -> list[dict[str, str]]:
    """The request for one page: what to do, then the URL alone."""
    return [{"role": "system", "content": READ_PROMPT}, {"role": "user", "content": url}]


def _failed(url: str, model: str, reason: str, when: float) -> Page:
    return Page(url=url, status="model_failed", error=f"the page model {model} could not read it: {reason}",
                fetched_at=when, source="model", model=model)


def answer_page(url: str, answer: str, model: str, when: float) -> Page:
    """The page a model's answer makes: its text, cut to size, or `model_failed` saying why there is none.

    The answer is untrusted: control characters are dropped, the title is one line, the text is
    cut to `_MAX_CHARS` characters, and nothing in it is followed.
    """
    text = _CONTROL.sub("", split_think(answer).text).strip()
    refused = _UNAVAILABLE.match(text)
    if refused is not None:
        reason = " ".join(refused.group(1).split())[:_MAX_REASON] or "it gave no reason"
        return _failed(url, model, f"it answered that it could not ({reason})", when)
    first, _, rest = text.partition("\n")
    named = _TITLE.match(first)
    title = None
    if named is not None:
        title = " ".join(named.group(1).strip("*_ ").split())[:_MAX_TITLE] or None
    content = (rest if named else text).strip()
    if not content:
        return _failed(url, model, "its answer held no text", when)
    return Page(url=url, status="ok", title=title, text=content[:_MAX_CHARS], bytes=len(answer.encode("utf-8")),
                fetched_at=when, source="model", model=model)


def read_cost(urls: Sequence[str], settings: Settings) -> tuple[float | None, str]:
    """What asking the page model for `urls` would cost (nothing is sent), and one line for a person about to spend it.

    The cost is in estimated dollars, output tokens at their cap; None: no price known for the model.
    """
    tokens = sum(estimate_tokens(m["content"]) + _MESSAGE_TOKENS for url in urls for m in read_messages(url))
    output = len(urls) * settings.page_max_tokens
    price = price_of(settings.page_model or "", settings.page_price_in, settings.page_price_out)
    cost = None if price is None else token_cost(tokens, output, price) + len(urls) * (settings.page_price_request
                                                                                        or 0.0)
    money = (f", at most about {dollars(cost)}" if cost is not None
             else " (no price known for this model: give --page-price-in and --page-price-out)")
    return cost, (f"page model {settings.page_model or ''}: {len(urls):,} requests, one per page, about {tokens:,} "
                  f"input tokens and at most {output:,} output tokens{money}")


def model_folder(settings: Settings) -> Path:
    """Where the pages one endpoint and model read are kept: a folder per endpoint, model and prompt."""
    model = settings.page_model or ""
    named = f"{(settings.page_base_url or '').rstrip('/')}\n{model}\n{PROMPT_VERSION}\n{settings.page_max_tokens}"
    digest = hashlib.sha256(named.encode("utf-8")).hexdigest()[:16]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-.")[:40] or "model"
    return settings.cache_dir / "model-pages" / f"{slug}-{digest}"


def page_endpoint(settings: Settings) -> Endpoint:
    """The page model: its API root, model and requests in flight; its key from `page_api_key_env` (or none)."""
    name = settings.page_api_key_env
    return Endpoint(settings.page_base_url or "", settings.page_model or "", key_envs=(name,) if name else (),
                    key_needed=name is not None, concurrency=settings.page_concurrency,
                    missing=f"page_api_key_env (--page-api-key-env): the environment variable {name} is not set")


def _model_may_help(url: str, page: Page) -> bool:
    """Whether the page model is asked for a page below failed: not one the guard refused, nor a blank URL."""
    return not (page.ok or page.status == "blocked" or not url or not url.strip())


class _Alone(PageSource):
    """The page model alone, on an open `ChatPages`: what it makes up for below it."""

    def __init__(self, chat: ChatPages) -> None:
        self._chat = chat

    def pages_as_done(self, urls: Sequence[str],
                      as_of: AsOf | None = None) -> AsyncGenerator[tuple[str, Page], None]:
        return self._chat.read(urls)


class ChatPages(PageSource):
    """Pages read by the page model: those `below` could not give, or every page when `below` is None.

    Use it as an async context manager (it opens the client and the cache); `client` (a
    caller-owned `openai.AsyncOpenAI`, left open) and `resolver` are seams for tests.
    """

    def __init__(self, below: PageSource | None, settings: Settings, *, client: openai.AsyncOpenAI | None = None,
                 resolver: Resolver | None = None) -> None:
        self._below = below
        self._settings = settings
        self._model = settings.page_model or ""
        self._endpoint = page_endpoint(settings)
        self._key = None if client is not None else self._endpoint.key()
        self._given = client
        self._resolver: Resolver = resolver or system_resolver
        self._budget = Budget(settings.page_max_cost, what="page model", model=self._model,
                              prices="--page-price-in and --page-price-out (dollars per million tokens)")
        self._opened: AsyncExitStack | None = None
        self._chat: ChatClient | None = None
        self._cache: PageCache | None = None
        self.sent = 0

    async def __aenter__(self) -> ChatPages:
        stack = AsyncExitStack()
        settings = self._settings
        self._cache = await stack.enter_async_context(PageCache(
            settings.model_copy(update={"cache_dir": model_folder(settings)}), extractor_version="model",
            resolver=self._resolver))
        client = self._given
        if client is None and not settings.offline:
            client = await stack.enter_async_context(open_client(
                self._endpoint.base_url, self._key, timeout=settings.page_timeout, retries=settings.retries))
        if client is not None:
            self._chat = ChatClient(client, self._model, gate=asyncio.Semaphore(settings.page_concurrency),
                                    endpoint=_ENDPOINT, failure=lambda message: FetchError("model_failed", message))
        self._opened = stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        opened, self._opened = self._opened, None
        self._chat = self._cache = None
        if opened is not None:
            await opened.aclose()

    async def pages_as_done(self, urls: Sequence[str],
                            as_of: AsOf | None = None) -> AsyncGenerator[tuple[str, Page], None]:
        """`(url, page)` per URL: pages below as they come, pages the model read as it answers."""
        alone = _Alone(self)
        source = alone if self._below is None else Fallback(self._below, alone, retry=_model_may_help)
        opened = self if self._opened is None else nullcontext(self)  # opened around this call alone
        async with opened, aclosing(source.pages_as_done(urls, as_of)) as found:
            async for item in found:
                yield item

    async def read(self, urls: Sequence[str]) -> AsyncGenerator[tuple[str, Page], None]:
        """The model's page of each URL (each distinct page asked once), or why there is none, as each is done."""
        for url in dict.fromkeys(urls):
            if not url or not url.strip():
                yield url, Page(url=url, status="blocked", error="not a valid URL (it is blank)")
        plan = Plan.of([urls])
        firsts = plan.urls
        problems = await asyncio.gather(*(self._refused(url) for url in firsts))
        found: dict[str, Page] = {url: Page(url=url, status="blocked", error=problem)
                                  for url, problem in zip(firsts, problems, strict=True) if problem is not None}
        allowed = [url for url in firsts if url not in found]
        hits = await self._opened_cache().lookup(allowed)
        found |= {url: hit.page for url, hit in hits.items()}
        ask = [url for url in allowed if url not in hits]
        if self._settings.offline or self._chat is None:
            found |= {url: Page(url=url, status="offline_miss", error="not among the pages the page model read "
                                                                      "before, and offline mode never asks it")
                      for url in ask}
            ask = []
        elif ask:
            cost, line = read_cost(ask, self._settings)
            _LOG.info("%s", line)
            self._budget.check(cost, f"{len(ask):,} pages")
        async with aclosing(self._asked(found, ask)) as pages:
            async for url, page in pages:
                for given in plan.spellings[url_key(url)]:
                    yield given, replace(page, url=given)

    async def _asked(self, found: dict[str, Page], urls: Sequence[str]) -> AsyncGenerator[tuple[str, Page], None]:
        """The pages `found` already, then each URL's page from the model as each answer comes (stored in the cache)."""
        for item in found.items():
            yield item
        async with aclosing(as_done(self._ask(url) for url in urls)) as answers:
            async for url, page in answers:
                await self._opened_cache().store(page)
                yield url, page

    async def _ask(self, url: str) -> tuple[str, Page]:
        """One request: the model's page of `url`, or `model_failed` with the endpoint's failure."""
        chat = self._chat
        if chat is None:
            raise RuntimeError("the page model's client is closed")
        self.sent += 1
        try:
            completion = await chat.complete(read_messages(url), temperature=0.0,
                                             max_tokens=self._settings.page_max_tokens)
        except FetchError as exc:
            return url, _failed(url, self._model, str(exc), time.time())
        except Exception as exc:  # noqa: BLE001  (one page's failure must not stop the others)
            return url, _failed(url, self._model, f"{type(exc).__name__}: {exc}", time.time())
        return url, answer_page(url, completion.text, self._model, time.time())

    async def _refused(self, url: str) -> str | None:
        """Why `url` must not be sent to the page model (the address guard), or None."""
        allow = self._settings.allow_hosts
        try:
            target = await check_url(url, allow_hosts=allow, resolver=self._resolver, unresolved_ok=True)
        except FetchError as exc:
            return f"not sent to the page model: {exc}"
        if not target.addresses and target.host not in allow and names_private_host(url):
            return f"not sent to the page model: {target.host} does not resolve here and names a private host"
        return None

    def _opened_cache(self) -> PageCache:
        if self._cache is None:
            raise RuntimeError("the page model's source is closed")
        return self._cache
