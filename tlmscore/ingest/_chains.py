"""The chain index: the earlier records a follow-up call continues, found across all inputs of a run.

What a link means is `_history`'s; `ChainIndex` finds the linked records in any file, in any order,
without holding the logs in memory:

1. a first scan notes which response ids, conversation ids and item ids are referenced at all
   (lines are parsed only when a quick byte check says they refer to something);
2. a second scan, only when something is referenced, notes where each referenced record is
   (file, line, byte offset);
3. `history()` loads just those records on demand, keeping a bounded number in a cache.

Reading is done by `_records`: `scan` walks the sources (so locations name records exactly as
the batch's reader does) and `load_at` reads a record again through a `RandomAccess`,
which decompresses a gzipped file once rather than from its start on every lookup.

A link that is not in the set gives a warning and `complete=False`, never an error.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from tlmscore.ingest._batch_api import BatchInputs
from tlmscore.ingest._history import (
    History,
    call_input,
    conversation_id,
    own_items,
    previous_response_id,
    reference_ids,
)
from tlmscore.ingest._logfile import RandomAccess
from tlmscore.ingest._records import Find, Inputs, Location, Look, load_at, no_reader, scan
from tlmscore.model import Transcript, is_item_reference

_PREVIOUS = re.compile(rb'"previous_response_id"\s*:\s*"')
_CONVERSATION = re.compile(rb'"conversation"\s*:\s*[{"]')
_REFERENCE = b'"item_reference"'
_ID = re.compile(rb'"id"\s*:\s*"((?:[^"\\]|\\.)*)"')
K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    """A small least-recently-used cache."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self._size:
            self._data.popitem(last=False)


class _Wanted:
    """What the first scan found referenced, and where the conversations' calls are."""

    def __init__(self) -> None:
        self.responses: set[str] = set()
        self.items: set[str] = set()
        self.conversations: dict[str, list[tuple[float, int, Location]]] = {}

    def note(self, t: Transcript, location: Location, order: int) -> None:
        prev = previous_response_id(t)
        if prev:
            self.responses.add(prev)
        self.items.update(reference_ids(call_input(t)))
        conv = conversation_id(t)
        if conv:
            created = t.response.get("created_at")
            key = float(created) if isinstance(created, (int, float)) else float("inf")
            self.conversations.setdefault(conv, []).append((key, order, location))


class ChainIndex:
    """Where the referenced records of a run are, and the histories built from them."""

    def __init__(self, *, responses: dict[str, Location] | None = None, items: dict[str, Location] | None = None,
                 conversations: dict[str, list[Location]] | None = None, batch: BatchInputs | None = None,
                 cache_size: int = 256) -> None:
        self._responses = responses or {}
        self._items = items or {}
        self._conversations = conversations or {}
        self._batch = batch
        self._files = RandomAccess()
        self._records: _Lru[tuple[str, int], Transcript] = _Lru(cache_size)
        self._contexts: _Lru[str, History] = _Lru(cache_size)

    def __len__(self) -> int:
        return len(self._responses) + len(self._items) + sum(len(v) for v in self._conversations.values())

    def close(self) -> None:
        """Close the files looked into (and remove decompressed copies); later lookups open them again."""
        self._files.close()

    @classmethod
    def build(cls, source: Inputs, *, batch_inputs: Sequence[str | Path] | BatchInputs = (),
              cache_size: int = 256, find: Find = no_reader) -> ChainIndex:
        """Index `source` (paths, records, or a list of those; it is read twice, so not a generator).

        `find` gives a file's reader, as for `scan`.
        """
        batch = batch_inputs if isinstance(batch_inputs, BatchInputs) else (
            BatchInputs(batch_inputs) if batch_inputs else None)
        wanted = _Wanted()
        for order, (location, t) in enumerate(_records(source, batch, _needs_first_look, find)):
            wanted.note(t, location, order)
        responses: dict[str, Location] = {}
        items: dict[str, Location] = {}
        if wanted.responses or wanted.items:
            look = _mentions(wanted.responses | wanted.items)
            for location, t in _records(source, batch, look, find):
                _place(t, location, wanted, responses, items)
        conversations = {conv: [loc for _, _, loc in sorted(calls, key=lambda c: (c[0], c[1]))]
                         for conv, calls in wanted.conversations.items() if len(calls) > 1}
        return cls(responses=responses, items=items, conversations=conversations, batch=batch,
                   cache_size=cache_size)

    def history(self, transcript: Transcript) -> History:
        """The items `transcript` continues (oldest first), with references and completeness."""
        if transcript.error is not None or transcript.fmt != "responses":
            return History()
        prev = previous_response_id(transcript)
        if prev:
            found = self._context(prev)
        else:
            conv = conversation_id(transcript)
            found = self._conversation(conv, transcript) if conv else History()
        return self._with_references(found, transcript)

    def _load(self, location: Location) -> Transcript | None:
        key = (location.source, location.line)
        cached = self._records.get(key)
        if cached is None:
            loaded = load_at(location, self._files, self._batch)
            if loaded.error is None:
                self._records.put(key, loaded)
                cached = loaded
        return cached

    def _context(self, response_id: str) -> History:
        """Everything the model had seen once `response_id` was done: history, input, output."""
        chain: list[tuple[str, Transcript]] = []
        base, rid, problem = History(), response_id, None
        while rid:
            cached = self._contexts.get(rid)
            if cached is not None:
                base = cached
                break
            if any(rid == done for done, _ in chain):
                problem = f"previous_response_id chain loops at {rid!r}"
                break
            location = self._responses.get(rid)
            earlier = self._load(location) if location is not None else None
            if earlier is None:
                problem = f"previous response {rid!r} is not in the set: the history before it is missing"
                break
            chain.append((rid, earlier))
            rid = previous_response_id(earlier) or ""
        history = base if problem is None else History(base.items, False, (*base.warnings, problem))
        for rid, earlier in reversed(chain):
            history = History((*history.items, *own_items(earlier)), history.complete, history.warnings)
            self._contexts.put(rid, history)
        return history

    def _conversation(self, conv: str, transcript: Transcript) -> History:
        """The calls of the conversation before this one, each with its input and output."""
        items: list[dict[str, Any]] = []
        for location in self._conversations.get(conv, []):
            if (location.source, location.line) == (transcript.source, transcript.line):
                return History(tuple(items))
            earlier = self._load(location)
            if earlier is not None:
                items.extend(own_items(earlier))
        return History()

    def _with_references(self, found: History, transcript: Transcript) -> History:
        known = {str(i["id"]) for i in found.items if i.get("id") is not None}
        references: dict[str, dict[str, Any]] = {}
        warnings = list(found.warnings)
        for ref in reference_ids([*found.items, *call_input(transcript)]):
            if ref in known or ref in references:
                continue
            location = self._items.get(ref)
            holder = self._load(location) if location is not None else None
            item = next((i for i in own_items(holder) if i.get("id") == ref), None) if holder else None
            if item is None:
                warnings.append(f"item_reference {ref!r} is not in the set: that item is missing")
            else:
                references[ref] = item
        complete = found.complete and len(warnings) == len(found.warnings)
        return History(found.items, complete, tuple(warnings), references)


def _needs_first_look(raw: bytes) -> bool:
    """Whether a raw line may refer to an earlier response, conversation or item (a quick check)."""
    return bool(_PREVIOUS.search(raw) or _CONVERSATION.search(raw)) or _REFERENCE in raw


def _mentions(ids: set[str]) -> Look:
    """A quick check of a raw line: does it hold an `"id"` that is one of `ids`."""

    def look(raw: bytes) -> bool:
        return any(m.decode("utf-8", "replace") in ids for m in _ID.findall(raw))

    return look


def _place(t: Transcript, location: Location, wanted: _Wanted, responses: dict[str, Location],
           items: dict[str, Location]) -> None:
    """Note where a referenced response, or a referenced item, is."""
    rid = t.response.get("id")
    if isinstance(rid, str) and rid in wanted.responses:
        responses.setdefault(rid, location)
    for item in own_items(t):
        item_id = item.get("id")
        if isinstance(item_id, str) and item_id in wanted.items and not is_item_reference(item):
            items.setdefault(item_id, location)


def _records(source: Inputs, batch: BatchInputs | None, look: Look,
             find: Find) -> Iterator[tuple[Location, Transcript]]:
    """Every usable record of `source` whose raw line passes `look` (records in memory always do)."""
    for location, t in scan(source, batch, look, find):
        if t.error is None:
            yield location, t
