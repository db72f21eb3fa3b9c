"""Messages of every role, and reasoning items (skipped unless summaries are asked for)."""

from __future__ import annotations

from typing import Any

from tlmscore._content import content_text, is_known_part, part_type
from tlmscore._think import split_think
from tlmscore.convert.context import Context, ItemConverter
from tlmscore.model import Message, Turn

_INSTRUCTION_ROLES = ("system", "developer")
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_details", "thinking")
"""Fields in which chat providers log a message's reasoning apart from its content (DeepSeek's
`reasoning_content`, OpenRouter's and vLLM's `reasoning` / `reasoning_details`, …)."""


def assistant_text(text: str, ctx: Context) -> str:
    """An assistant's text without the `<think>` reasoning some chat models write into it, with a warning.

    Removed from the answer being scored and from earlier assistant turns alike: it is not what the
    model said, and clients do not send it back (DeepSeek's API rejects it in history). With
    `think="keep"` (tlmscore.compat, to match the reference) the text is left as it is.
    """
    if ctx.think == "keep":
        return text
    split = split_think(text)
    if not split.found:
        return text
    if split.unclosed:
        left = "the text before it is kept" if split.text else "no answer text is left"
        ctx.warn(f"an assistant message was cut off inside a <think> block: its reasoning was removed; {left}")
    else:
        ctx.warn("removed <think> reasoning from an assistant message; only the text outside it is shown")
    return split.text


def message_text(msg: dict[str, Any], role: str, ctx: Context) -> str:
    """A message's content as text, warning about what is not shown as it was meant.

    Reasoning parts (`thinking`, `reasoning`) become `<think>` blocks, so an assistant's are removed
    as `<think>` text is (kept with `think="keep"`); reasoning logged in a field of its own is never
    part of the content, and is warned about; a part of a type no converter knows is shown as a
    placeholder (or its `text`), with a warning.
    """
    content = msg.get("content")
    for part in content if isinstance(content, list) else []:
        if not is_known_part(part):
            ctx.warn(f"a content part of unknown type {part_type(part)!r} is shown as a placeholder or its text")
    if role == "assistant" and ctx.think == "remove":
        for key in REASONING_FIELDS:
            if msg.get(key):
                ctx.warn(f"an assistant message logs its reasoning in {key!r}: not part of the answer, not shown")
    text = content_text(content)
    return assistant_text(text, ctx) if role == "assistant" else text


def convert_message(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A message item, or a bare `{role, content}` input message; an assistant's `<think>` reasoning is removed."""
    role = str(item.get("role") or "user")
    name = item.get("name") if isinstance(item.get("name"), str) and item.get("name") else None
    text = message_text(item, role, ctx)
    if role in _INSTRUCTION_ROLES and not text.strip() and ctx.think == "remove":
        return []  # says nothing: shown, it would only leave blank lines (text kept as it is, the reference's way)
    return [Message(role=role, text=text, name=name)]


def convert_reasoning(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """Reasoning is not shown, as in the reference; with `reasoning="summary"` its summary is."""
    if ctx.reasoning != "summary":
        return []
    summary = item.get("summary") or []
    texts = [str(part.get("text", "")) for part in summary if isinstance(part, dict) and part.get("text")]
    if not texts:
        return []
    return [Message(role="assistant", text="(reasoning summary) " + "\n".join(texts))]


CONVERTERS: dict[str, ItemConverter] = {
    "message": ItemConverter(convert_message, kind="answer"),
    "reasoning": ItemConverter(convert_reasoning, kind="transparent"),
}
