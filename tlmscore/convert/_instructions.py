"""The instructions a call ran with, and the stored prompt it referenced, as the model saw them.

A request made with a stored prompt template (`prompt: {id, version, variables}`) is often logged
with `"instructions": null`; the Response then records what the template expanded to in its own
`instructions` (a string, or a list of input items with their roles). So: the request's
instructions when it has them, else the Response's. A list of items becomes turns of their own
roles at the start of the conversation (a template may hold developer and user messages); the
prompt reference itself is shown as a system turn, so a reader knows which template and values
the call used, and a warning says so when its text was not logged at all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tlmscore._content import part_text


@dataclass(frozen=True)
class Instructions:
    """What to put before a call's history: `text` (system instructions) and/or `items` (turns), and warnings."""

    text: str | None = None
    items: tuple[dict[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()


def prompt_reference_text(prompt: Mapping[str, Any]) -> str:
    """The stored prompt reference as one line: its id, version and variables (JSON, Unicode kept)."""
    head = f"Stored prompt {prompt.get('id')}"
    if prompt.get("version") is not None:
        head += f" (version {prompt['version']})"
    variables = prompt.get("variables")
    if isinstance(variables, Mapping) and variables:
        shown = {str(k): part_text(v) for k, v in variables.items()}  # a part as its text or placeholder
        return f"{head}, with variables: {json.dumps(shown, ensure_ascii=False, sort_keys=True)}"
    return head


def call_instructions(request: Mapping[str, Any], response: Mapping[str, Any]) -> Instructions:
    """The instructions of one logged call: the request's, else the ones its Response recorded."""
    value = request.get("instructions")
    if value is None:
        value = response.get("instructions")
    prompt = request.get("prompt") if isinstance(request.get("prompt"), Mapping) else response.get("prompt")
    reference: tuple[dict[str, Any], ...] = ()
    warnings: tuple[str, ...] = ()
    if isinstance(prompt, Mapping) and prompt.get("id"):
        reference = ({"role": "system", "content": prompt_reference_text(prompt)},)
        if value is None or value == []:
            warnings = (f"the call used stored prompt {prompt['id']} but neither the request nor the response "
                        "logged its instructions: what the template said is unknown",)
    # instruction items: a bare `{role, content}` and `{type: message}` alike; what is not an object is no input
    items = tuple(item for item in value if isinstance(item, dict)) if isinstance(value, list) else ()
    text = None if value is None or isinstance(value, list) else str(value)
    if reference and text is not None:  # shown after the reference, as the template's own text
        items, text = ({"role": "system", "content": text},), None
    return Instructions(text=text, items=(*reference, *items), warnings=warnings)
