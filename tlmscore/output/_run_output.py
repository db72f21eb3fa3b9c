"""`RunOutput`: the file a run writes, resumably: its manifest, its checkpoint and the output itself.

Opening one checks a resume against the manifest of the run it continues and writes this run's
(`_manifest`), then opens the checkpoint (`_checkpoint`) with the rows an earlier run saved
(`done`, under this run's input names). Each chunk of final rows is written once, to the
checkpoint; `finish` makes the output file from it through the output's sink.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tlmscore.output._checkpoint import Checkpoint, Done
from tlmscore.output._manifest import start_run
from tlmscore.output._row import Row


class RunOutput:
    """An output file made resumably: manifest first, rows checkpointed chunk by chunk, the file at the end."""

    def __init__(self, path: Path, manifest: Mapping[str, Any], *, resume: bool) -> None:
        names = start_run(path, manifest, resume=resume)
        self.path = path
        self._checkpoint = Checkpoint(path, resume=resume)
        self.done = Done.of((names.get(source, source), line) for source, line in self._checkpoint.done)
        """The `(source, line)` of every row an earlier run saved, as this run names its inputs."""

    @property
    def earlier(self) -> int:
        """How many rows an earlier run saved."""
        return len(self._checkpoint.done)

    def write(self, rows: Sequence[Row]) -> None:
        """One chunk of final rows, saved and synced."""
        self._checkpoint.write(rows)

    def finish(self, chunk_size: int, columns: Sequence[str]) -> int:
        """The output file, from every saved row (`columns`: those of an output with no rows); its row count."""
        return self._checkpoint.finish(chunk_size, columns)
