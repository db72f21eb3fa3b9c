"""Evidence as of the answer: pages from a Wayback-compatible web archive.

A page that fails live (an HTTP error such as a bot wall's 403 or 429, a timeout, a name that no
longer resolves, a page with no readable text left) or that has changed since the answer is not
the page the model read. `ArchivePages` asks the archive for the closest snapshot at or before
the time the answer was given (`as_of`):

1. the availability API, `{archive_url}/wayback/available?url=URL&timestamp=YYYYMMDDhhmmss`,
   names the closest snapshot; one taken after the answer is not used;
2. the raw snapshot, `{archive_url}/web/{timestamp}id_/URL` (`id_`: the page as archived,
   without the archive's banner and rewritten links), is fetched.

Both requests go through the fetcher, so through the same address guard, limits and cache as
any page (an archive on a private or loopback address must be allowed with `--allow-host`).
Modes (`Settings.archive`): `fallback` tries the live page first and the archive when it fails;
`prefer` tries the archive first and the live page when there is no snapshot; `off` (the
default) never asks: asking sends every cited URL to a third party, which a user must choose.

The page keeps the URL it was asked for; `final_url` is the snapshot's address, `source` is
`archive` and `archived_at` the snapshot's time.
"""

from __future__ import annotations

import calendar
import json
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlencode, urlsplit

from tlmscore._urls import url_key
from tlmscore.evidence._guard import address_problem, parse_ip_literal
from tlmscore.evidence.page import AsOf, Fallback, Page, PageSource
from tlmscore.settings import Settings

FALLBACK_STATUSES = frozenset({"http_error", "timeout", "connect_error", "dns_error", "redirect_loop", "empty"})
"""Live failures the archive may make up for. A `blocked` URL is never sent to the archive (it
names a private address), and a page too large, of an unsupported type or one whose extraction
failed would be the same page in the archive."""
_STAMP = "%Y%m%d%H%M%S"
_STAMP_DIGITS = 14
_LOOK_BACK_ROUNDS = 5
_PRIVATE_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa")


@dataclass(frozen=True)
class Snapshot:
    """An archived copy: its 14-digit Wayback timestamp, and that time in Unix seconds."""

    timestamp: str
    at: float


class _After(Snapshot):
    """The closest snapshot, taken after the answer: not to be used as it is."""


def wayback_time(when: float) -> str:
    """The 14-digit UTC Wayback timestamp of Unix time `when`."""
    return time.strftime(_STAMP, time.gmtime(when))


def _unix(stamp: str) -> float | None:
    """Unix seconds of a 14-digit Wayback timestamp, or None for anything else."""
    if len(stamp) != _STAMP_DIGITS or not stamp.isdigit():
        return None
    try:
        return float(calendar.timegm(time.strptime(stamp, _STAMP)))
    except ValueError:
        return None


def availability_url(base: str, url: str, when: float | None) -> str:
    """The availability API's address for `url` as of `when` (None: the latest snapshot)."""
    query = {"url": url} | ({"timestamp": wayback_time(when)} if when is not None else {})
    return f"{base.rstrip('/')}/wayback/available?{urlencode(query)}"


def snapshot_url(base: str, snapshot: Snapshot, url: str) -> str:
    """The raw snapshot's address: the page as archived, without the archive's additions."""
    return f"{base.rstrip('/')}/web/{snapshot.timestamp}id_/{url}"


def closest_snapshot(answer: Page, when: float | None) -> Snapshot | str:
    """The snapshot the availability API's answer names, or why there is none to use."""
    if not answer.ok:
        return f"the archive could not be asked ({answer.status}: {answer.error or answer.status})"
    try:
        closest = json.loads(answer.text or "")["archived_snapshots"]["closest"]
        stamp = str(closest["timestamp"])
        available = closest.get("available", True) is not False
    except (ValueError, TypeError, KeyError):
        return "the archive has no snapshot of it"
    at = _unix(stamp)
    if not available or at is None:
        return "the archive has no snapshot of it"
    if when is not None and at > when:
        return _After(stamp, at)
    return Snapshot(stamp, at)


class ArchivePages(Fallback):
    """Pages from `live` (the fetcher), with a web archive before or after it as `settings.archive` says.

    Live pages come as they are ready, archived ones once the archive answers.
    """

    def __init__(self, live: PageSource, settings: Settings) -> None:
        base = settings.archive_url
        # An archive on a private host (a mirror of one's own) may be asked about private hosts too.
        keep_back = (lambda _url: False) if names_private_host(base) else names_private_host
        archive = Snapshots(live, base, keep_back)
        if settings.archive == "prefer":  # the archive first; the live page where it has no snapshot
            super().__init__(archive, live, retry=lambda _url, page: not page.ok, keep_first=False)
        else:  # the live page first; the archive for a failure it may make up for
            super().__init__(live, archive,
                             retry=lambda url, page: page.status in FALLBACK_STATUSES and not keep_back(url))


class Snapshots(PageSource):
    """The archive alone: each URL's snapshot at or before the time it is wanted as of, fetched by `live`.

    A URL with none (or one `keep_back` keeps from the archive) is a failed page saying why.
    """

    def __init__(self, live: PageSource, base: str, keep_back: Callable[[str], bool]) -> None:
        self._live = live
        self._base = base
        self._keep_back = keep_back

    async def pages_as_done(self, urls: Sequence[str],
                            as_of: AsOf | None = None) -> AsyncGenerator[tuple[str, Page], None]:
        """`(url, page)` per URL once the archive has answered for all."""
        when = {url: (as_of or {}).get(url_key(url)) for url in urls}
        archived: dict[str, Page | str] = {url: "a private host" for url in urls if self._keep_back(url)}
        archived |= await self._archived([u for u in dict.fromkeys(urls) if u not in archived], when)
        for url in urls:
            found = archived[url]
            yield url, found if isinstance(found, Page) else Page(url=url, status="http_error", error=found)

    async def _closest(self, urls: list[str], when: dict[str, float | None]) -> dict[str, Snapshot | str]:
        """The snapshot of each URL at or before its time, or why there is none.

        The availability API names the closest snapshot on either side. When that one is after
        the answer (by `gap`), it is asked again as of `gap`, 4 `gap`, 16 `gap`... before the
        answer, a few times at most: once the time asked is nearer an earlier snapshot than the
        later one, the earlier one is named.
        """
        found = await self._ask({url: when[url] for url in urls}, when)
        later = {url: (at, answer.at - at) for url, answer in found.items()
                 if isinstance(answer, _After) and (at := when[url]) is not None}
        for step in range(_LOOK_BACK_ROUNDS):
            again: dict[str, float | None] = {url: max(0.0, at - gap * 4**step) for url, (at, gap) in later.items()
                                              if isinstance(found[url], _After)}
            if not again:
                break
            found |= await self._ask(again, when)
        return {url: "the archive has no snapshot from before the answer" if isinstance(v, _After) else v
                for url, v in found.items()}

    async def _ask(self, asked: dict[str, float | None], when: dict[str, float | None],
                   ) -> dict[str, Snapshot | str]:
        """One availability request per URL, as of the time in `asked`; judged against `when`."""
        ask = {url: availability_url(self._base, url, at) for url, at in asked.items()}
        answers = await self._live.pages(list(ask.values()))
        return {url: closest_snapshot(answers[address], when[url]) for url, address in ask.items()}

    async def _archived(self, urls: list[str], when: dict[str, float | None]) -> dict[str, Page | str]:
        """The archived page of each URL, or why there is none."""
        found: dict[str, Page | str] = {}
        snapshots: dict[str, tuple[str, Snapshot]] = {}
        for url, snapshot in (await self._closest(urls, when)).items():
            if isinstance(snapshot, str):
                found[url] = snapshot
            else:
                snapshots[url] = (snapshot_url(self._base, snapshot, url), snapshot)
        copies = await self._live.pages([address for address, _ in snapshots.values()])
        for url, (address, snapshot) in snapshots.items():
            copy = copies[address]
            if copy.status != "ok":
                found[url] = f"its archived copy could not be retrieved ({copy.status}: {copy.error or copy.status})"
            else:
                found[url] = replace(copy, url=url, final_url=copy.final_url or address, source="archive",
                                     archived_at=snapshot.at)
        return found


def names_private_host(url: str) -> bool:
    """Whether `url` names a host no public archive can have seen, as written (no lookup).

    Such URLs are never sent to a public archive: IP literals the guard refuses, single-label
    names and the special-use `.localhost`, `.local`, `.internal` and `.home.arpa` names.
    (`prefer` asks the archive before the live fetch and its guard; an intranet name that fails
    to resolve outside its network would otherwise reach the archive in `fallback`.)
    """
    try:
        host = (urlsplit(url).hostname or "").rstrip(".").lower()
    except ValueError:
        return True
    literal = parse_ip_literal(host)
    if literal is not None:
        return address_problem(literal) is not None
    return "." not in host or host.endswith(_PRIVATE_SUFFIXES)
