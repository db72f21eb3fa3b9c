"""`check_reachable`: one request to a model endpoint before a run sends it any work.

A scorer that asks a server (the judge's endpoint, Cleanlab's TLM API) is looked at once before the
first batch: any HTTP answer, whatever its status, says the server is there; no answer within
`PROBE_TIMEOUT` seconds (or the scorer's own shorter timeout), a refused connection or a name that does
not resolve is one `ConfigError` naming the address, so a run without network stops at once instead
of waiting on every row. The probe carries no key.
"""

from __future__ import annotations

import httpx

from tlmscore.errors import ConfigError

PROBE_TIMEOUT = 10.0
"""Seconds the probe waits for an answer (connecting included)."""


def check_reachable(url: str, what: str, *, timeout: float = PROBE_TIMEOUT) -> None:
    """Raise `ConfigError` when nothing answers an HTTP GET of `url` within `timeout` seconds."""
    try:
        with httpx.Client(timeout=timeout) as client:
            client.get(url)
    except httpx.TimeoutException:
        raise ConfigError(f"{what} {url} cannot be reached: no answer within {timeout:g} s "
                          "(check the address and the network)") from None
    except (httpx.HTTPError, ValueError) as exc:  # refused, unresolvable, not a URL
        raise ConfigError(f"{what} {url} cannot be reached: {type(exc).__name__}: {exc}") from None
