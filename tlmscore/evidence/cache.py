"""The page cache: fetched pages kept on disk, so a URL is fetched once across runs and processes.

Storage is a `diskcache.Cache` (SQLite plus files) at `Settings.cache_dir`, which is safe to share
between processes running at once. The key format is a contract, so other tools can read it:

- `"v1:" + sha256(url_key(url)).hexdigest()` holds the page record: a dict with `page` (the page
  record of DESIGN §3.3), `extractor` (the `EXTRACTOR_VERSION` that made its text, or None) and
  `has_body`.
- `"v1-body:" + <same hex>` holds the raw response body, compressed, with its content type: a dict
  with `body`, `content_type` and `codec` (`"zstd"`; a record without `codec` is zlib, as older
  versions wrote).

The page record's dict also holds `allowed_hops`: the hosts of the page's hops (`url` and
`final_url`) that were reached only because `Settings.allow_hosts` named them when it was fetched.

Cached pages pass the address guard as a fetch would: a hop whose host is not allowed now is
checked again (`guard.check_url`, with the run's resolver) when it was reached through an
allowance, is an IP literal, or the record predates `allowed_hops` (such a record that passes
gets the note, so it is checked once); a hop that passed the guard unaided when fetched is not
resolved again. An offline run cannot resolve, so there such a hop
is refused unless it is an IP literal. A refused page is served as `blocked`, saying why.

Keeping the body means a new extractor version re-extracts cached pages without fetching them
again. Pages with content (`ok`, `empty`, `unsupported_type`) stay fresh for `cache_max_age`;
failures (`http_error`, `timeout`, ...) are remembered for `failure_ttl` only, then expire. Guard
decisions (`blocked`) and `offline_miss` are never stored: they depend on the settings of the run.
An offline run serves whatever the cache holds, however old, which keeps offline runs repeatable,
and writes nothing: no page, no note, and no cache folder where there was none.

Disk access runs on one worker thread, so the event loop never waits on SQLite or compression,
and a page is passed on as soon as it is fetched: its write is queued, and closing the cache
waits for every queued write. Pages queued while that thread is busy are written together in one
transaction, and values stay inside SQLite rather than in a file each (diskcache's default for
values over 32 KB), so a cold batch pays little per page for its cache. A write that fails (a
full disk) costs only the caching: the run goes on, and closing the cache warns how many pages
were not saved.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import diskcache
import zstandard

from tlmscore._urls import host_of, url_key
from tlmscore.errors import FetchError
from tlmscore.evidence._guard import Resolver, check_url, parse_ip_literal, system_resolver
from tlmscore.evidence.page import Page
from tlmscore.settings import Settings

__all__ = [
    "CONTENT_STATUSES",
    "KEY_PREFIX",
    "CacheStats",
    "CachedPage",
    "PageCache",
    "body_key",
    "cache_key",
    "cache_stats",
    "clear_cache",
]

_T = TypeVar("_T")
KEY_PREFIX = "v1:"
_BODY_PREFIX = "v1-body:"
CONTENT_STATUSES = frozenset({"ok", "empty", "unsupported_type"})
"""Statuses that describe the page itself; any other stored status is a failure of the fetch."""
_NEVER_STORED = frozenset({"blocked", "offline_miss"})
_IN_DATABASE_BELOW = 2**20
"""Values smaller than this (compressed bodies, page records) are kept in SQLite, not as files."""
_ZSTD_LEVEL = 1


def _digest(url: str) -> str:
    return hashlib.sha256(url_key(url).encode("utf-8")).hexdigest()


def cache_key(url: str) -> str:
    """Return the key of the page record for `url`: `"v1:" + sha256(url_key(url))` in hex."""
    return KEY_PREFIX + _digest(url)


def body_key(url: str) -> str:
    """Return the key of the compressed body of `url`: `"v1-body:" + sha256(url_key(url))` in hex."""
    return _BODY_PREFIX + _digest(url)


@dataclass(frozen=True)
class CachedPage:
    """A page found in the cache.

    `body` and `content_type` are set only when the page's text came from an older extractor and
    the stored body can be extracted again.
    """

    page: Page
    body: bytes | None = None
    content_type: str | None = None
    allowed_hops: frozenset[str] | None = None
    """Hosts reached only through `allow_hosts` when fetched (None: not recorded, an older record)."""


@dataclass(frozen=True)
class CacheStats:
    """What `tlmscore cache stats` shows."""

    directory: Path
    entries: int
    ok: int
    failed: int
    size_bytes: int


def _fresh(record: dict[str, Any], settings: Settings, now: float) -> bool:
    """Whether a stored record may be served instead of fetching again."""
    if settings.offline:
        return True
    page = record["page"]
    max_age = settings.cache_max_age if page["status"] in CONTENT_STATUSES else settings.failure_ttl
    return now - float(page.get("fetched_at") or 0.0) < max_age


class PageCache:
    """Reads and writes page records for one run; open it with `async with`."""

    def __init__(self, settings: Settings, *, extractor_version: str, resolver: Resolver | None = None) -> None:
        self._settings = settings
        self._resolver: Resolver = resolver or system_resolver
        self._extractor = extractor_version
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tlmscore-cache")
        self._cache: diskcache.Cache | None = None
        self._pending: list[tuple[Page, bytes | None, str | None]] = []
        self._pending_lock = threading.Lock()
        self._writes: set[asyncio.Future[None]] = set()
        self._unsaved: list[str] = []  # how each failed write failed, one entry per page
        self._opening: asyncio.Future[diskcache.Cache | None] | None = None

    async def __aenter__(self) -> PageCache:
        """Start opening the cache files on the IO thread, and return at once.

        Creating or opening the SQLite files waits on the disk (30-100 ms here); the run reads and
        plans its first records meanwhile. Every disk operation runs on the same thread after the
        opening, and the first lookup raises whatever the opening raised (an unusable folder).
        """
        self._opening = asyncio.get_running_loop().run_in_executor(self._io, self._open)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Wait for the queued writes, then close the cache files and the IO thread."""
        opening, self._opening = self._opening, None
        if opening is not None:  # a cache never looked up: its opening's failure is of no use now
            await asyncio.gather(opening, return_exceptions=True)
        await self.flush()
        if self._cache is not None:
            await self._run(self._cache.close)
            self._cache = None
        self._io.shutdown(wait=True)

    async def flush(self) -> None:
        """Wait until every page queued by `store` is written; warn once about any that failed."""
        while self._writes:
            await asyncio.gather(*self._writes)
        if self._unsaved:
            unsaved, self._unsaved = self._unsaved, []
            pages = f"{len(unsaved)} fetched page" + ("s" if len(unsaved) > 1 else "")
            warnings.warn(f"tlmscore: {pages} could not be saved in the cache at "
                          f"{self._settings.cache_dir} ({unsaved[0]}); a later run fetches them again",
                          RuntimeWarning, stacklevel=2)

    def _open(self) -> diskcache.Cache | None:
        """The cache files, opened once; None offline when there is no cache (an offline run creates none)."""
        if self._cache is None:
            if self._settings.offline and not self._settings.cache_dir.is_dir():
                return None
            self._settings.cache_dir.mkdir(parents=True, exist_ok=True)
            self._cache = diskcache.Cache(str(self._settings.cache_dir), disk_min_file_size=_IN_DATABASE_BELOW)
        return self._cache

    async def _run(self, func: Callable[..., _T], *args: Any) -> _T:
        """Run a disk operation on the cache's IO thread."""
        return await asyncio.get_running_loop().run_in_executor(self._io, func, *args)

    async def lookup(self, urls: Iterable[str]) -> dict[str, CachedPage]:
        """Return the fresh cached pages among `urls`, keyed by the URL as given.

        A page whose hops the address guard refuses now comes back as a `blocked` page.
        """
        opening, self._opening = self._opening, None
        if opening is not None:
            await opening  # raises what opening the files raised
        found = await self._run(self._lookup, list(urls))
        vetted = await asyncio.gather(*(self._vetted(hit) for hit in found.values()))
        return dict(zip(found, vetted, strict=True))

    async def _vetted(self, hit: CachedPage) -> CachedPage:
        """`hit`, or a `blocked` page when one of its hops would not be fetched under this run's policy."""
        for hop in dict.fromkeys(u for u in (hit.page.url, hit.page.final_url) if u):
            problem = await self._hop_problem(hop, hit.allowed_hops)
            if problem is not None:
                error = f"the cached page is not served: {problem}"
                return CachedPage(Page(url=hit.page.url, status="blocked", error=error))
        if hit.allowed_hops is None and hit.page.status in CONTENT_STATUSES and not self._settings.offline:
            self._queue(self._note_hops, hit.page)  # an older record: checked once, not every run
        return hit

    def _queue(self, write: Callable[..., None], *args: Any) -> None:
        """Run a write on the IO thread; `flush` waits for it."""
        done = asyncio.get_running_loop().run_in_executor(self._io, write, *args)
        self._writes.add(done)
        done.add_done_callback(self._writes.discard)

    def _note_hops(self, page: Page) -> None:
        """Add `allowed_hops` to an older record that has just passed the guard (a failure costs nothing)."""
        try:
            cache = self._open()
            if cache is None:
                return
            record = cache.get(cache_key(page.url))
            if isinstance(record, dict) and "allowed_hops" not in record:
                cache.set(cache_key(page.url), record | {"allowed_hops": self._allowed_hops(page)})
        except Exception:  # noqa: BLE001, S110  (the record is checked again next time instead)
            pass

    def _allowed_hops(self, page: Page) -> list[str]:
        """The hosts of `page`'s hops that `allow_hosts` names in this run."""
        hops = (_host(page.url), _host(page.final_url or ""))
        return sorted({host for host in hops if host and host in self._settings.allow_hosts})

    async def _hop_problem(self, url: str, allowed_hops: frozenset[str] | None) -> str | None:
        """Why the guard would refuse `url` now, or None."""
        host = _host(url)
        allow = self._settings.allow_hosts
        if host in allow:
            return None
        literal = parse_ip_literal(host) is not None
        if not literal and allowed_hops is not None and host not in allowed_hops:
            return None  # it passed the guard unaided when it was fetched
        if self._settings.offline and not literal:
            return f"{host} was reached only because it was allowed, and it is not allowed in this run"
        try:
            await check_url(url, allow_hosts=allow, resolver=self._resolver)
        except FetchError as exc:
            return str(exc)
        return None

    def _lookup(self, urls: list[str]) -> dict[str, CachedPage]:
        cache = self._open()
        now = time.time()
        found: dict[str, CachedPage] = {}
        if cache is None:
            return found
        for url in urls:
            record = cache.get(cache_key(url))
            if not isinstance(record, dict) or not _fresh(record, self._settings, now):
                continue
            hit = self._hit(cache, url, record)
            if hit is not None:
                found[url] = hit
        return found

    def _hit(self, cache: diskcache.Cache, url: str, record: dict[str, Any]) -> CachedPage | None:
        """Return the cached page, with its body when its text must be extracted again (None: unusable)."""
        page = replace(Page.from_record(record["page"]), url=url)
        hops = record.get("allowed_hops")
        allowed = frozenset(hops) if isinstance(hops, list) else None
        if record.get("extractor") in (None, self._extractor):
            return CachedPage(page, allowed_hops=allowed)
        stored = cache.get(body_key(url)) if record.get("has_body") else None
        if not isinstance(stored, dict):
            return CachedPage(page, allowed_hops=allowed) if self._settings.offline else None
        return CachedPage(page, _unpack(stored), stored.get("content_type"), allowed)

    async def store(self, page: Page, body: bytes | None = None, content_type: str | None = None) -> None:
        """Queue `page` (and the body its text was extracted from) to be kept under its URL's key.

        Returns at once; the write happens on the IO thread. Lookups through this cache see it,
        and `flush` or closing the cache waits for it.
        """
        if self._settings.offline or page.status in _NEVER_STORED or (
            page.status not in CONTENT_STATUSES and self._settings.failure_ttl <= 0
        ):
            return
        with self._pending_lock:
            self._pending.append((page, body, content_type))
        self._queue(self._write_pending)

    def _write_pending(self) -> None:
        """Write every page waiting to be stored, in one transaction.

        A call finds nothing to do when an earlier call, which has finished by then (there is one
        IO thread), took its page along. A failure is noted for `flush` to report, not raised.
        """
        with self._pending_lock:
            pending, self._pending = self._pending, []
        if not pending:
            return
        try:
            compressor = zstandard.ZstdCompressor(level=_ZSTD_LEVEL)
            packed = [(page, None if body is None else compressor.compress(body), content_type)
                      for page, body, content_type in pending]
            cache = self._open()
            if cache is None:
                return
            with cache.transact():
                for page, body, content_type in packed:
                    self._write(cache, page, body, content_type)
        except Exception as exc:  # noqa: BLE001  (a cache that cannot be written costs only the caching)
            self._unsaved.extend([f"{type(exc).__name__}: {exc}"] * len(pending))

    def _write(self, cache: diskcache.Cache, page: Page, body: bytes | None, content_type: str | None) -> None:
        content = page.status in CONTENT_STATUSES
        record = {
            "page": page.to_record(),
            "extractor": self._extractor if content and body is not None else None,
            "has_body": body is not None,
            "allowed_hops": self._allowed_hops(page),
        }
        expire = None if content else self._settings.failure_ttl
        cache.set(cache_key(page.url), record, expire=expire)
        if body is not None:
            cache.set(body_key(page.url), {"body": body, "content_type": content_type, "codec": "zstd"},
                      expire=expire)
        else:
            cache.delete(body_key(page.url))


def _host(url: str) -> str:
    """The host of `url` as `allow_hosts` spells hosts (lower case, no trailing dot); "" if none."""
    return host_of(url).rstrip(".")


def _unpack(stored: dict[str, Any]) -> bytes:
    """The body of a stored body record, in whichever codec wrote it."""
    if stored.get("codec") == "zstd":
        return bytes(zstandard.ZstdDecompressor().decompress(stored["body"]))
    return zlib.decompress(stored["body"])


def cache_stats(directory: Path) -> CacheStats:
    """Count the page records in the cache at `directory` and measure its size on disk."""
    if not directory.exists():
        return CacheStats(directory, 0, 0, 0, 0)
    with diskcache.Cache(str(directory)) as cache:
        entries = ok = 0
        for key in cache.iterkeys():
            if not (isinstance(key, str) and key.startswith(KEY_PREFIX)):
                continue
            record = cache.get(key)
            if isinstance(record, dict):
                entries += 1
                ok += record["page"]["status"] == "ok"
        return CacheStats(directory, entries, ok, entries - ok, int(cache.volume()))


def clear_cache(directory: Path) -> int:
    """Remove every page record and body from the cache at `directory`; return how many pages."""
    if not directory.exists():
        return 0
    with diskcache.Cache(str(directory)) as cache:
        pages = sum(1 for key in cache.iterkeys() if isinstance(key, str) and key.startswith(KEY_PREFIX))
        cache.clear()
        return pages
