"""The `Retry-After` header, read the same way by the page fetcher and the judge's chat client."""

from __future__ import annotations

import email.utils
import math
import time


def retry_after_seconds(value: str | None) -> float | None:
    """Seconds a server asks to wait, from a `Retry-After` value; None when it says nothing usable.

    The value is delta-seconds (a fractional count is accepted too, as some gateways send one)
    or an HTTP date, which counts from now and is never negative. Negative, infinite or
    unparseable values are ignored.
    """
    text = (value or "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
