"""Tool outputs of every shape as the JSON value the scorer sees: text, parts, JSON, errors.

A string stays a string (the reference shows function outputs verbatim); a list of content parts
becomes text with images and files as placeholders (kind, size, content hash), never base64.
"""

from __future__ import annotations

from typing import Any

from tlmscore._content import blob_summary, content_text

NOT_LOGGED = "The output of this call was not recorded in the log, so what it returned is unknown."


def tool_output(value: Any) -> Any:
    """A tool's output: strings and JSON values as they are, content-part lists as text."""
    if isinstance(value, list) and value and all(isinstance(v, dict) and isinstance(v.get("type"), str) for v in value):
        return content_text(value)
    return value


def image_placeholder(data: str | None, media: str | None = None) -> str:
    """An image given as a URL, a data URL or bare base64, as a short placeholder."""
    if not data:
        return "[image: not recorded]"
    if data.startswith(("http://", "https://", "sandbox:", "file-", "cfile_")):
        return f"[image: {data}]"
    if not data.startswith("data:") and media:
        data = f"data:{media};base64,{data}"
    return f"[image: {blob_summary(data)}]"


def call_id_of(item: dict[str, Any]) -> str:
    """The id that links a call to its output: `call_id` when set, else the item's `id`."""
    return str(item.get("call_id") or item.get("id") or "")


def api_object(value: Any) -> Any:
    """An object the API built (an action, an operation, an error) in one form, whoever serialised it.

    Keys in sorted order and unset (null) fields left out, at every depth: the raw record holds the API's key
    order, while a program that logs the `openai` client's parsed objects (MLflow's autolog, Langfuse's
    integrations) writes its types' field order with every field the API left out as null. Text the model
    wrote (a function call's arguments) never comes here: its order is the model's.
    """
    if isinstance(value, dict):
        return {k: api_object(value[k]) for k in sorted(value) if value[k] is not None}
    if isinstance(value, list):
        return [api_object(v) for v in value]
    return value
