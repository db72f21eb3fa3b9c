"""Pages on Ray Data: each cited page fetched once across the cluster, under a cluster-wide per-host limit.

The URLs every record plans are grouped by host: a host's URLs form one group, handled by one
call of one fetch actor, so `per_host` requests at most are in flight to a host anywhere in the
cluster. Within the group they are deduplicated by `url_key` (the first spelling in input order
is fetched, as a `Plan` does on one machine), so each page is fetched once in the cluster.
Each actor keeps one `Fetcher` open (the same guard, disk cache, limits and extraction as on one
machine) on its own event loop.

Pages are kept in a page store, a Parquet dataset of page records (plus `key`): a later run reads
it before the network, as the disk cache does on one machine, so a rerun or a resumed run fetches
only what the store lacks or holds too old.
"""

from __future__ import annotations

import asyncio
import dataclasses
import pickle
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tlmscore._urls import host_of, url_key
from tlmscore.evidence.cache import CONTENT_STATUSES
from tlmscore.evidence.layers import open_page_source
from tlmscore.evidence.page import Page, PageSource
from tlmscore.evidence.plan import Plan
from tlmscore.ray._tables import flat_rows, schema
from tlmscore.settings import Settings

if TYPE_CHECKING:
    import pyarrow as pa
    from ray.data import Dataset


T = TypeVar("T")
_INTEGER = (int, "int", "int | None")
_FLOAT = (float, "float", "float | None")


def page_schema() -> pa.Schema:
    """The page store's columns: `key`, `stored_at` (seconds since the epoch), then the page record's fields."""
    import pyarrow as pa  # noqa: PLC0415

    columns = [("key", pa.string()), ("stored_at", pa.float64())]
    for f in dataclasses.fields(Page):
        kind = pa.int64() if f.type in _INTEGER else pa.float64() if f.type in _FLOAT else pa.string()
        columns.append((f.name, kind))
    return pa.schema(columns)


def _urls_of(row: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """One row per URL a record plans, ordered by record and place within it."""
    for index, url in enumerate(pickle.loads(row["urls"]) if row["urls"] else []):  # noqa: S301
        if url and url.strip():
            yield {"key": url_key(url), "url": url, "order": row["position"] * 4096 + min(index, 4095),
                   "host": host_of(url)}


def planned_urls(converted: Dataset) -> Dataset:
    """One row per URL cited (`key`, the `url` as cited, its `order` in the input, its `host`)."""
    return flat_rows(converted, _urls_of, schema(key="string", url="string", order="int64", host="string"))


def _fresh(table: pa.Table, settings: Settings, now: float) -> pa.Table:
    """Stored pages still fresh: content for `cache_max_age`, failures for `failure_ttl`, as in the disk cache."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    if settings.offline:  # offline, whatever is stored is served (as from the disk cache)
        return table
    age = pc.subtract(now, pc.fill_null(table["stored_at"], 0.0))
    ok = pc.is_in(table["status"], pa.array(sorted(CONTENT_STATUSES)))
    keep = pc.or_(pc.and_(ok, pc.less(age, settings.cache_max_age)),
                  pc.and_(pc.invert(ok), pc.less(age, settings.failure_ttl)))
    return table.filter(pc.fill_null(keep, False))


def stored_pages(store: str | None, settings: Settings) -> Dataset | None:
    """The fresh pages of the page store, or None when there is none yet."""
    import ray.data  # noqa: PLC0415

    if not store or ("://" not in store and not any(Path(store).rglob("*.parquet"))):
        return None
    now = time.time()
    pages = ray.data.read_parquet(store, schema=page_schema())
    return pages.map_batches(lambda t: _fresh(t, settings, now), batch_format="pyarrow")


def read_back(store: str, settings: Settings, *, tries: int = 3) -> Dataset | None:
    """The page store's fresh pages, read now; a read that met a node's death is made again.

    Ray Data lists a Parquet dataset's files with actors it spreads over the nodes and does not
    restart: one placed on a node that died before the cluster noticed fails the whole read. The
    store's files are written by then, so reading them again, on the nodes still alive, is safe.
    """
    import ray.exceptions  # noqa: PLC0415

    for attempt in range(1, tries + 1):
        try:
            pages = stored_pages(store, settings)
            return None if pages is None else pages.materialize()
        except ray.exceptions.RayError:
            if attempt == tries:
                raise
    return None


class FetchPages:
    """An actor that fetches the pages of one host per call, with one page source kept open.

    The source is the single-machine one (`open_page_source`: saved page records, then the
    disk cache and the network through a `Fetcher`), open for the actor's life.
    """

    def __init__(self, settings: Settings) -> None:
        if settings.extract_workers is None:  # one extraction process per actor, not one per core
            settings = settings.model_copy(update={"extract_workers": 1})
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, name="tlmscore-fetch", daemon=True).start()
        self._opened = AsyncExitStack()
        self._source: PageSource = self._run(self._opened.enter_async_context(open_page_source(settings)))

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def __call__(self, group: pa.Table) -> pa.Table:
        """The pages of one host's URLs (one group), each distinct page once, with their keys."""
        import pyarrow as pa  # noqa: PLC0415

        plan = Plan.of([group.sort_by("order")["url"].to_pylist()])  # each page by the spelling cited first
        pages = self._run(self._source.pages(plan.urls))
        now = time.time()
        rows = [{"key": key, "stored_at": now, **pages[spellings[0]].to_record()}
                for key, spellings in plan.spellings.items()]
        return pa.Table.from_pylist(rows, schema=page_schema())


def store_pages(pages: Dataset, store: str | None) -> None:
    """Add newly fetched pages to the page store, as one more part of its Parquet dataset.

    A page missed offline is not kept: it says nothing about the page, only about that run.
    """
    from ray.data.expressions import col  # noqa: PLC0415

    kept = pages.filter(expr=col("status") != "offline_miss")
    if store and kept.count():
        kept.write_parquet(f"{store.rstrip('/')}/run-{uuid.uuid4().hex[:12]}")
