"""The input meter: the files' total, a record's place in bytes, and no total where there is no size."""

from __future__ import annotations

import builtins
import gzip
from pathlib import Path

import pytest

from tlmscore.ingest import Location, read_located
from tlmscore.pipeline._meter import InputMeter


def test_a_records_place_counts_the_files_before_it_and_its_lines_offset(tmp_path: Path, demo_path: Path) -> None:
    second = tmp_path / "second.jsonl"
    second.write_bytes(demo_path.read_bytes())
    size = demo_path.stat().st_size
    meter = InputMeter([demo_path, second])
    assert meter.total == 2 * size
    located = list(read_located([demo_path, second]))
    places = [meter.position(where) for where, _ in located]
    assert places[0] == 0 and places == sorted(places)
    first_of_second = next(i for i, (where, _) in enumerate(located) if where.source == str(second))
    assert places[first_of_second] == size
    assert places[-1] == size + located[-1][0].offset < 2 * size


def test_gzip_offsets_are_not_counted_against_the_compressed_size(tmp_path: Path, demo_path: Path) -> None:
    packed = tmp_path / "demo.jsonl.gz"
    packed.write_bytes(gzip.compress(demo_path.read_bytes()))
    meter = InputMeter([packed])
    assert meter.total == packed.stat().st_size
    assert all(meter.position(where) == 0 for where, _ in read_located(packed))


def test_the_meter_opens_no_input_to_tell_a_gzip_file(tmp_path: Path, demo_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Whether a file is read decompressed is decided by its name where it is read (`open_log`), not again here."""
    packed = tmp_path / "demo.jsonl.gz"
    packed.write_bytes(gzip.compress(demo_path.read_bytes()))
    located = [where for where, _ in read_located([demo_path, packed])]

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("an input was opened")

    monkeypatch.setattr(Path, "open", refuse)
    monkeypatch.setattr(builtins, "open", refuse)
    meter = InputMeter([demo_path, packed])
    size = demo_path.stat().st_size
    assert [meter.position(w) for w in located] == [w.offset if w.source == str(demo_path) else size
                                                    for w in located]


def test_a_live_source_or_records_in_memory_have_no_total(demo_path: Path) -> None:
    assert InputMeter(["phoenix://127.0.0.1:6006/p"]).total is None
    assert InputMeter([demo_path, "phoenix://127.0.0.1:6006/p"]).total is None
    assert InputMeter([]).total is None
    assert InputMeter(["phoenix://127.0.0.1:6006/p"]).position(Location("x", 1, 10)) is None
