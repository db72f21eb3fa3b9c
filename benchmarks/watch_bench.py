"""`tlmscore watch` on a live feed: lag from a span's end to its annotation, and the watcher's memory over time.

Starts a real `phoenix serve` (tests/servers/phoenix_server.py), then sends it OpenInference LLM
spans over OTLP/HTTP at `--rate` calls a second (default 20) for `--seconds` (default 300), each
span holding one of the labelled fixture calls (its request and response, as the OpenAI
instrumentation writes them) under a trace id of its own. Meanwhile `tlmscore watch` runs in a
process of its own with the offline grounding scorer; its RSS is sampled every 2 seconds. At the
end the annotations' `created_at` are read back: the lag of each span is `created_at - end_time`.

Prints the lag (median, p95, max) over every span, and RSS (first minute's peak, last minute's
peak, overall peak, and the slope over the run in MB per 1,000 calls).

    python benchmarks/watch_bench.py [--rate 20] [--seconds 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
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


def _annotations(url: str) -> dict[str, str]:
    """span id → the created_at of its annotation, for every span of the project that has one."""
    spans: list[dict[str, Any]] = []
    params: dict[str, Any] = {"span_kind": "LLM", "limit": 1000}
    while True:
        body = httpx.get(f"{url}/v1/projects/{PROJECT}/spans", params=params, timeout=60).json()
        spans += body["data"]
        if not body.get("next_cursor"):
            break
        params["cursor"] = body["next_cursor"]
    ends = {s["context"]["span_id"]: s["end_time"] for s in spans}
    found: dict[str, str] = {}
    ids = list(ends)
    for start in range(0, len(ids), 500):
        query: dict[str, Any] = {"span_ids": ids[start:start + 500], "limit": 10000,
                                 "include_annotation_names": "tlmscore.grounding"}
        while True:
            body = httpx.get(f"{url}/v1/projects/{PROJECT}/span_annotations", params=query, timeout=60).json()
            found |= {a["span_id"]: a["created_at"] for a in body["data"]}
            if not body.get("next_cursor"):
                break
            query["cursor"] = body["next_cursor"]
    return {span: f"{ends[span]}|{created}" for span, created in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=20.0, help="calls a second (default 20)")
    parser.add_argument("--seconds", type=float, default=300.0, help="how long the feed runs (default 300)")
    args = parser.parse_args()
    calls = [json.loads(line) for line in LABELLED.read_text(encoding="utf-8").splitlines() if line.strip()]
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
                [sys.executable, "-m", "tlmscore", "watch", f"{phoenix.server.address}/{PROJECT}", "--state",
                 str(work / "watch.json"), "--cache-dir", str(work / "cache"), "--offline", "--poll", "0.5",
                 "--status-every", "30"], env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE,
                text=True)
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
            while len(_annotations(phoenix.server.url)) < sent[0] + 1 and time.monotonic() < deadline:
                time.sleep(2)
            watcher.terminate()
            _, err = watcher.communicate(timeout=120)
            found = _annotations(phoenix.server.url)
        finally:
            phoenix.stop()
    lags = sorted((parse_time(v.split("|")[1]) - parse_time(v.split("|")[0])).total_seconds() for v in found.values())
    print(f"feed: {sent[0]} calls at {args.rate:g}/s for {args.seconds:g} s; annotated {len(found) - 1} "
          f"(+1 the warm-up span)")
    print(f"lag span end → annotation: median {statistics.median(lags):.2f} s, "
          f"p95 {lags[int(0.95 * (len(lags) - 1))]:.2f} s, max {lags[-1]:.2f} s")
    first = max(r for t, _, r in rss if t <= 60)
    last = max(r for t, _, r in rss if t >= rss[-1][0] - 60)
    half = [(n, r) for t, n, r in rss if t >= 30]
    fit = statistics.linear_regression([n for n, _ in half], [r for _, r in half]) if len(half) > 2 else None
    slope = fit.slope * 1000 if fit is not None else 0.0
    print(f"watcher RSS: first minute peak {first:.0f} MB, last minute peak {last:.0f} MB, "
          f"overall peak {max(r for *_, r in rss):.0f} MB, slope after 30 s {slope:+.2f} MB per 1,000 calls")
    print("last status:", err.strip().splitlines()[-1] if err.strip() else "-")


if __name__ == "__main__":
    main()
