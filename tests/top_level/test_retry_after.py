"""`Retry-After` as the fetcher and the judge's chat client both read it."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest

from tlmscore._retry_after import retry_after_seconds


@pytest.mark.parametrize(("value", "seconds"), [
    ("120", 120.0), (" 0 ", 0.0), ("0.25", 0.25),
    (None, None), ("", None), ("-1", None), ("inf", None), ("nan", None), ("soon", None),
])
def test_delta_seconds(value: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(value) == seconds


def test_an_http_date_counts_from_now_and_never_back() -> None:
    ahead = retry_after_seconds(formatdate(time.time() + 30, usegmt=True))
    assert ahead is not None and 25 < ahead <= 30
    assert retry_after_seconds(formatdate(time.time() - 30, usegmt=True)) == 0.0
