"""`tlmscore watch` on a live feed: lag from a span's end to its annotation, and the watcher's memory over time.

Starts a real `phoenix serve` (tests/servers/phoenix_server.py), then sends it OpenInference LLM
spans over OTLP/HTTP at `--rate` calls a second (default 20) for `--seconds` (default 300), each
span holding one of the labelled fixture calls (its request and response, as the OpenAI
instrumentation writes them) under a trace id of its own. Meanwhile `tlmscore watch` runs in a
process of its own (`tlmscore.watch`, the offline grounding scorer, polls 0.5 s apart), which
prints each row as it comes (once its annotation is stored) with the time; its RSS is sampled every
2 seconds. The lag of each span is that time less the span's end time.

Prints the lag (median, p95, max) over every span, and RSS (each minute's peak, and the slope
after the first `--late` window in MB per 1,000 calls).

`--synthetic CALLS` measures the watcher's own memory over a long feed, compressed: in this
process, the store's listing is replaced by a generator of CALLS new calls (the labelled calls
under ids of their own, 100 a poll) and the write-back by a no-op, while the pipeline, the
grounding scorer, the choices and the cursor saved after each batch run as they do. An hour at 20
calls/s is 72,000 calls. Prints RSS every 6,000 calls.

    python benchmarks/watch_bench.py [--rate 20] [--seconds 300]
    python benchmarks/watch_bench.py --synthetic 72000
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.servers.phoenix_server import PhoenixProcess  # noqa: E402
from tlmscore.watch import parse_time  # noqa: E402

PROJECT = "watch-bench"
LABELLED = ROOT / "fixtures" / "labelled" / "labelled.jsonl"


def _spans(calls: list[dict[str, Any]], first: int, count: int) -> bytes:
    """`count` LLM spans (calls `first`…) ending now, as an OTLP/HTTP protobuf request."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    def text(key: str, value: str) -> KeyValue:
        return KeyValue(key=key, value=AnyValue(string_value=value))

    now = time.time_ns()
    spans = []
    for n in range(first, first + count):
        call = calls[n % len(calls)]
        spans.append(Span(
            trace_id=(n + 1).to_bytes(16, "big"), span_id=(n + 1).to_bytes(8, "big"), name="OpenAI.Responses",
            kind=Span.SPAN_KIND_INTERNAL, start_time_unix_nano=now - 400_000_000, end_time_unix_nano=now,
            attributes=[text("openinference.span.kind", "LLM"), text("llm.model_name", call["request"]["model"]),
                        text("input.value", json.dumps(call["request"])), text("input.mime_type", "application/json"),
                        text("output.value", json.dumps(call["response"])),
                        text("output.mime_type", "application/json")]))
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=[text("openinference.project.name", PROJECT)]),
        scope_spans=[ScopeSpans(spans=spans)])])
    return bytes(request.SerializeToString())


def _feed(url: str, calls: list[dict[str, Any]], rate: float, seconds: float, sent: list[int]) -> None:
    """`rate` calls a second for `seconds`, sent every 0.5 s."""
    start = time.monotonic()
    tick = 0
    with httpx.Client(timeout=30) as client:
        while time.monotonic() - start < seconds:
            tick += 1
            due = int(tick * 0.5 * rate) - sent[0]
            if due > 0:
                reply = client.post(f"{url}/v1/traces", content=_spans(calls, sent[0], due),
                                    headers={"Content-Type": "application/x-protobuf"})
                reply.raise_for_status()
                sent[0] += due
            time.sleep(max(0.0, start + tick * 0.5 - time.monotonic()))


def _ends(url: str) -> dict[str, float]:
    """span id → its end time (Unix seconds), for every LLM span of the project."""
    ends: dict[str, float] = {}
    params: dict[str, Any] = {"span_kind": "LLM", "limit": 1000}
    while True:
        body = httpx.get(f"{url}/v1/projects/{PROJECT}/spans", params=params, timeout=60).json()
        ends |= {s["context"]["span_id"]: parse_time(s["end_time"]).timestamp() for s in body["data"]}
        if not body.get("next_cursor"):
            return ends
        params["cursor"] = body["next_cursor"]


WATCHER = """
import asyncio, sys, time
import tlmscore
from tlmscore.watch import watch

async def main():
    settings = tlmscore.Settings(offline=True, cache_dir=sys.argv[3])
    async for row in watch(sys.argv[1], state=sys.argv[2], poll=0.5, settings=settings):
        print(row.span_id, time.time(), flush=True)  # the row comes once its annotation is stored

asyncio.run(main())
"""


def _read_rows(stream: Any, annotated: dict[str, float]) -> None:
    """The watcher's lines (`SPAN_ID TIME`), as each span is annotated."""
    for line in stream:
        span, when = line.split()
        annotated[span] = float(when)


class _Synthetic:
    """A store that always has 100 new calls: the labelled calls under ids of their own, 50 ms apart."""

    address = f"phoenix://127.0.0.1:9/{PROJECT}"
    target = None

    def __init__(self, calls: list[dict[str, Any]]) -> None:
        self.calls, self.made = calls, 0

    def newer(self, since: Any) -> Iterator[Any]:
        from tlmscore.watch._feeds import Call, Read  # a call as a feed yields it (see `synthetic`)

        for _ in range(100):
            self.made += 1
            call, n = self.calls[self.made % len(self.calls)], self.made
            when = (dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=50 * n)).isoformat()
            record = {"id": f"{n:016x}", "request": call["request"], "response": call["response"], "origin": "phoenix",
                      "trace_id": f"{n:032x}", "span_id": f"{n:016x}"}
            yield Call(f"{n:016x}", when, when, Read(n, record))

    def annotated(self, calls: Any, name: str) -> dict[str, set[str]]:
        return {}

    def close(self) -> None:
        return


def synthetic(total: int, calls: list[dict[str, Any]]) -> None:
    """RSS of a watch over `total` synthetic calls, every 6,000 (the store and write-back replaced in-process).

    The watch loop's private module, on purpose: the figure is the watcher's own memory over an hour of calls,
    without a store's server or its HTTP in the process, and no public call takes a store object; `open_feed`
    and `deliver` are the two names it looks the store and the write-back up by.
    """
    import asyncio

    import tlmscore
    from tlmscore.annotate import Outcome
    from tlmscore.watch import _loop

    _loop.open_feed = lambda address, env: _Synthetic(calls)  # type: ignore[assignment,return-value]
    _loop.deliver = lambda rows, target, **_: Outcome("synthetic", rows=len(rows), written=len(rows))  # type: ignore[assignment]
    process = psutil.Process()

    async def run(folder: Path) -> None:
        done, began = 0, time.monotonic()
        rows = tlmscore.watch(f"phoenix://127.0.0.1:9/{PROJECT}", state=folder / "watch.json", poll=0,
                              settings=tlmscore.Settings(offline=True, cache_dir=folder / "cache"), batch=100)
        async for _ in rows:
            done += 1
            if done % 6000 == 0:
                rss = process.memory_info().rss / 2**20
                print(f"{done:>6} calls  {time.monotonic() - began:6.0f} s  RSS {rss:.1f} MB", flush=True)
            if done >= total:
                return

    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run(Path(folder)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=20.0, help="calls a second (default 20)")
    parser.add_argument("--seconds", type=float, default=300.0, help="how long the feed runs (default 300)")
    parser.add_argument("--synthetic", type=int, default=None, metavar="CALLS",
                        help="only the watcher's memory over CALLS synthetic calls, in this process")
    args = parser.parse_args()
    calls = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines() if line.strip()]
    if args.synthetic:
        synthetic(args.synthetic, calls)
        return
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        phoenix = PhoenixProcess(work / "phoenix")
        phoenix.working_dir.mkdir()
        phoenix.start()
        sent = [0]
        try:
            httpx.post(f"{phoenix.server.url}/v1/traces", content=_spans(calls, 10**9, 1),
                       headers={"Content-Type": "application/x-protobuf"}).raise_for_status()  # makes the project
            time.sleep(2)
            watcher = subprocess.Popen(
                [sys.executable, "-c", WATCHER, f"{phoenix.server.address}/{PROJECT}", str(work / "watch.json"),
                 str(work / "cache")], env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
            annotated: dict[str, float] = {}
            threading.Thread(target=_read_rows, args=(watcher.stdout, annotated), daemon=True).start()
            time.sleep(5)  # the watcher starts and scores the first span before the feed's clock starts
            feeding = threading.Thread(target=_feed, args=(phoenix.server.url, calls, args.rate, args.seconds, sent))
            began = time.monotonic()
            feeding.start()
            rss: list[tuple[float, int, float]] = []
            process = psutil.Process(watcher.pid)
            while feeding.is_alive():
                rss.append((time.monotonic() - began, sent[0], process.memory_info().rss / 2**20))
                time.sleep(2)
            deadline = time.monotonic() + 300
            while len(annotated) < sent[0] + 1 and time.monotonic() < deadline:
                time.sleep(1)
            ends = _ends(phoenix.server.url)
            watcher.terminate()
            watcher.wait(timeout=60)
        finally:
            phoenix.stop()
    lags = sorted(annotated[span] - end for span, end in ends.items() if span in annotated)
    print(f"feed: {sent[0]} calls at {args.rate:g}/s for {args.seconds:g} s; annotated {len(annotated) - 1} "
          f"(+1 the warm-up span)")
    print(f"lag span end → annotation stored: min {lags[0]:.2f} s, median {statistics.median(lags):.2f} s, "
          f"p95 {lags[int(0.95 * (len(lags) - 1))]:.2f} s, max {lags[-1]:.2f} s")
    minutes = [max(r for t, _, r in rss if m * 60 <= t < (m + 1) * 60) for m in range(int(rss[-1][0] // 60) + 1)]
    steady = [(n, r) for t, n, r in rss if t >= 90]  # after the 60 s late window first fills
    fit = statistics.linear_regression([n for n, _ in steady], [r for _, r in steady]) if len(steady) > 2 else None
    slope = fit.slope * 1000 if fit is not None else 0.0
    print(f"watcher RSS peak by minute: {', '.join(f'{r:.0f}' for r in minutes)} MB; "
          f"slope after 90 s {slope:+.2f} MB per 1,000 calls")


if __name__ == "__main__":
    main()
