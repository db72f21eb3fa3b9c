"""Planning: the pages a whole batch needs, collected once before any IO.

A page cited by 500 transcripts is fetched once: cited URLs are grouped by `url_key` (canonical
form without tracking parameters). A `Plan` keeps, for each key, the spellings the records cite
it by, in first-seen order; the first is the one asked for. Pages come back keyed by their key
alone, and every stage after the plan (the page source, rendering, the row's counts) looks a
URL's page up by that key. The same URL lists always give the same plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tlmscore._urls import url_key

__all__ = ["Plan"]


@dataclass(frozen=True)
class Plan:
    """The distinct pages of a batch: `url_key` -> the spellings it is cited by, and when it was read.

    `as_of` maps a key to the Unix time of the earliest answer citing it (see `PageSource`).
    Blank URLs are not planned: nothing can be fetched for them.
    """

    spellings: Mapping[str, tuple[str, ...]]
    as_of: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, url_lists: Iterable[Iterable[str]], as_of: Mapping[str, float] | None = None) -> Plan:
        """The plan of `url_lists`, keys and spellings in first-seen order, blanks skipped."""
        spellings: dict[str, dict[str, None]] = {}
        for urls in url_lists:
            for url in urls:
                if url and url.strip():
                    spellings.setdefault(url_key(url), {})[url] = None
        return cls({key: tuple(found) for key, found in spellings.items()}, dict(as_of or {}))

    @property
    def urls(self) -> list[str]:
        """One URL per page, the spelling cited first, in plan order: what a page source is asked for."""
        return [found[0] for found in self.spellings.values()]

    def __len__(self) -> int:
        return len(self.spellings)
