"""How the Ray engine sizes its shuffles, without a cluster: a partition's records are bounded, not its count."""

from __future__ import annotations

import pytest

from tlmscore.ray._engine import ROWS_PER_PARTITION, Engine


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
