"""What a converter may read besides its item: the whole item list, options, and a warning sink."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tlmscore.model import Turn

__all__ = ["Context", "Converter", "ItemConverter", "ItemKind"]

ItemKind = Literal["answer", "context", "transparent"]


@dataclass
class Context:
    """State shared by the converters of one conversation.

    `items` is every item in order (history, then the response's output), so a converter can look
    ahead: a web search reads the citations of the message that follows it. Converters only add to
    `warnings`, `call_names`, `used_tools` and `program_calls`; they never reach outside this object.
    """

    items: Sequence[dict[str, Any]]
    urls: Literal["cited", "sources", "all"] = "cited"
    reasoning: Literal["skip", "summary"] = "skip"
    think: Literal["remove", "keep"] = "remove"
    index: int = 0
    warnings: list[str] = field(default_factory=list)
    call_names: dict[str, str] = field(default_factory=dict)
    used_tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    program_calls: dict[str, str] = field(default_factory=dict)
    """Calls a program made (programmatic tool calling): call id → the program's call id."""

    def warn(self, message: str) -> None:
        """Record a warning once."""
        if message not in self.warnings:
            self.warnings.append(message)

    def answered_call(self, call_id: str, fallback: str, what: str) -> str:
        """The name of the call an output answers; `fallback`, with a warning, when no call matches."""
        name = self.call_names.get(call_id)
        if name is None:
            self.warn(f"{what} {call_id!r} has no matching call; named {fallback!r}")
            return fallback
        return name

    def use_tool(self, tool_type: str, tool: dict[str, Any] | None = None) -> None:
        """Note that a built-in tool ran, so its declaration appears even if the request lacked it."""
        self.used_tools.setdefault(tool_type, tool or {"type": tool_type})

    def following(self, index: int) -> list[dict[str, Any]]:
        """The items after position `index`."""
        return list(self.items[index + 1 :])


Converter = Callable[[dict[str, Any], Context], list[Turn]]


@dataclass(frozen=True)
class ItemConverter:
    """How one item type becomes turns.

    `kind` says where it may stand: `answer` items (messages, client-side calls) can form the
    answer being scored; `context` items are what the model saw; `transparent` items (reasoning)
    neither end nor start an answer.
    """

    convert: Converter
    kind: ItemKind = "context"
    classify: Callable[[dict[str, Any]], ItemKind] | None = None
    """Where an item of this type may stand when that depends on the item (else `kind`)."""

    def kind_of(self, item: dict[str, Any]) -> ItemKind:
        """Where this item may stand: `classify(item)` when given, else the type's `kind`."""
        return self.classify(item) if self.classify is not None else self.kind
