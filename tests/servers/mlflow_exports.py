"""MLflow traces as users export them, recorded from the real `mlflow.openai.autolog()`.

`python -m tests.servers.mlflow_exports` starts a real `mlflow server` (SQLite, in a temporary folder),
sends every replayable call of the project's fixtures (`instrumented_calls.fixture_calls`: the same
91 calls, plain and streamed, as `fixtures/traces/`) through the official `openai` client to a local
fake of the API under `mlflow.openai.autolog()`, then exports the experiment the two ways MLflow's
documentation shows:

- `traces.jsonl`: `Trace.to_json()` of each trace of `mlflow.search_traces(return_type="list")`, one a line;
- `traces.parquet`: the `mlflow.search_traces()` DataFrame, saved with `DataFrame.to_parquet` (its `request`
  and `response` columns mix objects, lists and text, which Parquet cannot type: as a user must, those
  columns are written as JSON text first);
- `calls.jsonl`: the calls sent, in order (the raw records the rows are compared with).

All go to `fixtures/traces/mlflow/`. Autolog patches the `openai` package for the whole process, hence
the calls run in a process of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.servers.mlflow_server import QUIET, MlflowProcess
from tests.support.paths import ROOT

OUT = ROOT / "fixtures" / "traces" / "mlflow"
EXPERIMENT = "tlmscore-exports"


def record(url: str, calls: list[dict[str, Any]], out: Path) -> None:
    """Send `calls` under autolog to the server at `url`, then write both exports and the calls to `out`."""
    import mlflow
    import openai

    from tests.servers.instrumented_calls import _Fake, _send

    mlflow.set_tracking_uri(url)
    experiment = mlflow.set_experiment(EXPERIMENT)
    mlflow.openai.autolog()
    fake = _Fake()
    client = openai.OpenAI(base_url=fake.url, api_key="sk-fake", max_retries=0)
    for call in calls:
        fake.answer = call["response"]
        _send(client, call["request"])
    mlflow.flush_trace_async_logging()
    where = [experiment.experiment_id]
    order = ["timestamp_ms ASC"]
    traces = mlflow.search_traces(locations=where, order_by=order, return_type="list")
    out.mkdir(parents=True, exist_ok=True)
    (out / "traces.jsonl").write_text("".join(f"{trace.to_json()}\n" for trace in traces), encoding="utf-8")
    _parquet(mlflow.search_traces(locations=where, order_by=order), out / "traces.parquet")
    (out / "calls.jsonl").write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in calls),
                                     encoding="utf-8")


def _parquet(frame: Any, path: Path) -> None:
    """The DataFrame as Parquet, each column pyarrow cannot type (mixed kinds of value) as JSON text."""
    import pyarrow as pa

    for column in frame.columns:
        try:
            pa.array(frame[column])
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            frame[column] = [json.dumps(value) for value in frame[column]]
    frame.to_parquet(path)


def record_into(folder: Path, out: Path) -> MlflowProcess:
    """A server started in `folder` that holds the fixture calls, and its exports in `out` (left running)."""
    from tests.servers.instrumented_calls import fixture_calls

    server = MlflowProcess(folder)
    server.start()
    try:
        listed = folder / "calls.json"
        listed.write_text(json.dumps(fixture_calls()), encoding="utf-8")
        # run as `-c` outside any git checkout, so no local path, branch or commit lands in the traces' tags
        code = "import sys; from tests.servers.mlflow_exports import main; main(sys.argv[1:])"
        env = {**os.environ, **QUIET, "PYTHONPATH": str(ROOT), "GIT_DIR": str(folder / "no-git")}
        subprocess.run([sys.executable, "-c", code, server.url, str(listed), str(out)],
                       check=True, cwd=folder, env=env, timeout=900, capture_output=True)
    except BaseException:
        server.stop()
        raise
    return server


def remake_fixtures(out: Path = OUT) -> None:
    """`fixtures/traces/mlflow/`, made again: a server started and stopped for it."""
    with tempfile.TemporaryDirectory() as folder:
        record_into(Path(folder), out).stop()


def main(argv: list[str]) -> None:
    if not argv:
        remake_fixtures()
        return
    url, listed, out = argv
    record(url, json.loads(Path(listed).read_text(encoding="utf-8")), Path(out))


if __name__ == "__main__":
    main(sys.argv[1:])
