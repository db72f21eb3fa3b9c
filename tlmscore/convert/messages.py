"""Messages of every role, and reasoning items (skipped unless summaries are asked for)."""

from __future__ import annotations

from typing import Any

from tlmscore.convert.content import content_text
from tlmscore.convert.context import Context, ItemConverter
from tlmscore.model import Message, Turn

__all__ = ["CONVERTERS", "convert_message", "convert_reasoning"]


def convert_message(item: dict[str, Any], ctx: Context) -> list[Turn]:
    """A message item, or a bare `{role, content}` input message."""
    role = item.get("role") or "user"
    name = item.get("name") if isinstance(item.get("name"), str) and item.get("name") else None
    return [Message(role=str(role), text=content_text(item.get("content")), name=name)]


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
