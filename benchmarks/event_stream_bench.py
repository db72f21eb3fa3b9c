"""Event streams: CPU seconds and peak memory of reading a stream log, against the same responses as records.

Writes N streamed responses as JSON lines of Responses events (each answer in 20 text deltas) and the
same N responses as transcript records, then reads each file with `tlmscore.read_transcripts` in a
child process and prints CPU seconds, records/s (CPU) and peak RSS. Memory should stay flat as N
grows: a sequential stream holds one response's state at a time.

    python benchmarks/event_stream_bench.py [--sizes 2000 20000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from read_cost import measure


def _response(i: int, text: str, status: str) -> dict[str, object]:
    message = {"id": f"msg_{i}", "type": "message", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": text, "annotations": []}]}
    return {"id": f"resp_{i}", "object": "response", "created_at": 1, "status": status, "model": "gpt-5",
            "output": [message] if status == "completed" else []}


def _events(i: int, text: str) -> list[dict[str, object]]:
    pieces = [text[k:k + len(text) // 20 + 1] for k in range(0, len(text), len(text) // 20 + 1)]
    events: list[dict[str, object]] = [
        {"type": "response.created", "response": _response(i, text, "in_progress")},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"id": f"msg_{i}", "type": "message", "status": "in_progress", "role": "assistant", "content": []}},
    ]
    events += [{"type": "response.output_text.delta", "item_id": f"msg_{i}", "output_index": 0, "content_index": 0,
                "delta": p} for p in pieces]
    events.append({"type": "response.completed", "response": _response(i, text, "completed")})
    return [{**e, "sequence_number": n} for n, e in enumerate(events)]


def write(folder: Path, size: int) -> tuple[Path, Path]:
    stream, records = folder / f"stream-{size}.jsonl", folder / f"records-{size}.jsonl"
    with stream.open("w") as s, records.open("w") as r:
        for i in range(size):
            text = f"Answer {i}: " + "the station logged twelve degrees and light winds. " * 8
            s.writelines(json.dumps(e) + "\n" for e in _events(i, text))
            r.write(json.dumps({"request": {"input": "Weather?"}, "response": _response(i, text, "completed")}) + "\n")
    return stream, records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            stream, records = write(Path(tmp), size)
            print(f"{size}: stream  {measure(stream)}  ({stream.stat().st_size // 1024:,} KB)")
            print(f"{size}: records {measure(records)}  ({records.stat().st_size // 1024:,} KB)")


if __name__ == "__main__":
    main()
