"""OpenAI Agents SDK calls recorded as transcript records, for `tlmscore score` to read.

The SDK's own trace exporter keeps only a Responses span's `response_id` and usage. Add
`RecordingProcessor(path)` as a trace processor and each Responses span is written as one JSON
line of the record contract: the span's `input` and the full `Response`, with `origin="agents"`,
`trace_id`, `span_id`, and in `metadata` the agent's name, the workflow, and the outputs of the
trace's tool spans that ended before it. A span the SDK recorded without its data
(`trace_include_sensitive_data=False`) keeps its `response_id` alone (`tlmscore score --hydrate`
fills it in from the stored response); a span that failed is an error record.

The agent is never made to wait on the disk: spans are put on a bounded queue that a background
thread writes out; when the queue is full a record is dropped and a warning counts the drops.
Files rotate by size: `path` is the newest, then `path.1`, `path.2`, … up to `backups`.

Needs `openai-agents` (`pip install 'tlmscore[agents]'`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

try:
    from agents.tracing import AgentSpanData, FunctionSpanData, ResponseSpanData, TracingProcessor
except ImportError as exc:  # pragma: no cover  (the extra is installed wherever the tests run)
    raise ImportError("tlmscore.agents needs the OpenAI Agents SDK: pip install 'tlmscore[agents]'") from exc

from tlmscore.stores.openai import request_from

if TYPE_CHECKING:
    from agents.tracing import Span, Trace

__all__ = ["RecordingProcessor"]

ORIGIN = "agents"
_LOG = logging.getLogger(__name__)
_WARN_EVERY = 100


@dataclass
class _Call:
    """What one Responses span leaves for the writer: copied on the agent's side, encoded on the writer's."""

    trace_id: str
    span_id: str
    span: Span[Any]
    items: str | list[Any]
    metadata: dict[str, Any]


@dataclass
class _Trace:
    """What is known of an open trace: its name, its spans' parents, agent spans' names, tool outputs."""

    workflow: str | None = None
    parents: dict[str, str | None] = field(default_factory=dict)
    agents: dict[str, str] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)

    def agent_of(self, span_id: str | None) -> str | None:
        """The name of the nearest agent span above `span_id`."""
        seen: set[str] = set()
        while span_id is not None and span_id not in seen:
            if span_id in self.agents:
                return self.agents[span_id]
            seen.add(span_id)
            span_id = self.parents.get(span_id)
        return None


def _dumped(value: Any) -> Any:
    """SDK objects (pydantic models) as JSON values, as the server sent them."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_unset=True, warnings=False)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _record(call: _Call) -> dict[str, Any]:
    """The transcript record of one Responses span."""
    data = call.span.span_data
    base: dict[str, Any] = {"id": call.span_id, "origin": ORIGIN, "trace_id": call.trace_id,
                            "span_id": call.span_id, "metadata": call.metadata}
    if call.span.error is not None:
        return base | {"error": {"message": f"the Responses call failed: {call.span.error.get('message')}",
                                 "data": call.span.error.get("data")}}
    if not isinstance(data, ResponseSpanData) or data.response is None:
        rid = data.export().get("response_id")
        return base | ({"response_id": rid} if rid else {"error": {"message": "the span holds no response "
                                                                               "and no response id"}})
    response = _dumped(data.response)
    return base | {"request": request_from(response, call.items, include=()), "response": response}


class _Files:
    """JSON lines appended to `path`, moved to `path.1`, `path.2`, … once a file reaches `max_bytes`."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        self.path, self.max_bytes, self.backups = path, max_bytes, backups
        self.handle: IO[bytes] | None = None
        self.size = 0
        self.regular = True

    def write(self, line: bytes) -> None:
        if self.handle is not None and self.regular and self.size and self.size + len(line) > self.max_bytes:
            self.close()
            self._rotate()
        handle = self.handle or self._open()
        handle.write(line)
        handle.flush()
        self.size += len(line)

    def _open(self) -> IO[bytes]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("ab")  # a named pipe blocks here until read: on the writer thread only
        info = os.fstat(handle.fileno())
        self.handle, self.size, self.regular = handle, info.st_size, stat.S_ISREG(info.st_mode)
        return handle

    def _rotate(self) -> None:
        for n in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{n}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{n + 1}"))
        self.path.replace(self.path.with_name(f"{self.path.name}.1"))

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


class RecordingProcessor(TracingProcessor):
    """A trace processor that writes each Responses span as a transcript record to `path`.

    `max_bytes` is the size at which a file is rotated (`path` → `path.1` …), `backups` how many
    rotated files are kept, `queue_size` how many records may wait for the disk before new ones are
    dropped (`dropped` counts them). `force_flush()` waits until every queued record is written;
    `shutdown()` does so and stops the writer (the SDK calls it at exit).
    """

    def __init__(self, path: str | os.PathLike[str], *, max_bytes: int = 64 * 2**20, backups: int = 5,
                 queue_size: int = 10_000) -> None:
        if max_bytes < 1 or backups < 1 or queue_size < 1:
            raise ValueError("max_bytes, backups and queue_size must be at least 1")
        self.path = Path(path)
        self._files = _Files(self.path, max_bytes, backups)
        self._queue: queue.Queue[_Call | None] = queue.Queue(maxsize=queue_size)
        self._lock = threading.Lock()
        self._traces: dict[str, _Trace] = {}
        self._dropped = 0
        self._stopped = False
        self._writer = threading.Thread(target=self._drain, name="tlmscore-agents-recorder", daemon=True)
        self._writer.start()

    @property
    def dropped(self) -> int:
        """Records dropped because the queue was full."""
        return self._dropped

    def on_trace_start(self, trace: Trace) -> None:
        """Remember the trace's workflow name."""
        with self._lock:
            self._traces.setdefault(trace.trace_id, _Trace()).workflow = trace.name

    def on_trace_end(self, trace: Trace) -> None:
        """Forget the trace (its records are queued already)."""
        with self._lock:
            self._traces.pop(trace.trace_id, None)

    def on_span_start(self, span: Span[Any]) -> None:
        """Remember the span's parent, and an agent span's name."""
        with self._lock:
            known = self._traces.setdefault(span.trace_id, _Trace())
            known.parents[span.span_id] = span.parent_id
            if isinstance(span.span_data, AgentSpanData):
                known.agents[span.span_id] = span.span_data.name

    def on_span_end(self, span: Span[Any]) -> None:
        """Keep a tool span's output for the trace; queue a Responses span's record (never waiting)."""
        data = span.span_data
        with self._lock:
            known = self._traces.setdefault(span.trace_id, _Trace())
            if isinstance(data, FunctionSpanData):
                known.tools.append({"name": data.name, "span_id": span.span_id, "input": data.input,
                                    "output": None if data.output is None else str(data.output)})
                return
            if not isinstance(data, ResponseSpanData):
                return
            metadata = {"agent": known.agent_of(span.parent_id), "workflow": known.workflow,
                        "tools": list(known.tools), "parent_id": span.parent_id,
                        "started_at": span.started_at, "ended_at": span.ended_at}
        items = data.input if isinstance(data.input, str) else list(data.input or [])
        self._put(_Call(span.trace_id, span.span_id, span, items, metadata))

    def _put(self, call: _Call) -> None:
        with contextlib.suppress(queue.Full):
            if not self._stopped:  # after shutdown nothing drains the queue
                self._queue.put_nowait(call)
                return
        with self._lock:
            self._dropped += 1
            dropped = self._dropped
        if dropped == 1 or dropped % _WARN_EVERY == 0:
            _LOG.warning("tlmscore.agents: %s is not keeping up (%d records waiting): span %s not "
                         "recorded; %d dropped so far", self.path, self._queue.maxsize, call.span_id, dropped)

    def _drain(self) -> None:
        import orjson  # noqa: PLC0415  (imported on the writer thread, not the agent's)

        while (call := self._queue.get()) is not None:
            try:
                self._files.write(orjson.dumps(_record(call), default=_dumped, option=orjson.OPT_APPEND_NEWLINE))
            except Exception as exc:  # noqa: BLE001  (a record that cannot be written must not stop the writer)
                _LOG.warning("tlmscore.agents: span %s not recorded to %s: %s: %s", call.span_id, self.path,
                             type(exc).__name__, exc)
            self._queue.task_done()
        self._files.close()
        self._queue.task_done()

    def force_flush(self) -> None:
        """Wait until every queued record is written."""
        self._queue.join()

    def shutdown(self) -> None:
        """Write every queued record, then stop the writer and close the file."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._queue.put(None)
        self._writer.join()
        if self._dropped:
            _LOG.warning("tlmscore.agents: %d records were dropped (the queue was full)", self._dropped)
