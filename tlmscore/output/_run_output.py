"""`RunOutput`: the file a run writes, resumably: its manifest, its checkpoint and the output itself.

Opening one checks a resume against the manifest of the run it continues and writes this run's
(`_manifest`), then opens the checkpoint (`_checkpoint`, which it is) with the rows an earlier run
saved (`skip`, under this run's input names; `saved`, the rows themselves). Each chunk of final
rows is written once (`write`): for JSONL and CSV to the output file itself, appended by the
sink's `RowWriter` and renamed by `finish`; for Parquet as a part file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tlmscore.output._checkpoint import Checkpoint, Done
from tlmscore.output._manifest import start_run


class RunOutput(Checkpoint):
    """An output file made resumably: manifest first, rows checkpointed chunk by chunk, the file at the end."""

    def __init__(self, path: Path, manifest: Mapping[str, Any], *, resume: bool) -> None:
        names = start_run(path, manifest, resume=resume)
        super().__init__(path, resume=resume)
        self.earlier = len(self.done)
        """How many rows an earlier run saved."""
        self.skip = Done.of((names.get(source, source), line) for source, line in self.done)
        """The `(source, line)` of every row an earlier run saved, as this run names its inputs."""
