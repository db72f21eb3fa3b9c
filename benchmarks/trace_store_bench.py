"""Langfuse and LangSmith exports: CPU seconds and peak memory of reading them, against the same calls as records.

Writes N calls as a Langfuse observation export (each generation beside a span, as
`observations_v2` rows) and as a LangSmith run export (each `llm` run beside its chain), both as
JSON lines and as Parquet, and the same N calls as transcript records; then reads each file with
`tlmscore.read_transcripts` in a child process and prints CPU seconds, records/s (CPU) and peak RSS.
Memory should stay flat as N grows: JSON lines are read a line at a time, Parquet a batch of rows
at a time.

    python benchmarks/trace_store_bench.py [--sizes 2000 20000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from read_cost import measure

INSTRUCTIONS = "Answer briefly."


def _call(i: int) -> tuple[dict[str, Any], dict[str, Any]]:
    text = f"Answer {i}: " + "the station logged twelve degrees and light winds. " * 8
    message = {"id": f"msg_{i}", "type": "message", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}
    request = {"model": "gpt-5", "input": f"Weather at station {i}?", "instructions": INSTRUCTIONS}
    response = {"id": f"resp_{i}", "object": "response", "created_at": 1, "status": "completed", "model": "gpt-5",
                "output": [message]}
    return request, response


def _observations(i: int) -> list[dict[str, Any]]:
    request, response = _call(i)
    trace = f"{i:032x}"
    base = {"trace_id": trace, "project_id": "p", "environment": "default", "start_time": "2026-11-25 10:00:00.000000",
            "metadata": "{}", "level": "DEFAULT"}
    prompt = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": request["input"]}]
    return [{**base, "id": f"{2 * i:016x}", "type": "SPAN", "name": "agent", "parent_observation_id": "",
             "input": "", "output": "", "provided_model_name": ""},
            {**base, "id": f"{2 * i + 1:016x}", "type": "GENERATION", "name": "OpenAI-generation",
             "parent_observation_id": f"{2 * i:016x}", "input": json.dumps(prompt),
             "output": json.dumps(response["output"][0]), "provided_model_name": "gpt-5"}]


def _runs(i: int) -> list[dict[str, Any]]:
    request, response = _call(i)
    chain, llm = f"00000000-0000-7000-8000-{2 * i:012x}", f"00000000-0000-7000-8000-{2 * i + 1:012x}"
    base = {"trace_id": chain, "start_time": "2026-11-25T10:00:00+00:00", "extra": json.dumps({"metadata": {}})}
    return [{**base, "id": chain, "name": "agent", "run_type": "chain", "parent_run_id": None,
             "inputs": json.dumps({"question": request["input"]}), "outputs": json.dumps({"answer": "…"})},
            {**base, "id": llm, "name": "OpenAI", "run_type": "llm", "parent_run_id": chain,
             "inputs": json.dumps(request), "outputs": json.dumps(response)}]


def write(folder: Path, size: int) -> dict[str, Path]:
    import pandas as pd

    paths: dict[str, Path] = {}
    for name, rows in (("langfuse", _observations), ("langsmith", _runs)):
        table = [row for i in range(size) for row in rows(i)]
        paths[f"{name} jsonl"] = folder / f"{name}-{size}.jsonl"
        paths[f"{name} jsonl"].write_text("".join(json.dumps(r) + "\n" for r in table), encoding="utf-8")
        paths[f"{name} parquet"] = folder / f"{name}-{size}.parquet"
        pd.DataFrame(table).to_parquet(paths[f"{name} parquet"], row_group_size=4096)
    paths["records"] = folder / f"records-{size}.jsonl"
    with paths["records"].open("w", encoding="utf-8") as out:
        for i in range(size):
            request, response = _call(i)
            out.write(json.dumps({"request": request, "response": response}) + "\n")
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            for label, path in write(Path(tmp), size).items():
                print(f"{size}: {label:17} {measure(path)}  ({path.stat().st_size // 1024:,} KB)")


if __name__ == "__main__":
    main()
