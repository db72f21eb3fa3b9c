"""Which calls a watch scores: `--sample RATE` by a hash of the trace id, `--where` on model, metadata and tools.

The sample is decided by the SHA-256 of the call's trace id (its span id, else its record id, when
it has none): the same calls on every restart and every machine, and one decision for every scorer
of a trace, so two watches given the same rate score the same calls, and a higher rate keeps every
call a lower one kept.

A `--where` condition is `FIELD=PATTERN` or `FIELD!=PATTERN` (shell wildcards, `*`, `?`, `[ab]`),
all of them must hold. FIELD is `model` (the request's, else the response's), `metadata.KEY` (the
call's metadata: the record's, and the span's own `metadata` attribute where the store keeps one),
or `tool` (the kinds of tool the call offered or used: `function`, `web_search`, `file_search`,
`mcp`, …; `tool=web_search` holds when any of them matches, `tool!=web_search` when none does).
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tlmscore.errors import ConfigError

_BUCKETS = 2**64
FIELDS = ("model", "metadata.KEY", "tool")


def sample_key(record: Mapping[str, Any]) -> str:
    """What the sample is decided by: the trace id, else the span id, else the record's id."""
    for name in ("trace_id", "span_id", "id"):
        value = record.get(name)
        if value not in (None, ""):
            return str(value).strip().lower().removeprefix("0x")
    return ""


def sampled(key: str, rate: float) -> bool:
    """Whether a call of this trace is in a sample of `rate` (0 to 1): the first 8 bytes of SHA-256(key) below it."""
    if rate >= 1:
        return True
    bucket = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")
    return bucket < rate * _BUCKETS


def check_rate(rate: float) -> float:
    """`rate` when it is a share (more than 0, at most 1); else one `ConfigError` line."""
    if not 0 < rate <= 1:
        raise ConfigError(f"--sample {rate:g}: must be more than 0 and at most 1")
    return rate


@dataclass(frozen=True)
class Condition:
    """One `--where`: a field, a wildcard pattern, and whether it must match (`=`) or must not (`!=`)."""

    field: str
    pattern: str
    negated: bool = False

    @classmethod
    def parse(cls, text: str) -> Condition:
        """`FIELD=PATTERN` or `FIELD!=PATTERN`; one `ConfigError` line naming what was expected."""
        negated = "!=" in text
        field, sep, pattern = text.partition("!=" if negated else "=")
        field = field.strip()
        known = field in ("model", "tool") or (field.startswith("metadata.") and len(field) > len("metadata."))
        if not sep or not known:
            raise ConfigError(f"--where {text!r}: expected FIELD=PATTERN or FIELD!=PATTERN, FIELD one of "
                              f"{', '.join(FIELDS)}")
        return cls(field, pattern.strip(), negated)

    def holds(self, call: Mapping[str, Any], extra: Mapping[str, Any]) -> bool:
        """Whether the call (a record, and the store's own metadata `extra`) meets the condition."""
        values = _values(self.field, call, extra)
        hit = any(fnmatch.fnmatchcase(value, self.pattern) for value in values)
        return hit != self.negated


def parse_where(texts: Iterable[str]) -> tuple[Condition, ...]:
    """Every `--where`, parsed."""
    return tuple(Condition.parse(text) for text in texts)


def kept(conditions: Sequence[Condition], call: Mapping[str, Any], extra: Mapping[str, Any]) -> bool:
    """Whether every condition holds for the call."""
    return all(c.holds(call, extra) for c in conditions)


def _values(field: str, call: Mapping[str, Any], extra: Mapping[str, Any]) -> list[str]:
    if field == "model":
        return [str(m) for m in (_part(call, "request").get("model"), _part(call, "response").get("model")) if m][:1]
    if field == "tool":
        return sorted(tool_kinds(call))
    key = field.removeprefix("metadata.")
    own = call.get("metadata")
    metadata = {**extra, **(own if isinstance(own, Mapping) else {})}
    value = metadata.get(key)
    return [] if value is None else [str(value)]


def _part(call: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = call.get(name)
    return value if isinstance(value, Mapping) else {}


def tool_kinds(call: Mapping[str, Any]) -> set[str]:
    """The kinds of tool a call offered (its request's tools) or used (its response's tool calls)."""
    kinds = {str(t.get("type")) for t in _part(call, "request").get("tools") or [] if isinstance(t, Mapping)}
    for item in _part(call, "response").get("output") or []:  # Responses: web_search_call, function_call, …
        kind = str(item.get("type") or "") if isinstance(item, Mapping) else ""
        if kind.endswith("_call"):
            kinds.add(kind.removesuffix("_call"))
    for choice in _part(call, "response").get("choices") or []:  # Chat Completions: tool_calls of a message
        message = choice.get("message") if isinstance(choice, Mapping) else None
        calls = message.get("tool_calls") if isinstance(message, Mapping) else None
        kinds.update(str(c.get("type") or "function") for c in calls or [] if isinstance(c, Mapping))
    kinds.discard("None")
    return kinds
