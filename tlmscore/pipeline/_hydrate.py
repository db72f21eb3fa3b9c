"""`--hydrate`: records that hold only a response id, filled in from the stored responses before conversion.

A span export (the Agents SDK's, one whose output was cut) may keep only the `response_id` of a
call. With `Settings.hydrate`, each such record of a chunk is pulled through `AsyncOpenAI` (key
from `OPENAI_API_KEY`, API root from `OPENAI_BASE_URL`) by `tlmscore.stores.openai`, at most
`Settings.concurrency` at once, and read again in its place; one that cannot be pulled (expired,
never stored) becomes an error row that says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tlmscore.ingest import normalize_record
from tlmscore.model import Transcript
from tlmscore.stores.openai import fillable_id, hydrate, stored_responses

if TYPE_CHECKING:
    from openai import AsyncOpenAI


def open_client() -> AsyncOpenAI:
    """The client `--hydrate` pulls with (the SDK's timeout and retries); `ConfigError` when no key is set."""
    return stored_responses(None, "--hydrate").client(timeout=600.0, retries=2)


async def hydrated(chunk: Sequence[Transcript], client: AsyncOpenAI, concurrency: int) -> list[Transcript]:
    """`chunk` with each record holding only a response id, or a span's `hydrate_id`, read from its stored response."""
    gate = asyncio.Semaphore(concurrency)

    async def filled(t: Transcript) -> Transcript:
        if fillable_id(t.raw) is None:
            return t
        async with gate:
            record = await hydrate(client, t.raw)
        return normalize_record(record, source=t.source, line=t.line)

    return list(await asyncio.gather(*(filled(t) for t in chunk)))
