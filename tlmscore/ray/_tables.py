"""Row functions applied batch-wise with a fixed schema, and the joins and group-bys over them.

Joins and group-bys fail on a block without columns, which `flat_map` makes of a batch it maps
to no rows; `flat_rows` gives the blocks it writes the columns of `schema`. A map is not called on
an empty block, though: Ray passes it on as a block without columns, so `flat_rows` over a dataset
with empty blocks still yields some. `join_on_key`, `grouped` and `by_key` leave them out before they shuffle.
"""

from __future__ import annotations

import functools
import itertools
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from ray.data import DataContext, Dataset
    from ray.data.grouped_data import GroupedData


RowFn = Callable[[dict[str, Any]], Iterable[dict[str, Any]]]
ENGINE_CONTEXT = ("target_max_block_size", "override_object_store_memory_limit_fraction",
                  "execution_options.preserve_order")
"""The `DataContext` settings the engine gives its datasets (`with_context`), kept by a dataset `rows_only` makes."""
FLAT_ROWS = 10_000
"""Rows `flat_rows` puts in one output table: an input file's records leave its worker in tables of this many."""


def with_context(data: Dataset, values: Mapping[str, Any]) -> Dataset:
    """`data` with the `DataContext` settings `values` (one for each of `ENGINE_CONTEXT`), on its own context.

    Never on Ray's process-wide context: a dataset passes its own on to those made from it, and a
    run leaves its host's as it found it. A setting not in `ENGINE_CONTEXT` is refused: `rows_only`
    would not keep it.
    """
    if set(values) != set(ENGINE_CONTEXT):
        raise ValueError(f"the engine's DataContext settings are {ENGINE_CONTEXT}, not {tuple(values)}")
    for name, value in values.items():
        *path, last = name.split(".")
        setattr(functools.reduce(getattr, path, data.context), last, value)
    return data


def context_of(context: DataContext) -> dict[str, Any]:
    """The settings of `ENGINE_CONTEXT` in `context` (a dataset's, or Ray's process-wide one)."""
    return {name: functools.reduce(getattr, name.split("."), context) for name in ENGINE_CONTEXT}


def schema(**columns: str) -> pa.Schema:
    """An Arrow schema from column names and type names (`string`, `int64`, `float64`, `binary`)."""
    import pyarrow as pa  # noqa: PLC0415

    return pa.schema([(name, getattr(pa, kind)()) for name, kind in columns.items()])


def flat_rows(data: Dataset, fn: RowFn, columns: pa.Schema) -> Dataset:
    """`data` with each row replaced by the rows `fn` makes of it, in blocks of schema `columns`.

    The rows made of a batch are handed on `FLAT_ROWS` at a time, so a row that makes many (an
    input file, which makes its records) is never held whole in one worker's memory.
    """
    import pyarrow as pa  # noqa: PLC0415

    def apply(batch: pa.Table) -> Iterator[pa.Table]:
        made = (out for row in batch.to_pylist() for out in fn(row))
        first = list(itertools.islice(made, FLAT_ROWS))
        yield pa.Table.from_pylist(first, schema=columns)  # even none: a block with the columns
        while more := list(itertools.islice(made, FLAT_ROWS)):
            yield pa.Table.from_pylist(more, schema=columns)

    result: Dataset = data.map_batches(apply, batch_format="pyarrow")
    return result


def join_on_key(left: Dataset, right: Dataset, how: str, partitions: int) -> Dataset:
    """`left` joined with `right` on their `key` column (`how`: Ray's `join_type`), empty blocks left out.

    Ray's hash shuffle sends the first block it gets of each side to every partition, to tell
    them the side's columns. When that block is an empty one without columns, a partition that
    gets no row of that side has no `key` column and the join fails (ray-project/ray#60013).
    Which block comes first depends on timing, so without this the failure comes and goes.
    A group-by's shuffle fails the same way (`grouped`).
    """
    joined: Dataset = rows_only(left).join(rows_only(right), join_type=how, num_partitions=partitions,
                                           on=("key",))
    return joined


def grouped(data: Dataset, key: str, partitions: int) -> GroupedData:
    """`data` grouped by `key` in `partitions`, its blocks of no rows left out first (see `join_on_key`).

    A partition given the first block without columns, then rows, cannot put them in one table.
    """
    groups: GroupedData = rows_only(data).groupby(key, num_partitions=partitions)
    return groups


def by_key(data: Dataset, key: str, partitions: int, fn: Callable[[pa.Table], pa.Table]) -> Dataset:
    """`fn` over `data` hashed by `key` into `partitions`: each call gets one whole partition, sorted by `key`.

    Every row of a key comes in the same call, as in a group-by, but `fn` is called once per
    partition, not once per group: a group-by's call and output block per group cost more than
    the work of a small group. Ray does not split a partition hashed by key into several blocks.
    """
    shuffled = rows_only(data).repartition(partitions, keys=[key], sort=True)
    result: Dataset = shuffled.map_batches(fn, batch_size=None, batch_format="pyarrow")
    return result


def attach(records: Dataset, found: Sequence[Dataset], column: str, columns: pa.Schema, partitions: int, *,
           empty: bytes | None = None) -> Dataset:
    """`records` in `columns`, their `column` the pickled lists of `found`'s rows of the same `position`, joined.

    `found` holds rows of `columns` with only `position` and `column` set. A record's row and the
    rows found for it meet in a partition by `position` (`by_key`) and leave it as one row; a
    record nothing was found for gets `empty`.
    """
    import pyarrow as pa  # noqa: PLC0415

    def as_record(batch: pa.Table) -> pa.Table:
        kept = batch.select([name for name in columns.names if name != column])
        return kept.append_column(column, pa.nulls(len(batch), pa.binary())).cast(columns)

    plain: Dataset = records.map_batches(as_record, batch_format="pyarrow")
    if not found:  # nothing was looked for: every record's `column` is null
        return plain
    merge = functools.partial(_merged, column=column, columns=columns, empty=empty)
    return by_key(plain.union(*found), "position", partitions, merge)


def _merged(block: pa.Table, column: str, columns: pa.Schema, empty: bytes | None) -> pa.Table:
    """Each record's row of `block` (one with an `input`) with the lists of its `position`'s other rows joined."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    found: dict[int, list[Any]] = {}
    rows = block.filter(pc.is_valid(block[column]))
    for position, blob in zip(rows["position"].to_pylist(), rows[column].to_pylist(), strict=True):
        found.setdefault(position, []).extend(pickle.loads(blob))  # noqa: S301  (rows this engine wrote)
    records = block.filter(pc.is_valid(block["input"])).drop_columns([column])
    blobs = [pickle.dumps(found[p]) if p in found else empty for p in records["position"].to_pylist()]
    return records.append_column(column, pa.array(blobs, pa.binary())).cast(columns)


def rows_only(data: Dataset) -> Dataset:
    """`data`, computed, without its blocks of no rows (no blocks at all when it has no row)."""
    import ray.data  # noqa: PLC0415

    done: Dataset = data.materialize()
    refs = [ref for bundle in done.iter_internal_ref_bundles()
            for ref, meta in zip(bundle.block_refs, bundle.metadata, strict=True) if meta.num_rows != 0]
    if len(refs) == done.num_blocks():
        return done
    # a dataset made of references starts from Ray's process-wide context: it keeps what the engine set on `data`'s
    return with_context(ray.data.from_arrow_refs(refs), context_of(done.context))
