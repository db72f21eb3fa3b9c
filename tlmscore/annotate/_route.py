"""Where each row goes back to, by its `origin` (pure): the target of a bare `--annotate`.

The store a row's `origin` names says where (`tlmscore.stores.for_origin`): a Phoenix or MLflow
row goes back to the server its `source` (the live address it was read from) names, OpenTelemetry
spans to the endpoint of the environment (`otlp`), Langfuse and LangSmith rows to theirs; rows of
plain records, of the Agents SDK's exports and stored responses have no trace to go back to.

An address read from a row is data: no key is sent to it unless it is the server the key is for
(see `tlmscore.stores.credentials`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tlmscore.stores import for_origin

ORIGIN = "origin"
"""The target text that means "back to where each row came from" (what a bare `--annotate` stands for)."""


def destination(row: Mapping[str, Any]) -> str | None:
    """The target a row goes back to, as `--to` text; None when it has no trace to go back to."""
    source = row.get("source")
    return input_destination(source if isinstance(source, str) else None, row.get("origin"))


def input_destination(address: str | None, reader: str | None) -> str | None:
    """Where the rows of one input will go back to, known before reading: by the reader that reads it."""
    connector = for_origin(reader)
    return connector.back_to(address) if connector is not None else None


def needed(destinations: Iterable[str | None]) -> list[str]:
    """The distinct targets, in order, without the rows that go nowhere."""
    return list(dict.fromkeys(d for d in destinations if d is not None))
