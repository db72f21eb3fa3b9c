"""Which reader a file needs: a table (Parquet or CSV) whose columns match no reader says so in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.support.paths import ROOT
from tlmscore.errors import TranscriptError
from tlmscore.stores import READERS, find_reader

TABLE = pd.DataFrame({"question": ["What is the refund window?"], "answer": ["30 days."], "score": [0.9]})


def _write(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"answers.{kind}"
    if kind == "parquet":
        TABLE.to_parquet(path)
    else:
        TABLE.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_a_table_no_reader_recognises_is_one_line_naming_what_each_reader_looks_for(kind: str, tmp_path: Path) -> None:
    path = _write(tmp_path, kind)
    with pytest.raises(TranscriptError) as raised:
        find_reader(str(path))
    message = str(raised.value)
    assert "\n" not in message and "invalid JSON" not in message
    assert message.startswith(f"{path}: a {'Parquet' if kind == 'parquet' else 'CSV'} table whose columns "
                              "(question, answer, score) match no reader")
    files = [reader for reader in READERS.values() if not reader.schemes]
    assert all(reader.wants for reader in files)  # every reader of files says what it looks for
    for reader in files:
        assert f"{reader.name}: {reader.wants}" in message


def test_the_command_line_says_it_in_one_line_and_stops(tmp_path: Path) -> None:
    path = _write(tmp_path, "parquet")
    done = subprocess.run([sys.executable, "-m", "tlmscore", "prepare", str(path), "-o", str(tmp_path / "out.jsonl"),
                           "--offline", "--cache-dir", str(tmp_path / "cache")], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, check=False, timeout=300)
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "match no reader" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_a_table_a_reader_recognises_and_a_named_format_are_still_read(tmp_path: Path) -> None:
    exported = ROOT / "fixtures" / "traces" / "mlflow" / "traces.parquet"
    found = find_reader(str(exported))
    assert found is not None and found.name == "mlflow-export"
    assert find_reader(str(_write(tmp_path, "csv")), "records") is None  # --format records: read as records
