"""The Ray engine without a cluster: bounded partitions, a whole CPU left free, rows handed on only in input order."""

from __future__ import annotations

import pickle
import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from tlmscore.errors import ConfigError
from tlmscore.output import Row
from tlmscore.ray._engine import ROWS_PER_PARTITION, Engine, _in_order


@pytest.mark.parametrize(("records", "partitions"), [
    (0, 1),
    (250, 1),
    (ROWS_PER_PARTITION, 1),
    (ROWS_PER_PARTITION + 1, 2),
    (100_000, 2),
    (1_000_000, 20),  # not capped at the cluster's CPUs: each partition is one call's memory
    (10_000_000, 200),
])
def test_partitions_hold_at_most_rows_per_partition(records: int, partitions: int) -> None:
    assert Engine().shuffle_partitions(records) == partitions


def test_a_given_number_of_partitions_is_kept() -> None:
    assert Engine(partitions=3).shuffle_partitions(1_000_000) == 3
    assert Engine(partitions=3).shuffle_partitions(10) == 3


@pytest.mark.parametrize(("cpus", "fetchers", "scorers"), [
    (2, 2, 2),  # the defaults on two CPUs: half a CPU held, one and a half free
    (2, 4, 4),  # a whole CPU held, a whole one free
    (4, 12, 2),
    (0, 8, 8),  # a cluster that reports no CPU yet (autoscaling): left to Ray
])
def test_pools_that_leave_a_whole_cpu_free_are_taken(cpus: float, fetchers: int, scorers: int) -> None:
    Engine(fetchers=fetchers, scorers=scorers).check(scoring=True, cpus=cpus)


@pytest.mark.parametrize(("cpus", "fetchers", "scorers", "scoring", "message"), [
    (1, 2, 2, False, "--fetchers 2: its actors hold 0.5 of the Ray cluster's 1 CPUs"),
    (1, 1, 1, False, "a cluster of one CPU runs the local engine only"),
    (2, 5, 2, False, "--fetchers 5: its actors hold 1.25 of the Ray cluster's 2 CPUs, and Ray Data needs a whole one "
                     "free for each shuffle's tasks; at most 4 on this cluster"),
    (2, 2, 5, True, "--scorer-concurrency 5: its actors hold 1.25"),
    (3, 2, 9, True, "at most 8 on this cluster"),
])
def test_pools_that_would_leave_no_whole_cpu_are_refused(cpus: float, fetchers: int, scorers: int, scoring: bool,
                                                         message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Engine(fetchers=fetchers, scorers=scorers).check(scoring=scoring, cpus=cpus)


def test_scorers_are_not_counted_where_nothing_is_scored() -> None:
    Engine(fetchers=2, scorers=9).check(scoring=False, cpus=2)


class _Made:
    """What `_in_order` reads of a dataset of made rows: batches of `position` and pickled `Row`s."""

    def __init__(self, *batches: list[int]) -> None:
        self.batches = batches

    def iter_batches(self, **_: Any) -> Iterator[pa.Table]:
        for positions in self.batches:
            rows = [pickle.dumps(Row(id=f"r{p}", source="in.jsonl", line=p)) for p in positions]
            yield pa.table({"position": pa.array(positions, pa.int64()), "row": pa.array(rows, pa.binary())})


def test_rows_in_input_order_are_handed_on_batch_by_batch() -> None:
    got = [[row.id for row in rows] for rows in _in_order(_Made([1, 2], [], [5, 9]), 2)]  # type: ignore[arg-type]
    assert got == [["r1", "r2"], [], ["r5", "r9"]]


@pytest.mark.parametrize("batches", [([2, 1],), ([3, 3],), ([1, 2], [2, 3]), ([4, 5], [3])])
def test_rows_out_of_input_order_stop_the_run_before_they_are_handed_on(batches: tuple[list[int], ...]) -> None:
    handed: list[Row] = []
    with pytest.raises(RuntimeError, match="out of input order"):
        handed.extend(row for rows in _in_order(_Made(*batches), 2) for row in rows)  # type: ignore[arg-type]
    assert len(handed) == (2 if len(batches) > 1 else 0)  # every batch before the first out of order, none after
