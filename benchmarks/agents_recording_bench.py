"""What recording costs the agent: CPU seconds on the agent's thread per Responses span, with and without
`tlmscore.agents.RecordingProcessor`, and with a disk that never answers.

Spans are made through the SDK's public `trace` and `response_span`, holding a real recorded
`Response` of the shared corpus (`../shared/corpus/responses`) and a short input. CPU time of the
calling thread (`time.thread_time`) is measured, not wall time: the machine may be shared. The
writer thread's work is what the process spent beyond that.

    python benchmarks/agents_recording_bench.py [--spans 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from agents.tracing import TracingProcessor, response_span, set_trace_processors, trace
from openai.types.responses import Response

from tlmscore.agents import RecordingProcessor

ROOT = Path(__file__).resolve().parent.parent
RESPONSE = "openai-web-search-tool.1.json"


class Nothing(TracingProcessor):
    """The baseline: a processor that does nothing."""

    def on_trace_start(self, trace: Any) -> None:
        """Nothing."""

    def on_trace_end(self, trace: Any) -> None:
        """Nothing."""

    def on_span_start(self, span: Any) -> None:
        """Nothing."""

    def on_span_end(self, span: Any) -> None:
        """Nothing."""

    def shutdown(self) -> None:
        """Nothing."""

    def force_flush(self) -> None:
        """Nothing."""


def _corpus() -> Path:
    return next(p / "shared" / "corpus" / "responses" for p in (ROOT.parent, ROOT.parent.parent)
                if (p / "shared").is_dir())


def _spans(processor: TracingProcessor, response: Response, count: int) -> tuple[float, float]:
    """(agent-thread CPU seconds, process CPU seconds) for `count` Responses spans under `processor`."""
    set_trace_processors([processor])
    items: list[Any] = [{"role": "user", "content": "What happened in the news today?"}]
    process, thread = time.process_time(), time.thread_time()
    with trace("bench"):
        for _ in range(count):
            with response_span(response=response) as span:
                span.span_data.input = items
    spent = time.thread_time() - thread
    processor.force_flush()
    set_trace_processors([])
    return spent, time.process_time() - process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=2000)
    count = parser.parse_args().spans
    body = json.loads((_corpus() / RESPONSE).read_text(encoding="utf-8"))
    body["usage"]["input_tokens_details"].setdefault("cache_write_tokens", 0)  # a field newer SDKs demand
    response = Response.model_validate(body)
    with tempfile.TemporaryDirectory() as folder:
        base, _ = _spans(Nothing(), response, count)
        recorder = RecordingProcessor(Path(folder) / "calls.jsonl", max_bytes=8 * 2**20)
        agent, total = _spans(recorder, response, count)
        recorder.shutdown()
        pipe = Path(folder) / "stuck.jsonl"
        os.mkfifo(pipe)  # never opened for reading: the writer blocks on its first record
        stuck = RecordingProcessor(pipe, queue_size=100)
        set_trace_processors([stuck])
        thread = time.thread_time()
        with trace("bench"):
            for _ in range(count):
                with response_span(response=response) as span:
                    span.span_data.input = []
        blocked = time.thread_time() - thread
        set_trace_processors([])
        written = sum(p.stat().st_size for p in Path(folder).glob("calls.jsonl*"))
    print(json.dumps({
        "spans": count, "response_bytes": len(response.model_dump_json()),
        "agent_cpu_us_per_span_baseline": round(base / count * 1e6, 1),
        "agent_cpu_us_per_span_recording": round(agent / count * 1e6, 1),
        "writer_cpu_us_per_span": round((total - agent) / count * 1e6, 1),
        "agent_cpu_us_per_span_disk_blocked": round(blocked / count * 1e6, 1),
        "dropped_when_blocked": stuck.dropped, "bytes_written": written}, indent=2))
    # The stuck writer is a daemon thread, blocked opening the pipe: it ends with the process.


if __name__ == "__main__":
    main()
