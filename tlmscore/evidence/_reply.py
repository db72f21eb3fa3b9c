"""What one URL's exchange becomes: a `Reply` read under the size cap, or a page status and a sentence.

The batch side (`fetch.Fetcher`) and the request loop (`_download.Downloader`) both build on these.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import cast

import httpx

from tlmscore._retry_after import retry_after_seconds
from tlmscore.errors import FetchError
from tlmscore.evidence._body import read_body
from tlmscore.evidence.extract import media_type, supported_type
from tlmscore.evidence.page import PAGE_STATUSES, PageStatus
from tlmscore.settings import Settings

REDIRECTS = frozenset({301, 302, 303, 307, 308})
BAD_URL = (httpx.InvalidURL, httpx.UnsupportedProtocol, ValueError, UnicodeError)
FAILURES = (FetchError, httpx.HTTPError, OSError, asyncio.TimeoutError, *BAD_URL)


@dataclass(frozen=True)
class Reply:
    """What one request brought back: a redirect, an error status, a refusal or a body."""

    url: str
    http_status: int
    reason: str
    content_type: str | None
    location: str | None = None
    body: bytes | None = None
    retry_after: float | None = None
    failure: tuple[PageStatus, str] | None = None


def seconds(value: float) -> str:
    """A duration as messages give it ("10 s")."""
    return f"{value:g} s"


def describe(exc: Exception, settings: Settings, host: str) -> tuple[PageStatus, str]:
    """Map an exception raised while fetching to a page status and a short sentence."""
    if isinstance(exc, FetchError):
        status = exc.status if exc.status in PAGE_STATUSES else "connect_error"
        return cast(PageStatus, status), str(exc)
    detail = str(exc) or type(exc).__name__
    timeout, connect = seconds(settings.timeout), seconds(settings.connect_timeout)
    rules: tuple[tuple[type[Exception] | tuple[type[Exception], ...], PageStatus, str], ...] = (
        (httpx.ConnectTimeout, "timeout", f"timed out after {connect} connecting to {host}"),
        (httpx.TimeoutException, "timeout", f"timed out after {timeout} waiting for {host} to answer"),
        (asyncio.TimeoutError, "timeout", f"timed out after {timeout} fetching the page from {host}"),
        (httpx.ConnectError, "connect_error", f"could not connect to {host} ({detail})"),
        (httpx.DecodingError, "http_error", f"the response from {host} could not be decoded ({detail})"),
        (BAD_URL, "blocked", f"not a valid URL ({detail})"),
    )
    for types, status, message in rules:
        if isinstance(exc, types):
            return status, message
    return "connect_error", f"the connection to {host} failed ({detail})"


async def read_reply(url: str, response: httpx.Response, settings: Settings) -> Reply:
    """Turn a response whose body is not read yet into a `Reply`."""
    headers = response.headers
    reply = Reply(url, response.status_code, response.reason_phrase, headers.get("content-type"))
    if response.status_code in REDIRECTS and headers.get("location"):
        return replace(reply, location=headers["location"])
    if not 200 <= response.status_code < 300:  # noqa: PLR2004 -- the success range
        return replace(reply, retry_after=retry_after_seconds(headers.get("retry-after")))
    if not supported_type(reply.content_type):
        unsupported = f"unsupported content type {media_type(reply.content_type)}"
        return replace(reply, failure=("unsupported_type", unsupported))
    cap = settings.max_bytes
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        too_large = f"the page is {int(declared):,} bytes, over the limit of {cap:,}"
        return replace(reply, failure=("too_large", too_large))
    try:
        body = await read_body(response, cap)  # None as soon as it grows past `cap` bytes
    except httpx.ReadTimeout:
        raise FetchError("timeout", f"timed out after {seconds(settings.timeout)} reading the body") from None
    if body is None:
        return replace(reply, failure=("too_large", f"the page is over the limit of {cap:,} bytes"))
    return replace(reply, body=body)
