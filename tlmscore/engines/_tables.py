"""Row functions applied batch-wise with a fixed schema.

Joins and group-bys fail on a block without columns, which `flat_map` makes of a batch it maps
to no rows; `flat_rows` gives every block, empty or not, the columns of `schema`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from ray.data import Dataset


RowFn = Callable[[dict[str, Any]], Iterable[dict[str, Any]]]


def schema(**columns: str) -> pa.Schema:
    """An Arrow schema from column names and type names (`string`, `int64`, `float64`, `binary`)."""
    import pyarrow as pa  # noqa: PLC0415

    return pa.schema([(name, getattr(pa, kind)()) for name, kind in columns.items()])


def flat_rows(data: Dataset, fn: RowFn, columns: pa.Schema) -> Dataset:
    """`data` with each row replaced by the rows `fn` makes of it, in blocks of schema `columns`."""
    import pyarrow as pa  # noqa: PLC0415

    def apply(batch: pa.Table) -> pa.Table:
        return pa.Table.from_pylist([out for row in batch.to_pylist() for out in fn(row)], schema=columns)

    result: Dataset = data.map_batches(apply, batch_format="pyarrow")
    return result
