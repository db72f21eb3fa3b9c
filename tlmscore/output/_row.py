"""`Row`: one output row, typed and frozen, made once the row is final (scored and calibrated).

The pipeline builds a chunk's rows as dicts (scoring adds its columns to them); when nothing will
change a row any more, `Row.from_record` freezes it, and every sink writes `Row.to_record()`: the
contract's dict again, keys in the same order, so a file written from `Row`s is byte for byte the
file written from the dicts. A `Row` is also a read-only `Mapping` of its columns (`row["score"]`,
`row.get("error")`, `dict(row)`, `row == {...}`), so code written for dict rows keeps reading them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

ROW_COLUMNS = (
    "id", "source", "line", "model", "response_id", "prompt", "response", "n_tool_calls",
    "n_urls", "n_urls_ok", "n_urls_failed", "warnings", "error", "history_complete", "response_status",
    "origin", "trace_id", "span_id", "cited_files", "n_urls_model",
)
"""The columns of every row, in order (the output contract; new columns are added at the end)."""
SCORE_COLUMNS = ("scorer", "score", "explanation", "details")
"""The columns a scorer adds, after `ROW_COLUMNS`."""
CALIBRATED_COLUMN = "calibrated_score"
"""The column a calibration adds, after `SCORE_COLUMNS`."""

COLUMN_KINDS: Mapping[str, str] = MappingProxyType({
    "line": "int", "n_tool_calls": "int", "n_urls": "int", "n_urls_ok": "int", "n_urls_failed": "int",
    "n_urls_model": "int",
    "warnings": "list", "cited_files": "list", "history_complete": "bool", "score": "float",
    CALIBRATED_COLUMN: "float",
    "details": "dict",
})
"""The kind of every column that is not text (`int`, `float`, `bool`, `list` of text, `dict`): how files
encode it and how a row read back from one decodes it. Every other column is text."""

_NAMED = frozenset((*ROW_COLUMNS, *SCORE_COLUMNS, CALIBRATED_COLUMN))
_LISTS = tuple(name for name in _NAMED if COLUMN_KINDS.get(name) == "list")


def column_kind(name: str) -> str:
    """The kind of a column (`text` for any column not in `COLUMN_KINDS`, extra columns included)."""
    return COLUMN_KINDS.get(name, "text")


@dataclass(frozen=True, eq=False)
class Row(Mapping[str, Any]):
    """One output row: the contract's columns, the score columns when scored, `calibrated_score` when calibrated.

    `scorer` is None for a row that was only prepared (it then has no score columns), and
    `calibrated_score` is None for a row no calibration saw (no such column). `extra` holds columns
    beyond these, in their order, after them. The containers are copies: `warnings` a tuple,
    `details` and `extra` read-only views, and `to_record` hands out fresh top-level containers.
    """

    id: str
    source: str
    line: int
    model: str | None = None
    response_id: Any = None
    """The response's id as logged: usually a string, a number where a provider logs one."""
    prompt: str | None = None
    response: str | None = None
    n_tool_calls: int = 0
    n_urls: int = 0
    n_urls_ok: int = 0
    n_urls_failed: int = 0
    warnings: tuple[str, ...] = ()
    error: str | None = None
    history_complete: bool | None = None
    response_status: str | None = None
    origin: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    cited_files: tuple[str, ...] = ()
    """The files the answer cites that the evidence holds (by file name, else file id), in order."""
    n_urls_model: int = 0
    """Of `n_urls_ok`, the pages whose text a model read and summarised (`--page-source chat`)."""
    scorer: str | None = None
    score: float = math.nan
    explanation: str = ""
    details: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    calibrated_score: float | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        # frozen: the containers a caller passed are copied, so changing them later changes no row
        for name in _LISTS:
            object.__setattr__(self, name, tuple(getattr(self, name) or ()))
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Row:
        """The row of a record (a dict of the contract's columns, as the pipeline builds or a JSON line holds it)."""
        known = {name: value for name, value in record.items() if name in _NAMED}
        extra = {name: value for name, value in record.items() if name not in _NAMED}
        if "score" in known:  # a row read back from JSON has null where the scorer gave NaN
            known["score"] = math.nan if known["score"] is None else float(known["score"])
        if isinstance(known.get("details"), str):  # as every file holds it: JSON text
            known["details"] = json.loads(known["details"])
        if known.get(CALIBRATED_COLUMN, 0) is None:
            known[CALIBRATED_COLUMN] = math.nan  # calibrated, NaN written as null
        return cls(**known, extra=extra)

    def with_columns(self, **columns: Any) -> Row:
        """A copy with `columns` set: the row's own columns by name, any other added to `extra`."""
        own = {name: value for name, value in columns.items() if name in _NAMED}
        more = {name: value for name, value in columns.items() if name not in _NAMED}
        return replace(self, **own, extra={**self.extra, **more}) if more else replace(self, **own)

    @staticmethod
    def columns(*, scored: bool = False, calibrated: bool = False) -> tuple[str, ...]:
        """The columns of a row (and of its DataFrame and files), in order: scored, calibrated or neither."""
        return (*ROW_COLUMNS, *(SCORE_COLUMNS if scored else ()), *((CALIBRATED_COLUMN,) if calibrated else ()))

    @property
    def scored(self) -> bool:
        """True when a scorer saw this row: it names one, or holds a score column (a file written elsewhere)."""
        return self.scorer is not None or not math.isnan(self.score) or bool(self.explanation) or bool(self.details)

    def names(self) -> tuple[str, ...]:
        """The columns of this row, in order."""
        return (*self.columns(scored=self.scored, calibrated=self.calibrated_score is not None), *self.extra)

    def _value(self, name: str) -> Any:
        """A column's value as the record holds it: lists and dicts as fresh copies."""
        kind = column_kind(name)
        if kind == "list":
            return list(getattr(self, name))
        if kind == "dict":
            return dict(getattr(self, name))
        return getattr(self, name)

    def to_record(self) -> dict[str, Any]:
        """The row as the output contract's dict, keys in column order (what every sink writes)."""
        own = self.columns(scored=self.scored, calibrated=self.calibrated_score is not None)
        return {name: self._value(name) for name in own} | dict(self.extra)

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled (to another process) as its record: the read-only views do not pickle themselves
        return (Row.from_record, (self.to_record(),))

    def __getitem__(self, name: str) -> Any:
        if name in self.extra:
            return self.extra[name]
        if name not in _NAMED or name not in self.names():
            raise KeyError(name)
        return self._value(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)
                          if f.name in ("id", "source", "line", "scorer", "score", "error"))
        return f"Row({shown}, ...)"
