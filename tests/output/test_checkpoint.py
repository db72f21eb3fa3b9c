"""The checkpoint behind `--resume`: chunks saved as they finish, the output made from them at the end."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tlmscore import Row
from tlmscore.output import Checkpoint, open_sink
from tlmscore.output._checkpoint import checkpoint_path


def records(start: int, stop: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "source": "log.jsonl", "line": i, "prompt": f"prompt {i}", "warnings": [f"w{i}"],
             "n_urls": i % 3, **extra} for i in range(start, stop)]


def rows(start: int, stop: int, **extra: Any) -> list[Row]:
    return [Row.from_record(record) for record in records(start, stop, **extra)]


def test_parquet_chunks_are_part_files_merged_in_order(tmp_path: Path) -> None:
    out = tmp_path / "o.parquet"
    checkpoint = Checkpoint(out, resume=False)
    for start in (1, 4, 7):
        checkpoint.write(rows(start, start + 3))
    parts = sorted(checkpoint_path(out).glob("part-*.parquet"))
    assert [p.name for p in parts] == ["part-000001.parquet", "part-000002.parquet", "part-000003.parquet"]
    assert checkpoint.finish() == 9
    df = pd.read_parquet(out)
    assert list(df.line) == list(range(1, 10))
    assert list(df.warnings.iloc[0]) == ["w1"] and df.n_urls.dtype == "int64"
    assert not checkpoint_path(out).exists()


def test_a_single_part_becomes_the_output_unchanged(tmp_path: Path) -> None:
    out = tmp_path / "o.parquet"
    checkpoint = Checkpoint(out, resume=False)
    checkpoint.write(rows(1, 6))
    part = checkpoint_path(out) / "part-000001.parquet"
    written = part.read_bytes()
    assert checkpoint.finish() == 5
    assert out.read_bytes() == written
    assert pq.ParquetFile(out).metadata.row_group(0).column(0).compression == "ZSTD"


def test_rows_that_repeat_the_same_pages_compress_to_a_small_file(tmp_path: Path) -> None:
    """Prompts of one batch quote the same pages; the Parquet encoding must find those repeats."""
    rng = random.Random(3)  # noqa: S311 -- test data, not a secret
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    pages = [" ".join(rng.choice(words) for _ in range(4000)) for _ in range(8)]
    batch = records(0, 300)
    for row in batch:
        row["prompt"] = "\n".join(rng.sample(pages, 4))
    out = tmp_path / "o.parquet"
    checkpoint = Checkpoint(out, resume=False)
    checkpoint.write([Row.from_record(row) for row in batch])
    checkpoint.finish()
    text = sum(len(row["prompt"]) for row in batch)
    assert out.stat().st_size < text / 50  # compressed a block at a time, it kept about a tenth


def test_resume_skips_saved_parts_and_drops_a_half_written_one(tmp_path: Path) -> None:
    out = tmp_path / "o.parquet"
    first = Checkpoint(out, resume=False)
    first.write(rows(1, 4))
    (checkpoint_path(out) / "part-000002.tmp").write_bytes(b"PAR1 cut off by a kill")
    second = Checkpoint(out, resume=True)
    assert second.done == {("log.jsonl", i) for i in range(1, 4)}
    assert not list(checkpoint_path(out).glob("*.tmp"))
    second.write(rows(4, 6, scorer="grounding", score=0.5))
    assert second.finish() == 5
    df = pd.read_parquet(out)
    assert list(df.line) == [1, 2, 3, 4, 5]
    assert df.score.isna().tolist() == [True, True, True, False, False]
    assert df.scorer.tolist()[-1] == "grounding"


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl", ".csv"])
def test_resuming_a_finished_run_keeps_every_row(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"o{suffix}"
    done = Checkpoint(out, resume=False)
    done.write(rows(1, 4))
    done.finish()
    again = Checkpoint(out, resume=True)
    assert len(again.done) == 3
    assert again.finish() == 3
    assert out.exists() and not checkpoint_path(out).exists()


def test_without_resume_an_old_checkpoint_is_discarded(tmp_path: Path) -> None:
    out = tmp_path / "o.parquet"
    Checkpoint(out, resume=False).write(rows(1, 4))
    fresh = Checkpoint(out, resume=False)
    assert not fresh.done and not checkpoint_path(out).exists()
    fresh.write(rows(10, 12))
    assert fresh.finish() == 2


def test_jsonl_checkpoint_drops_a_cut_off_last_line(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    Checkpoint(out, resume=False).write(rows(1, 3))
    with checkpoint_path(out).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(records(3, 4)[0])[:20])
    whole = len(checkpoint_path(out).read_bytes()) - 20
    resumed = Checkpoint(out, resume=True)
    assert resumed.done == {("log.jsonl", 1), ("log.jsonl", 2)}
    # cut back to the last whole line in place (one truncate, which a kill cannot leave half done)
    assert len(checkpoint_path(out).read_bytes()) == whole
    assert checkpoint_path(out).read_bytes().count(b"\n") == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    assert resumed.finish() == 2
    assert list(pd.read_json(out, lines=True).line) == [1, 2]


def test_csv_checkpoint_drops_a_row_cut_anywhere_and_resumes_to_the_bytes_of_one_run(tmp_path: Path) -> None:
    """A CSV output is its own checkpoint: a kill may cut the row being written anywhere, even inside a
    quoted cell that holds line breaks and quotes; a resume keeps the whole rows and appends the rest."""
    odd = {"prompt": 'a "quoted"\r\nprompt\nover lines, with commas'}
    sink = open_sink(tmp_path / "one-run.csv")
    sink.write(rows(1, 4, **odd))
    sink.close()
    one_run = (tmp_path / "one-run.csv").read_bytes()
    out = tmp_path / "o.csv"
    Checkpoint(out, resume=False).write(rows(1, 3, **odd))
    whole = checkpoint_path(out).read_bytes()
    third = one_run[len(whole):]
    assert one_run.startswith(whole) and third.count(b"\n") > 1
    for cut in [*range(len(third)), *range(-len(whole), -len(whole) + 40)]:  # the third row, then the header
        checkpoint_path(out).write_bytes(whole + third[:cut] if cut >= 0 else whole[:cut + len(whole)])
        resumed = Checkpoint(out, resume=True)
        kept = {("log.jsonl", 1), ("log.jsonl", 2)} if cut >= 0 else set()
        assert resumed.done == kept, cut
        assert checkpoint_path(out).read_bytes() == (whole if cut >= 0 else b""), cut
    resumed.write(rows(1, 4, **odd))
    assert resumed.finish() == 3
    assert out.read_bytes() == one_run
    assert list(pd.read_csv(out).prompt) == [odd["prompt"]] * 3


def test_an_empty_run_leaves_a_readable_file(tmp_path: Path) -> None:
    out = tmp_path / "o.parquet"
    assert Checkpoint(out, resume=False).finish() == 0
    assert len(pd.read_parquet(out)) == 0


def test_an_empty_csv_run_keeps_its_header(tmp_path: Path) -> None:
    out = tmp_path / "o.csv"
    assert Checkpoint(out, resume=False).finish(columns=("id", "line", "error")) == 0
    table = pd.read_csv(out)
    assert list(table.columns) == ["id", "line", "error"]
    assert len(table) == 0


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_rows_keep_unicode_and_awkward_values(tmp_path: Path, suffix: str) -> None:
    """NaN becomes null, Unicode is kept as written, and a value orjson refuses still gets written."""
    out = tmp_path / f"o{suffix}"
    checkpoint = Checkpoint(out, resume=False)
    odd = {"scorer": "grounding", "score": float("nan"), "prompt": "Zürich \u2013 東京 \u2028 \"q\"",
           "details": {1: "int key", "big": 2**70, "inner": float("inf")}}
    checkpoint.write(rows(1, 3, **odd))
    assert checkpoint.finish() == 2
    if suffix == ".jsonl":
        text = out.read_text(encoding="utf-8")
        assert "Zürich \u2013 東京" in text and "\\u00fc" not in text
        first = json.loads(text.split("\n")[0])  # not splitlines(): U+2028 is a line break to it
    else:
        first = pd.read_parquet(out).iloc[0].to_dict()
    first["details"] = json.loads(first["details"])  # JSON text in every file format
    assert first["prompt"] == odd["prompt"]
    assert first["score"] is None or first["score"] != first["score"]  # null in JSON, NaN in Parquet
    assert first["details"]["big"] == 2**70 and first["details"]["1"] == "int key"
    assert first["details"]["inner"] is None


def test_a_clean_jsonl_checkpoint_is_not_rewritten_on_resume(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    Checkpoint(out, resume=False).write(rows(1, 4))
    before = checkpoint_path(out).stat()
    resumed = Checkpoint(out, resume=True)
    after = checkpoint_path(out).stat()
    assert len(resumed.done) == 3
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


def test_jsonl_checkpoint_keeps_a_whole_last_row_that_lost_only_its_newline(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    Checkpoint(out, resume=False).write(rows(1, 3))
    with checkpoint_path(out).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(records(3, 4)[0]))  # written whole, killed before its newline
    resumed = Checkpoint(out, resume=True)
    assert resumed.done == {("log.jsonl", 1), ("log.jsonl", 2), ("log.jsonl", 3)}
    assert checkpoint_path(out).read_bytes().endswith(b"}\n")
    assert resumed.finish() == 3
