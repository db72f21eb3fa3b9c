"""`tlmscore.agents.RecordingProcessor`: a real Agents SDK `Runner` against a local fake of the OpenAI API."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tlmscore
from tests.servers.openai_server import OpenAIServer
from tlmscore.cli import main

agents = pytest.importorskip("agents", reason="the agents extra (openai-agents) is not installed")
from openai import AsyncOpenAI  # noqa: E402  (after the skip: the SDK comes with the extra)

from tlmscore.agents import RecordingProcessor  # noqa: E402

TOOL_CALL, ANSWER = "openai-function-call", "openai-function-answer"  # in fixtures/responses/


class AgentServer(OpenAIServer):
    """Answers a first call with a recorded tool call and a call holding its output with a recorded answer.

    Like the API, the answer echoes the request's instructions, tools and previous response id.
    """

    def answer(self, body: dict[str, Any]) -> dict[str, Any] | None:
        items = body.get("input") if isinstance(body.get("input"), list) else []
        done = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items)
        recorded = json.loads((self.responses / f"{ANSWER if done else TOOL_CALL}.json").read_text(encoding="utf-8"))
        return {**recorded, "instructions": body.get("instructions"), "tools": body.get("tools", []),
                "previous_response_id": body.get("previous_response_id")}


def _answer_text(responses: Path) -> str:
    """The text of the recorded answer: what a run's final output is."""
    (message,) = json.loads((responses / f"{ANSWER}.json").read_text(encoding="utf-8"))["output"]
    return str(message["content"][0]["text"])


def _weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny and 21 degrees in {city}."


@pytest.fixture
def server(recorded_responses: Path) -> Iterator[AgentServer]:
    with AgentServer(recorded_responses) as fake:
        yield fake


@pytest.fixture
def url(server: AgentServer) -> Iterator[str]:
    """The fake's address; the SDK's default trace exporter (to the internet) is replaced in each run."""
    yield server.url
    agents.set_trace_processors([])


def _run(processor: RecordingProcessor, url: str, times: int = 1, config: Any = None) -> list[Any]:
    """`times` runs of an agent with a function tool, on one event loop and one client of the fake."""
    agents.set_trace_processors([processor])
    agent = agents.Agent(name="weather agent", instructions="Answer with the weather tool.", model="gpt-test",
                         tools=[agents.function_tool(_weather, name_override="get_weather")])

    async def runs() -> list[Any]:
        agents.set_default_openai_client(AsyncOpenAI(base_url=url, api_key="sk-agents-test"), use_for_tracing=False)
        agents.set_default_openai_api("responses")
        return [await agents.Runner.run(agent, "What is the weather in San Francisco?", run_config=config)
                for _ in range(times)]

    return asyncio.run(runs())


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_run_is_recorded_and_scored_as_the_raw_calls(server: AgentServer, url: str, tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    processor = RecordingProcessor(path)
    [result] = _run(processor, url)
    processor.force_flush()
    assert result.final_output == _answer_text(server.responses)
    records = _lines(path)
    assert len(records) == 2
    first, second = records
    assert {r["origin"] for r in records} == {"agents"}
    assert first["trace_id"] == second["trace_id"] and first["trace_id"].startswith("trace_")
    assert first["span_id"] != second["span_id"] and first["id"] == first["span_id"]
    assert first["metadata"]["agent"] == "weather agent" and first["metadata"]["tools"] == []
    assert second["metadata"]["tools"] == [{"name": "get_weather", "span_id": second["metadata"]["tools"][0]["span_id"],
                                            "input": '{"city":"Lisbon"}', "output": "Sunny and 21 degrees in Lisbon."}]

    posts = [body for method, _, body in server.requests if method == "POST"]
    raw = tmp_path / "raw.jsonl"
    raw.write_text("".join(json.dumps({"request": body, "response": server.answer(body)}) + "\n" for body in posts),
                   encoding="utf-8")
    out = tmp_path / "scores.jsonl"
    assert main(["score", str(path), "-o", str(out), "--offline", "--cache-dir", str(tmp_path / "cache"),
                 "--quiet"]) == 0
    rows = _lines(out)
    expected = tlmscore.prepare(raw, tlmscore.Settings(offline=True, cache_dir=tmp_path / "cache"))
    assert [r["prompt"] for r in rows] == list(expected["prompt"])
    assert [r["response"] for r in rows] == list(expected["response"])
    assert "Sunny and 21 degrees in Lisbon." in rows[1]["prompt"]
    assert [(r["origin"], r["trace_id"], r["span_id"]) for r in rows] == \
        [("agents", r["trace_id"], r["span_id"]) for r in records]
    assert all(r["error"] is None and r["scorer"] == "grounding" for r in rows)
    processor.shutdown()


def test_files_rotate_by_size_and_every_file_is_read(url: str, tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    processor = RecordingProcessor(path, max_bytes=1, backups=3)
    _run(processor, url, times=3)
    processor.shutdown()
    files = [path, *(path.with_name(f"calls.jsonl.{n}") for n in (1, 2, 3))]
    assert all(f.is_file() for f in files) and not path.with_name("calls.jsonl.4").exists()
    assert all(len(_lines(f)) == 1 for f in files)  # six records, one a file, the oldest two gone
    newest_first = [_lines(f)[0]["span_id"] for f in files]
    rows = tlmscore.prepare([str(f) for f in reversed(files)],
                            tlmscore.Settings(offline=True, cache_dir=tmp_path / "cache"))
    assert list(rows["span_id"]) == newest_first[::-1]
    assert rows["error"].isna().all()
    _run(processor, url)  # after shutdown nothing is written: the run's two calls are counted as dropped
    assert processor.dropped == 2 and [_lines(f)[0]["span_id"] for f in files] == newest_first


def test_a_disk_that_blocks_never_blocks_the_run(server: AgentServer, url: str, tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    pipe = tmp_path / "calls.jsonl"
    os.mkfifo(pipe)  # opening it for writing blocks until someone reads: a disk that does not answer
    processor = RecordingProcessor(pipe, queue_size=1)
    with caplog.at_level(logging.WARNING, logger="tlmscore.agents"):
        results = _run(processor, url, times=3)  # six records for a writer that cannot write one
    assert [r.final_output for r in results] == [_answer_text(server.responses)] * 3
    assert processor.dropped >= 4
    assert any("dropped so far" in m for m in caplog.messages)

    read: list[bytes] = []
    reader = threading.Thread(target=lambda: read.append(pipe.read_bytes()))
    reader.start()  # the disk answers: what was queued is written
    processor.shutdown()
    reader.join(timeout=60)
    written = [json.loads(line) for line in read[0].splitlines()]
    assert len(written) + processor.dropped == 6
    assert all(r["origin"] == "agents" and r["response"]["output"] for r in written)


def test_a_span_recorded_without_its_data_is_an_error_row_that_says_so(url: str, tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    processor = RecordingProcessor(path)
    _run(processor, url, config=agents.RunConfig(trace_include_sensitive_data=False))
    processor.shutdown()
    records = _lines(path)  # the SDK keeps no response id either, for an endpoint not OpenAI's
    assert len(records) == 2 and all("response" not in r for r in records)
    rows = tlmscore.prepare(path, tlmscore.Settings(offline=True, cache_dir=tmp_path / "cache"))
    assert all("the span holds no response and no response id" in e for e in rows["error"])
    assert list(rows["span_id"]) == [r["span_id"] for r in records]


class Exporting(agents.TracingProcessor):
    """What the SDK's trace exporter sends: `span.export()` of every span, in order."""

    def __init__(self) -> None:
        self.exported: list[dict[str, Any]] = []

    def on_trace_start(self, trace: Any) -> None:
        """Traces are not records."""

    def on_trace_end(self, trace: Any) -> None:
        """Traces are not records."""

    def on_span_start(self, span: Any) -> None:
        """Spans are exported as they end."""

    def on_span_end(self, span: Any) -> None:
        """Keep the span as exported."""
        self.exported.append(span.export())

    def shutdown(self) -> None:
        """Nothing is held."""

    def force_flush(self) -> None:
        """Nothing is held."""


SECRET = "sk-hydrate-test-9f3a61c2"  # noqa: S105  (a made-up key the outputs are searched for)


def test_exported_spans_are_filled_in_by_hydrate(server: AgentServer, url: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    exporter = Exporting()
    agents.set_trace_processors([exporter])
    agent = agents.Agent(name="weather agent", instructions="Answer with the weather tool.", model="gpt-test",
                         tools=[agents.function_tool(_weather, name_override="get_weather")])

    async def one_run() -> Any:
        agents.set_default_openai_client(AsyncOpenAI(base_url=url, api_key="sk-agents-test"), use_for_tracing=False)
        return await agents.Runner.run(agent, "What is the weather in San Francisco?")

    asyncio.run(one_run())
    spans = [s for s in exporter.exported if s["span_data"]["type"] == "response"]
    assert len(spans) == 2 and all(set(s["span_data"]) == {"type", "response_id", "usage"} for s in spans)
    lost = {**spans[1], "id": "span_lost", "span_data": {**spans[1]["span_data"], "response_id": "resp_expired"}}
    export = tmp_path / "spans.jsonl"
    export.write_text("".join(json.dumps(s) + "\n" for s in [*exporter.exported, lost]), encoding="utf-8")

    posts = [body for method, _, body in server.requests if method == "POST"]
    answers = [server.answer(body) or {} for body in posts]
    for body, answer in zip(posts, answers, strict=True):
        items = [{"id": f"item_{n}", **item} for n, item in enumerate(body["input"])]
        server.stored[answer["id"]] = (answer, items)
    assert [s["span_data"]["response_id"] for s in spans] == [a["id"] for a in answers]

    settings = tlmscore.Settings(offline=True, cache_dir=tmp_path / "cache")
    unfilled = tlmscore.prepare(export, settings)
    assert all("--hydrate pulls the stored response" in e for e in unfilled["error"])

    out = tmp_path / "rows.jsonl"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["prepare", str(export), "-o", str(out), "--hydrate", "--offline", "--quiet"]) == 2
    assert "--hydrate needs an API key in OPENAI_API_KEY" in capsys.readouterr().err
    assert not out.exists()

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    assert main(["prepare", str(export), "-o", str(out), "--hydrate", "--offline", "--cache-dir",
                 str(tmp_path / "cache"), "--quiet"]) == 0
    rows = _lines(out)
    raw = tlmscore.prepare([{"request": body, "response": answer} for body, answer in zip(posts, answers, strict=True)],
                           settings)
    assert [r["prompt"] for r in rows[:2]] == list(raw["prompt"])
    assert [r["response"] for r in rows[:2]] == list(raw["response"])
    assert [(r["origin"], r["trace_id"], r["span_id"]) for r in rows] == \
        [("agents", s["trace_id"], s["id"]) for s in [*spans, lost]]
    assert rows[2]["prompt"] is None and "expired or was never stored" in rows[2]["error"]
    retrieved = [path for method, path, _ in server.requests if method == "GET" and "/input_items" not in path]
    assert len(retrieved) == 3 and all("include" in path for path in retrieved)
    assert SECRET not in out.read_text(encoding="utf-8")

    pulled = tmp_path / "pulled.jsonl"  # the same ids, pulled by the pull command from the span export
    assert main(["pull", str(export), "-o", str(pulled)]) == 0
    assert [r["id"] for r in _lines(pulled)] == [*(s["span_data"]["response_id"] for s in spans), "resp_expired"]


class EchoServer(OpenAIServer):
    """Answers with the recorded response the request's model names, echoing its instructions, tools and
    previous response id."""

    def answer(self, body: dict[str, Any]) -> dict[str, Any] | None:
        recorded = super().answer(body)
        if recorded is None or recorded.get("object") != "response":
            return recorded
        return {**recorded, "instructions": body.get("instructions"), "tools": body.get("tools", []),
                "previous_response_id": body.get("previous_response_id")}


# The openai SDK warns while serialising the xAI responses it parsed into the nearest types.
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_every_recorded_response_reads_from_the_recording_as_from_the_raw_call(recorded_responses: Path,
                                                                              tmp_path: Path) -> None:
    import openai

    stems = [p.stem for p in sorted(recorded_responses.glob("*.json"))
             if json.loads(p.read_text(encoding="utf-8")).get("object") == "response"]
    path = tmp_path / "calls.jsonl"
    processor = RecordingProcessor(path)
    agents.set_trace_processors([processor])
    with EchoServer(recorded_responses) as server:
        async def runs() -> None:
            agents.set_default_openai_client(AsyncOpenAI(base_url=server.url, api_key="sk-agents-test"),
                                             use_for_tracing=False)
            for stem in stems:
                agent = agents.Agent(name=f"agent {stem}", instructions="Be brief.", model=stem)
                # A call of a tool this agent lacks stops the run after the call was recorded.
                with contextlib.suppress(agents.ModelBehaviorError):
                    await agents.Runner.run(agent, f"About {stem}?", max_turns=1)

        asyncio.run(runs())
        posts = [body for method, _, body in server.requests if method == "POST"]
        answers = [server.answer(body) or {} for body in posts]
        client = openai.OpenAI(base_url=server.url, api_key="sk-other", max_retries=0)
        returned = [client.responses.create(**body) for body in posts]  # as the openai SDK parses them
    agents.set_trace_processors([])
    processor.shutdown()
    assert [body["model"] for body in posts] == stems
    settings = tlmscore.Settings(offline=True, cache_dir=tmp_path / "cache")
    rows = tlmscore.prepare(path, settings)
    raw = tlmscore.prepare([{"request": b, "response": a} for b, a in zip(posts, answers, strict=True)], settings)
    # The SDK parses the response and dumps it again: an item's keys may come in its own order.
    parsed = tlmscore.prepare([{"request": b, "response": r} for b, r in zip(posts, returned, strict=True)],
                              settings)
    # The SDK raises on an incomplete or failed response: the span records the failure, and so does its row.
    stopped = [n for n, answer in enumerate(answers) if answer.get("status") in ("incomplete", "failed")]
    assert stopped, "fixtures/responses/ holds an incomplete response"
    assert all("the Responses call failed" in rows["error"][n] for n in stopped)
    kept = [n for n in range(len(posts)) if n not in stopped]
    assert rows["error"][kept].isna().all(), list(rows["error"][kept].dropna())
    assert list(rows["prompt"][kept]) == list(raw["prompt"][kept])
    assert list(rows["response"][kept]) == list(parsed["response"][kept])
    assert [m["agent"] for m in (json.loads(line)["metadata"] for line in path.read_text().splitlines())] == \
        [f"agent {stem}" for stem in stems]
