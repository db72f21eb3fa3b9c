"""URL normalisation shared by planning, caching and rendering.

Two forms: `canonical_url` is what is fetched and shown (scheme and host lower-cased, default port
and fragment dropped); `url_key` additionally drops tracking parameters, so the same page cited
with and without `utm_source=openai` is fetched and cached once.
"""

from __future__ import annotations

import functools
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

TRACKING_PARAMS = frozenset({"gclid", "fbclid", "msclkid", "mc_cid", "mc_eid", "yclid", "_hsenc", "_hsmi"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Both functions are pure and called for the same URL at every stage (convert, plan, cache,
# render); a bounded memo keeps that from costing more than parsing each URL once.
_MEMO = 65_536


@functools.lru_cache(maxsize=_MEMO)
def canonical_url(url: str) -> str:
    """Return `url` with scheme and host lower-cased, the default port and the fragment removed.

    A string that is not an absolute URL comes back stripped but otherwise unchanged; the
    fetcher reports it as an error rather than guessing what was meant.
    """
    text = url.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return text
    scheme = parts.scheme.lower()
    if not scheme or not parts.hostname:
        return text
    host = parts.hostname.lower().rstrip(".")
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None or _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    if parts.username is not None:
        auth = parts.username + (f":{parts.password}" if parts.password is not None else "")
        netloc = f"{auth}@{netloc}"
    path = parts.path or "/"
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def _is_tracking(name: str) -> bool:
    lowered = name.lower()
    return lowered.startswith("utm_") or lowered in TRACKING_PARAMS


@functools.lru_cache(maxsize=_MEMO)
def url_key(url: str) -> str:
    """Return the identity of the page behind `url`: canonical form without tracking parameters."""
    canonical = canonical_url(url)
    parts = urlsplit(canonical)
    if not parts.query:
        return canonical
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _is_tracking(k)]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(kept), ""))


def host_of(url: str) -> str:
    """Return the host of `url` for limits and messages ("" when it has none)."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""
