"""History semantics: what an earlier call contributes to a follow-up call's context.

A Responses API call with `previous_response_id` continues an earlier response: the model saw that
response's whole context (its own history, its input, its output) before the new input. A call in a
`conversation` saw the inputs and outputs of the earlier calls of that conversation. An
`item_reference` stands for an earlier item by id. These functions read those links off one
record and put a found history in front of a call's input; `_chains.ChainIndex` finds the records.
Instructions are not inherited: a follow-up is rendered with its own `instructions` only, as the
API does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tlmscore.model import Transcript, is_item_reference


@dataclass(frozen=True)
class History:
    """The items a transcript's input continues, whether all of them were found, and why not."""

    items: tuple[dict[str, Any], ...] = ()
    complete: bool = True
    warnings: tuple[str, ...] = ()
    references: dict[str, dict[str, Any]] = field(default_factory=dict)


def previous_response_id(t: Transcript) -> str | None:
    """The response a call continues, from the request or the Response's echo of it."""
    value = t.request.get("previous_response_id") or t.response.get("previous_response_id")
    return str(value) if value else None


def conversation_id(t: Transcript) -> str | None:
    """The conversation a call belongs to (`conversation` is an id or `{"id": ...}`)."""
    for given in (t.request.get("conversation"), t.response.get("conversation")):
        value = given.get("id") if isinstance(given, dict) else given
        if isinstance(value, str) and value:
            return value
    return None


def call_input(t: Transcript) -> list[dict[str, Any]]:
    """A call's input as items (a string input is one user message)."""
    value = t.request.get("input")
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return [i for i in value if isinstance(i, dict)] if isinstance(value, list) else []


def own_items(t: Transcript) -> list[dict[str, Any]]:
    """What a call added to the context: its input, then its output."""
    output = t.response.get("output")
    return call_input(t) + ([i for i in output if isinstance(i, dict)] if isinstance(output, list) else [])


def reference_ids(items: Sequence[dict[str, Any]]) -> list[str]:
    """The ids that the `item_reference` items among `items` point to."""
    return [str(i["id"]) for i in items if is_item_reference(i) and i.get("id")]


def with_history(transcript: Transcript, history: History) -> Transcript:
    """The transcript with the history prepended to its input and item references filled in."""
    items = [*history.items, *call_input(transcript)]
    if not history.items and not history.references:
        return transcript
    shown: set[str] = set()
    resolved: list[dict[str, Any]] = []
    for item in items:
        ref = item.get("id") if is_item_reference(item) else None
        target = history.references.get(str(ref)) if ref is not None and ref not in shown else None
        resolved.append(target if target is not None else item)
        if item.get("id") is not None:
            shown.add(str(item["id"]))
    return replace(transcript, request={**transcript.request, "input": resolved})
