"""Scores written back as OpenTelemetry `gen_ai.evaluation.result` events: to a real local OTLP/HTTP receiver
whose request bodies are decoded with `opentelemetry-proto`, and to an OTLP/JSON file; retries, the side file
and its replay, and a receiver that is down while `score --annotate` runs."""

from __future__ import annotations

import json
import math
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.servers.otlp_receiver import OtlpReceiver, serve_otlp
from tests.support.paths import ROOT
from tests.support.tables import json_lines
from tlmscore.annotate import Clock, Delivery, Policy, deliver, parse_target
from tlmscore.cli import main
from tlmscore.errors import ConfigError
from tlmscore.output import read_rows
from tlmscore.stores.otlp import EVENT_NAME

LABELLED = ROOT / "fixtures" / "labelled"
SECRET = "Bearer do-not-print-me"  # noqa: S105 -- a made-up header value the test looks for in the output


@pytest.fixture(scope="module")
def scored(labelled_scores: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The labelled fixtures scored offline, with trace ids on the even rows (as a trace store's rows carry)."""
    rows = [json.loads(line) for line in labelled_scores.read_text(encoding="utf-8").splitlines()]
    for index, row in enumerate(rows):
        if index % 2 == 0:
            row |= {"origin": "otlp", "trace_id": f"{index + 1:032x}", "span_id": f"{index + 1:016x}"}
    rows[1] |= {"score": None, "error": "response failed: server_error"}
    traced = tmp_path_factory.mktemp("annotate") / "scored.jsonl"
    traced.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return traced


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    yield from serve_otlp()


def _attributes(record: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in record.attributes:
        kind = item.value.WhichOneof("value")
        values[item.key] = getattr(item.value, kind)
    return values


def test_every_row_becomes_an_event_on_its_span(scored: Path, receiver: OtlpReceiver, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization={SECRET.replace(' ', '%20')}")
    copy = tmp_path / "scored.jsonl"
    copy.write_bytes(scored.read_bytes())
    assert main(["annotate", str(copy), "--to", f"otlp:{receiver.url}"]) == 0
    rows = json_lines(scored)
    assert len(receiver.records) == len(rows) == 25
    assert receiver.headers[0]["authorization"] == SECRET
    for row, record in zip(rows, receiver.records, strict=True):
        attributes = _attributes(record)
        assert record.event_name == EVENT_NAME
        assert attributes["tlmscore.record.id"] == row["id"]
        assert attributes["gen_ai.evaluation.name"] == "tlmscore.grounding"
        assert attributes["gen_ai.response.id"] == row["response_id"]
        if row["error"]:
            assert attributes["gen_ai.evaluation.score.label"] == "not scorable"
            assert attributes["gen_ai.evaluation.explanation"] == row["error"]
            assert "gen_ai.evaluation.score.value" not in attributes
        else:
            assert attributes["gen_ai.evaluation.score.value"] == row["score"]
            label = "supported" if row["score"] >= 0.5 else "unsupported"
            assert attributes["gen_ai.evaluation.score.label"] == label
            assert attributes["gen_ai.evaluation.explanation"] == row["explanation"]
        assert record.trace_id.hex() == (row.get("trace_id") or "")
        assert record.span_id.hex() == (row.get("span_id") or "")
    assert not (tmp_path / "scored.jsonl.annotate-failed.jsonl").exists()
    assert SECRET not in capsys.readouterr().err


def test_a_failing_receiver_is_retried_then_the_side_file_replays(scored: Path, receiver: OtlpReceiver,
                                                                  tmp_path: Path) -> None:
    rows = json_lines(scored)
    receiver.fail_next = 2  # two 503s, then accepted: the third attempt succeeds
    fast, no_wait = Policy(batch_size=10), Clock(sleep=lambda s: None)
    outcome = deliver(rows, parse_target(f"otlp:{receiver.url}", {}), policy=fast, clock=no_wait)
    assert (outcome.written, outcome.failed_rows) == (25, [])
    assert receiver.requests == 5  # 3 batches, the first after two retries

    receiver.fail_next = 3  # the first batch fails all three attempts: three failures in a row give the target up
    outcome = deliver(rows, parse_target(f"otlp:{receiver.url}", {}), policy=fast, clock=no_wait)
    assert (outcome.written, receiver.requests) == (0, 8)  # the other two batches are not even sent
    assert [r["id"] for r in outcome.failed_rows] == [r["id"] for r in rows]
    assert outcome.errors == ["rows 1-10: HTTP 503 Service Unavailable (after 3 attempts)"]
    assert outcome.gave_up == ("gave up after 3 failed attempts in a row (last: HTTP 503 Service Unavailable); "
                               "25 rows kept to replay")
    assert "prompt" not in outcome.failed_rows[0]

    receiver.fail_next = 3  # allowed one failure more, the target is kept, and the next batches go through
    outcome = deliver(rows, parse_target(f"otlp:{receiver.url}", {}), policy=Policy(batch_size=10, give_up_after=4),
                      clock=no_wait)
    assert outcome.written == 15 and outcome.gave_up is None
    assert [r["id"] for r in outcome.failed_rows] == [r["id"] for r in rows[:10]]
    assert {r["target"] for r in outcome.failed_rows} == {f"otlp:{receiver.url}/v1/logs"}


def test_score_with_the_receiver_failing_keeps_every_score_and_the_side_file_replays_to_it(
        scored: Path, receiver: OtlpReceiver, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:  # a loopback port with nothing listening
        probe.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{probe.getsockname()[1]}"
    out = tmp_path / "out.csv"
    receiver.fail_next = 10**6  # the collector answers 503 to everything while the run writes back
    assert main(["score", str(LABELLED / "labelled.jsonl"), "-o", str(out), "--offline", "--quiet",
                 "--pages", str(LABELLED / "pages"), "--cache-dir", str(tmp_path / "cache"),
                 "--annotate", f"otlp:{receiver.url}"]) == 0
    err = capsys.readouterr().err
    assert f"annotations to otlp:{receiver.url}: 0 of 25 written" in err
    assert "gave up after 3 failed attempts in a row (last: HTTP 503 Service Unavailable)" in err
    side = tmp_path / "out.csv.annotate-failed.jsonl"
    assert f"replay with: tlmscore annotate {side}" in err and "--to ..." not in err
    written = list(read_rows(out))  # every score is in the scores file
    assert [r["id"] for r in written] == [r["id"] for r in json_lines(scored)]
    assert all(0.0 < r["score"] <= 1.0 for r in written)
    failed = json_lines(side)
    assert len(failed) == 25 and {r["target"] for r in failed} == {f"otlp:{receiver.url}/v1/logs"}
    # rows that failed at one collector are not sent to another one, and stay in the side file
    assert main(["annotate", str(side), "--to", f"otlp:{down}"]) == 2
    assert "no row of this side file failed there" in capsys.readouterr().err
    assert len(json_lines(side)) == 25
    receiver.fail_next = 0
    assert main(["annotate", str(side)]) == 0  # each row back to the target it names
    assert not side.exists()
    assert [_attributes(r)["tlmscore.record.id"] for r in receiver.records] == [r["id"] for r in failed]
    scores = {r["id"]: r["score"] for r in failed}
    assert all(math.isclose(_attributes(r)["gen_ai.evaluation.score.value"], scores[_attributes(r)[
        "tlmscore.record.id"]]) for r in receiver.records)


def test_otlp_json_file(scored: Path, tmp_path: Path) -> None:
    target = tmp_path / "events.jsonl"
    assert main(["annotate", str(scored), "--to", f"otlp-json:{target}"]) == 0
    (request,) = json_lines(target)
    records = request["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    assert len(records) == 25
    assert records[0]["traceId"] == f"{1:032x}" and records[0]["spanId"] == f"{1:016x}"
    assert "traceId" not in records[1]
    assert {a["key"]: a["value"] for a in records[1]["attributes"]}["gen_ai.evaluation.score.label"] == {
        "stringValue": "not scorable"}


def _record_ids(events: Path) -> list[list[str]]:
    """The record ids of each request in an OTLP/JSON file, in order."""
    return [[{a["key"]: a["value"] for a in record["attributes"]}["tlmscore.record.id"]["stringValue"]
             for record in request["resourceLogs"][0]["scopeLogs"][0]["logRecords"]] for request in json_lines(events)]


def test_a_delivery_fed_chunk_by_chunk_sends_each_batch_once_it_is_full(scored: Path, tmp_path: Path) -> None:
    rows, target = json_lines(scored), tmp_path / "events.jsonl"
    delivery = Delivery(parse_target(f"otlp-json:{target}", {}), policy=Policy(batch_size=10))
    delivery.add(rows[:4])
    assert not target.exists()  # four rows wait for a batch of ten
    delivery.add(rows[4:12])
    assert _record_ids(target) == [[r["id"] for r in rows[:10]]]
    delivery.add(rows[12:])
    outcome = delivery.close()
    assert _record_ids(target) == [[r["id"] for r in rows[i:i + 10]] for i in (0, 10, 20)]
    assert (outcome.rows, outcome.written, outcome.failed_rows) == (25, 25, [])


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_score_annotate_on_a_resumed_run_writes_every_row_back_once_and_reads_no_output_back(
        suffix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out, events = tmp_path / f"out{suffix}", tmp_path / "events.jsonl"
    args = ["score", str(LABELLED / "labelled.jsonl"), "-o", str(out), "--offline", "--quiet", "--chunk-size", "4",
            "--pages", str(LABELLED / "pages"), "--cache-dir", str(tmp_path / "cache")]
    assert main(args) == 0
    whole = out.read_bytes()
    ids = [row.id for row in read_rows(out)]
    out.unlink()  # a run killed half way: its checkpoint ends in a row cut off mid-way
    (tmp_path / f"out{suffix}.partial{suffix}").write_bytes(whole[:len(whole) // 2])
    monkeypatch.setattr("tlmscore.cli._annotate.read_rows", _no_reading_back)
    assert main([*args, "--resume", "--annotate", f"otlp-json:{events}"]) == 0
    assert out.read_bytes() == whole  # the rows kept, then the rest appended: the bytes of one run
    assert [i for request in _record_ids(events) for i in request] == ids  # each row written back once, in order
    err = capsys.readouterr().err
    earlier = re.search(r"resuming: (\d+) records already done", err)
    assert earlier is not None and 0 < int(earlier.group(1)) < len(ids), err
    assert f"annotations to otlp-json:{events}: 25 of 25 written" in err


def _no_reading_back(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("score --annotate read its output back")


def test_targets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_target("otlp:http://collector:4318", {}).location == "http://collector:4318/v1/logs"
    assert parse_target("otlp", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}).location == "http://c:4318/v1/logs"
    assert parse_target("otlp", {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://c/logs"}).location == "http://c/logs"
    assert parse_target("phoenix://127.0.0.1:6006", {}).location == "http://127.0.0.1:6006"
    with pytest.raises(ConfigError, match="expected phoenix://HOST:PORT, otlp:URL"):
        parse_target("langfuse://x", {})
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", raising=False)
    assert main(["score", str(LABELLED / "labelled.jsonl"), "-o", str(tmp_path / "x.jsonl"), "--offline",
                 "--annotate", "otlp"]) == 2
    assert "set OTEL_EXPORTER_OTLP_ENDPOINT" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()  # refused before any work


def test_a_client_error_is_not_retried(scored: Path) -> None:
    calls = []

    def reply(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(401)

    outcome = deliver(json_lines(scored)[:3], parse_target("otlp:http://collector.invalid", {}),
                      transport=httpx.MockTransport(reply), clock=Clock(sleep=lambda s: None))
    assert (len(calls), outcome.errors) == (1, ["rows 1-3: HTTP 401 Unauthorized"])
