"""Planning: the URLs a whole batch needs, collected before any IO.

A URL cited by 500 transcripts is fetched once: URLs are deduplicated by `url_key` (canonical
form without tracking parameters), keeping the first spelling seen, in first-seen order, so the
same batch always plans the same list.
"""

from __future__ import annotations

from collections.abc import Iterable

from tlmscore._urls import url_key


def plan_urls(url_lists: Iterable[Iterable[str]]) -> list[str]:
    """Return the unique URLs of `url_lists` by `url_key`, in first-seen order, blanks skipped."""
    seen: set[str] = set()
    planned: list[str] = []
    for urls in url_lists:
        for url in urls:
            if not url or not url.strip():
                continue
            key = url_key(url)
            if key not in seen:
                seen.add(key)
                planned.append(url)
    return planned
