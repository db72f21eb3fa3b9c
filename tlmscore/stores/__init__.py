"""Where logs live: one module per trace store or log format, reading it and writing scores back onto it.

A store that takes scores back has a connector; a format's module reads only.

- `reading`: what a reader is (`SourceReader`, `Read`, `Peek`), a live source's address in a window
  (`with_window`), and the table files every reader reads.
- `base`: the `Connector` protocol, `Annotation` (what every store is told about a row), `Target`,
  `Keys` and `credentials` (a key goes only to the server it is for), `Sent` (what a batch did).
- `phoenix` (live projects, span annotations), `otlp` (OTLP trace and log files and OpenInference span
  exports, read by `otlp_spans`, `genai`, `genai_openai`, `genai_uploads`, `otlp_logs` and
  `openinference`; `gen_ai.evaluation.result` events out), `langfuse` (observation exports and traces,
  scores), `langsmith` (run exports, feedback), `mlflow` (live experiments and exports, feedback
  assessments), `agents` (the Agents SDK's span exports) and `openai` (stored responses by id,
  `tlmscore pull`, `--hydrate`).

`registry.CONNECTORS` lists the built-in stores: adding a store is one module and one entry there
(or, from another package, a `tlmscore.connectors` entry point loading a `Connector`, which never
replaces a built-in one: see `tlmscore.plugins`). Everything else finds a store through this
registry: by name, by the origin its rows carry, by a target's text. The registry also holds every
reader of logs (`readers`, `find_reader`): each store's own, and the `tlmscore.sources` entry points'.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

import httpx

from tlmscore._contract import is_live, scheme
from tlmscore.errors import ConfigError
from tlmscore.stores.base import Annotation, Connector, Failure, Keys, Sent, Session, Target, credentials
from tlmscore.stores.openinference import spans_records
from tlmscore.stores.reading import Peek, Read, SourceReader, with_window
from tlmscore.stores.registry import (
    CONNECTORS,
    ENTRY_POINT_GROUP,
    PLUGINS,
    READERS,
    SOURCE_PLUGINS,
    connectors,
    find_reader,
    readers,
)

__all__ = ["CONNECTORS", "ENTRY_POINT_GROUP", "PLUGINS", "READERS", "SOURCE_PLUGINS", "Annotation", "Connector",
           "Failure", "Keys", "Peek", "Read", "Sent", "Session", "SourceReader", "Target", "check_source", "connectors",
           "credentials", "find_reader", "for_origin", "is_live", "keyed", "parse_target", "readers", "scheme",
           "source_server", "spans_records", "target_forms", "with_window"]

def for_origin(origin: Any) -> Connector | None:
    """The store rows of this `origin` go back to (None: a plain file's rows, or an unknown origin)."""
    if not isinstance(origin, str):
        return None
    return next((c for c in connectors().values() if origin in c.origins), None)


def target_forms() -> str:
    """The targets there are, as a usage error lists them."""
    return ", ".join(form for connector in connectors().values() for form in connector.forms)


def parse_target(text: str, env: Mapping[str, str]) -> Target:
    """`--to TEXT` as a `Target` of the store whose form it is; a `ConfigError` lists the forms there are.

    The target carries no credentials: see `credentials` and `tlmscore.annotate.with_keys`.
    """
    for connector in connectors().values():
        found = connector.target(text, env)
        if found is not None:
            return found
    raise ConfigError(f"annotation target {text!r}: expected {target_forms()}")


def keyed(target: Target, env: Mapping[str, str], named: Collection[str]) -> Target:
    """`target` with its store's keys as headers when they are for its server (see `credentials`).

    `named` are the servers of the store the command line (or the caller) gave; a target found in
    data (a row's origin, a side file's target) is not among them.
    """
    connector = connectors()[target.store]
    if target.file or not credentials(connector.keys, target.location, env, named):
        return target
    return dataclasses.replace(target, headers=connector.headers(env))


def _live(address: str) -> tuple[Connector, Target] | None:
    """The store of a live address, and the target its rows go back to (its server)."""
    if not is_live(address):
        return None
    reader = find_reader(address)
    connector = next((c for c in connectors().values() if reader in c.readers), None)
    back = connector.back_to(address) if connector is not None else None
    return None if connector is None or back is None else (connector, parse_target(back, {}))


def source_server(address: str) -> tuple[str, str] | None:
    """(store, server URL) of a live source's address; None for a file."""
    found = _live(address)
    return None if found is None else (found[0].name, found[1].location)


def check_source(address: str, env: Mapping[str, str], named: Collection[str], *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
    """Raise one line (`TranscriptError`) unless the live source at `address` answers and is its store.

    Run before any work, so a server that is down, answers 500 or is some other web server is a
    usage error, not a traceback or a half-written output.
    """
    found = _live(address)
    if found is None:
        return
    connector, target = found
    headers = connector.headers(env) if credentials(connector.keys, target.location, env, named) else {}
    with httpx.Client(transport=transport, timeout=timeout) as client:
        connector.check(address, Session(client, timeout, 0), headers)
