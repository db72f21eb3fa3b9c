"""Chains on Ray Data: the earlier records each follow-up needs, found by joins on ids, level by level.

The single-machine `ChainIndex` scans all inputs for the records that are referenced. Here the
engine does it over the whole dataset without any worker holding an index of it:

1. every record states what it refers to (`r:<previous_response_id>`, `i:<item_reference id>`)
   and what it can be referred to as (`r:<its response id>`, `i:<each of its own item ids>`);
2. the targets are joined with the set of referred keys, keeping the first record in input order
   for each key (as `ChainIndex` does);
3. level by level, each record's wanted keys are joined with the targets; a found response wants
   its own previous response and references in turn, until no record wants anything new;
4. conversations are grouped by id and ordered by `created_at`, then input order.

Each record then gets the few records its history is made of, and builds a `ChainIndex` over just
those, so histories, warnings and completeness are the single-machine ones.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from tlmscore.ingest import (
    ChainIndex,
    Location,
    call_input,
    conversation_id,
    own_items,
    previous_response_id,
    reference_ids,
)
from tlmscore.model import is_item_reference
from tlmscore.ray._read import transcript_of
from tlmscore.ray._tables import attach, by_key, flat_rows, join_on_key, rows_only, schema

if TYPE_CHECKING:
    from ray.data import Dataset

    from tlmscore.ingest import BatchInputs


_MAX_LEVELS = 100_000  # a bound on the loop; each level follows one more link of some chain
_NONE = pickle.dumps([])
_KEYED = schema(position="int64", source="string", line="int64", record="binary", wants="binary",
                offers="binary", onward="binary", conv="string", created="float64")
_KEY_ROWS = schema(position="int64", source="string", line="int64", record="binary", conv="string",
                   created="float64", key="string", onward="binary")
_FRONTIER = schema(owner="int64", key="string", seen="binary")
_FOUND = schema(owner="int64", found="binary")
_TARGETS = schema(key="string", position="int64", source="string", line="int64", record="binary",
                  onward="binary")
_LINKED = schema(input="int64", position="int64", source="string", line="int64", record="binary",
                 error="string", links="binary")


def _refs(items: list[dict[str, Any]]) -> list[str]:
    return [f"i:{ref}" for ref in reference_ids(items)]


def _keys(row: dict[str, Any], batch: BatchInputs | None = None) -> dict[str, Any]:
    """What a record wants and offers, as pickled lists (joins carry lists as bytes)."""
    t = transcript_of(row, batch)
    wants: list[str] = []
    offers: list[str] = []
    onward: list[str] = []
    conv, created = None, float("inf")
    if t.error is None:
        prev = previous_response_id(t)
        onward = ([f"r:{prev}"] if prev else []) + _refs(own_items(t))
        wants = ([f"r:{prev}"] if prev else []) + _refs(call_input(t))
        rid = t.response.get("id")
        offers = ([f"r:{rid}"] if isinstance(rid, str) else []) + [
            f"i:{i['id']}" for i in own_items(t) if isinstance(i.get("id"), str) and not is_item_reference(i)]
        conv = conversation_id(t)
        value = t.response.get("created_at")
        created = float(value) if isinstance(value, (int, float)) else float("inf")
    return {"position": row["position"], "source": row["source"], "line": row["line"], "record": row["record"],
            "wants": pickle.dumps(wants), "offers": pickle.dumps(offers), "onward": pickle.dumps(onward),
            "conv": conv, "created": created}


def _explode(column: str, key: str) -> Any:
    def explode(row: dict[str, Any]) -> Iterator[dict[str, Any]]:
        for value in dict.fromkeys(pickle.loads(row[column])):  # noqa: S301  (rows this engine wrote)
            yield {**{k: v for k, v in row.items() if k not in ("wants", "offers", "onward")}, key: value,
                   "onward": row["onward"]}
    return explode


def _targets(block: pa.Table) -> pa.Table:
    """For each key of `block` some record wants: the record first in input order among those offering it."""
    wanted = set(block.filter(pc.is_null(block["record"]))["key"].to_pylist())
    offers = block.filter(pc.is_valid(block["record"])).sort_by([("key", "ascending"), ("position", "ascending")])
    keys = offers["key"].to_pylist()
    first = [i for i, key in enumerate(keys) if key in wanted and (i == 0 or keys[i - 1] != key)]
    return offers.take(pa.array(first, pa.int64())).cast(_TARGETS)


def _conversations(block: pa.Table) -> pa.Table:
    """For each call of each conversation of `block`: all the conversation's calls, in the order `ChainIndex` uses."""
    ordered = block.sort_by([("conv", "ascending"), ("created", "ascending"), ("position", "ascending")])
    rows: list[dict[str, Any]] = []
    for conv, group in itertools.groupby(ordered.select(["conv", "position", "source", "line", "record"]).to_pylist(),
                                         key=lambda r: r["conv"]):
        calls = list(group)
        if len(calls) < 2:  # noqa: PLR2004  (a conversation of one call has no history)
            continue
        found = pickle.dumps([("c", conv, [(r["source"], r["line"], r["record"]) for r in calls])])
        rows += [{"owner": r["position"], "found": found} for r in calls]
    return pa.Table.from_pylist(rows, schema=_FOUND)


def _found(row: dict[str, Any]) -> dict[str, Any]:
    return {"owner": row["owner"], "found": pickle.dumps([(row["key"][0], row["key"][2:],
                                                           (row["source"], row["line"], row["record"]))])}


def _next(row: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """What a found response wants in turn (its previous response, its references), not yet seen."""
    seen = set(pickle.loads(row["seen"]))  # noqa: S301
    seen.add(row["key"])
    for key in dict.fromkeys(pickle.loads(row["onward"]) if row["key"].startswith("r:") else []):  # noqa: S301
        if key not in seen:
            yield {"owner": row["owner"], "key": key, "seen": pickle.dumps(sorted(seen))}


def with_links(records: Dataset, partitions: int, batch: BatchInputs | None = None) -> tuple[Dataset, bool]:
    """`records` with a `links` column: the pickled records each one's history is made of (or null).

    `batch` holds the requests of Batch API output lines (`--batch-input`), which say what they refer to.
    Also whether the records kept their order: they do when no record has a history (nothing is
    joined to them), and are shuffled by `position` otherwise.
    """
    keyed = flat_rows(records, lambda r: [_keys(r, batch)], _KEYED).materialize()
    wanted = flat_rows(keyed, _explode("wants", "key"), _KEY_ROWS).select_columns(["position", "key"])
    wanted = flat_rows(wanted, lambda r: [{"owner": r["position"], "key": r["key"], "seen": _NONE}],
                       _FRONTIER).materialize()
    from ray.data.expressions import col  # noqa: PLC0415

    conversations = keyed.filter(expr=col("conv").is_not_null())
    parts = []
    if conversations.count():
        parts.append(by_key(conversations, "conv", partitions, _conversations))
    if wanted.count():
        offered = flat_rows(keyed, _explode("offers", "key"), _KEY_ROWS).select_columns(list(_TARGETS.names))
        asked = flat_rows(wanted, lambda r: [{"key": r["key"], "position": r["owner"]}], _TARGETS)  # no record
        targets = rows_only(by_key(offered.union(asked), "key", partitions, _targets))
        frontier = wanted
        for _ in range(_MAX_LEVELS):
            hits = join_on_key(frontier, targets, "inner", partitions).materialize()
            if not hits.count():
                break
            parts.append(flat_rows(hits, lambda r: [_found(r)], _FOUND))
            frontier = flat_rows(hits, _next, _FRONTIER).materialize()
            if not frontier.count():
                break
    found = [flat_rows(part, lambda r: [{"position": r["owner"], "links": r["found"]}], _LINKED) for part in parts]
    return attach(records, found, "links", _LINKED, partitions), not found


def chain_index_of(links: bytes | None, batch: BatchInputs | None = None) -> ChainIndex:
    """The `ChainIndex` over the records a row's history is made of (`batch`: Batch API requests)."""
    responses: dict[str, Location] = {}
    items: dict[str, Location] = {}
    conversations: dict[str, list[Location]] = {}
    for kind, key, value in pickle.loads(links) if links else []:  # noqa: S301  (rows this engine wrote)
        if kind == "c":
            conversations[key] = [Location(s, line, record=pickle.loads(r)) for s, line, r in value]  # noqa: S301
            continue
        source, line, record = value
        target = responses if kind == "r" else items
        target[key] = Location(source, line, record=pickle.loads(record))  # noqa: S301
    return ChainIndex(responses=responses, items=items, conversations=conversations, batch=batch)
