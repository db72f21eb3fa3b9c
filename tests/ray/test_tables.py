"""`flat_rows` without a cluster: rows made of a batch leave in bounded tables; none still carries the columns."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

from tlmscore.ray._tables import ENGINE_CONTEXT, FLAT_ROWS, flat_rows, schema, with_context

_COLUMNS = schema(n="int64", i="int64")


class _Data:
    """What `flat_rows` asks of a dataset: `map_batches`, whose function is kept to be called here."""

    fn: Callable[[pa.Table], Iterator[pa.Table]]

    def map_batches(self, fn: Callable[[pa.Table], Iterator[pa.Table]], **_: Any) -> _Data:
        self.fn = fn
        return self


def _tables(counts: list[int]) -> list[pa.Table]:
    data = _Data()
    flat_rows(data, lambda row: ({"n": row["n"], "i": i} for i in range(row["n"])), _COLUMNS)  # type: ignore[arg-type]
    return list(data.fn(pa.table({"n": counts})))


def test_a_row_that_makes_many_rows_is_handed_on_in_bounded_tables() -> None:
    tables = _tables([FLAT_ROWS * 2 + 5, 3])
    assert [len(t) for t in tables] == [FLAT_ROWS, FLAT_ROWS, 8]
    rows = pa.concat_tables(tables).to_pylist()
    assert rows == [{"n": n, "i": i} for n in (FLAT_ROWS * 2 + 5, 3) for i in range(n)]  # in order, none lost
    assert all(t.schema == _COLUMNS for t in tables)


def test_a_batch_that_makes_no_row_gives_one_empty_table_with_the_columns() -> None:
    tables = _tables([0, 0])
    assert [len(t) for t in tables] == [0]
    assert tables[0].schema == _COLUMNS


def test_a_batch_of_exactly_flat_rows_gives_one_table() -> None:
    assert [len(t) for t in _tables([FLAT_ROWS])] == [FLAT_ROWS]


@pytest.mark.parametrize("names", [ENGINE_CONTEXT[:-1], (*ENGINE_CONTEXT, "read_op_min_num_blocks")])
def test_only_the_settings_rows_only_keeps_are_given_to_a_dataset(names: tuple[str, ...]) -> None:
    """A setting missing, or one `rows_only` would not carry on to the datasets it makes, is refused."""
    with pytest.raises(ValueError, match="DataContext settings"):
        with_context(object(), dict.fromkeys(names, 1))  # type: ignore[arg-type]  # refused before it is touched
