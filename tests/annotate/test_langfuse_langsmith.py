"""Scores written back as Langfuse scores and LangSmith feedback, through the real `langfuse` and `langsmith` SDKs.

No Langfuse or LangSmith server can run here: the SDKs talk to local fakes of the endpoints they
call (`tests/servers/trace_store_fakes.py`: Langfuse's `POST /api/public/scores` with basic auth; LangSmith's
`GET /info`, `POST /feedback` and `PATCH /feedback/{id}` with `x-api-key`), which keep what they
were sent. Also here: a bare `--annotate`, which sends each row back to where it came from by its
`origin` (Langfuse, LangSmith, the OTLP receiver of `tests/servers/otlp_receiver.py`, a Phoenix server).
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers.otlp_receiver import OtlpReceiver, serve_otlp
from tests.servers.trace_store_fakes import (
    LANGSMITH_KEY,
    PUBLIC_KEY,
    SECRET_KEY,
    Store,
    serve_langfuse,
    serve_langsmith,
)
from tests.support.paths import ROOT
from tests.support.tables import write_table
from tlmscore.annotate import Clock, Policy, deliver, destination, parse_target
from tlmscore.cli import main
from tlmscore.errors import ConfigError
from tlmscore.output import read_rows

LABELLED = ROOT / "fixtures" / "labelled"
ROWS = 25
SECRETS = (SECRET_KEY, LANGSMITH_KEY)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _langfuse_ids(index: int) -> dict[str, str]:
    return {"origin": "langfuse", "trace_id": f"{0xf00 + index:032x}", "span_id": f"{0xb00 + index:016x}"}


def _langsmith_ids(index: int) -> dict[str, str]:
    return {"origin": "langsmith", "trace_id": str(uuid.UUID(int=0x7000 + index)),
            "span_id": str(uuid.UUID(int=0x5000 + index))}


@pytest.fixture(scope="module")
def plain(labelled_scores: Path) -> list[dict[str, Any]]:
    """The labelled fixtures scored offline; one row made an error row."""
    rows = _lines(labelled_scores)
    rows[3] |= {"score": None, "error": "response failed: server_error"}
    return rows


@pytest.fixture
def langfuse(monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    for store in serve_langfuse():
        monkeypatch.setenv("LANGFUSE_HOST", store.url)
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", PUBLIC_KEY)
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET_KEY)
        yield store


@pytest.fixture
def langsmith(monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    for store in serve_langsmith():
        monkeypatch.setenv("LANGSMITH_ENDPOINT", store.url)
        monkeypatch.setenv("LANGSMITH_API_KEY", LANGSMITH_KEY)
        yield store


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    for found in serve_otlp():
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", found.url)
        yield found


def _down() -> str:
    """A loopback URL with nothing listening."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def _no_secrets(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


def _check_langfuse(store: Store, rows: list[dict[str, Any]]) -> None:
    """The fake holds exactly one score per row, equal to the row."""
    by_observation = {s["observationId"]: s for s in store.stored.values()}
    assert len(store.stored) == len(by_observation) == len(rows)
    for row in rows:
        score = by_observation[row["span_id"]]
        assert (score["traceId"], score["name"]) == (row["trace_id"], "tlmscore.grounding")
        assert score["metadata"]["tlmscore.record.id"] == row["id"]
        if row["error"]:
            assert (score["dataType"], score["value"], score["comment"]) == (
                "CATEGORICAL", "not scorable", row["error"])
            assert score["metadata"]["label"] == "not scorable"
        else:
            assert score["dataType"] == "NUMERIC"
            assert score["value"] == pytest.approx(row["score"])
            assert score["comment"] == row["explanation"]
            assert score["metadata"]["label"] == ("supported" if row["score"] >= 0.5 else "unsupported")


def _check_langsmith(store: Store, rows: list[dict[str, Any]]) -> None:
    """The fake holds exactly one feedback per row, equal to the row."""
    by_run = {f["run_id"]: f for f in store.stored.values()}
    assert len(store.stored) == len(by_run) == len(rows)
    for row in rows:
        feedback = by_run[row["span_id"]]
        assert (feedback["trace_id"], feedback["key"]) == (row["trace_id"], "tlmscore.grounding")
        assert feedback["feedback_source"]["metadata"] == {"tlmscore.record.id": row["id"]}
        if row["error"]:
            assert (feedback.get("score"), feedback["value"], feedback["comment"]) == (
                None, "not scorable", row["error"])
        else:
            assert feedback["score"] == pytest.approx(row["score"], abs=1e-4)  # the SDK keeps 4 decimals
            assert feedback["value"] == ("supported" if row["score"] >= 0.5 else "unsupported")
            assert feedback["comment"] == row["explanation"]


def test_langfuse_scores_equal_the_rows_and_a_rerun_updates_them(
        plain: list[dict[str, Any]], langfuse: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [r | _langfuse_ids(i) for i, r in enumerate(plain)]
    scored = write_table(tmp_path / "scored.jsonl", rows)
    assert main(["annotate", str(scored), "--to", "langfuse"]) == 0
    first = set(langfuse.stored)
    _check_langfuse(langfuse, rows)
    assert main(["annotate", str(scored), "--to", "langfuse"]) == 0
    assert len(langfuse.writes) == 2 and set(langfuse.stored) == first  # the same ids: updated, not added
    assert [s["id"] for s in langfuse.writes[1]] == [s["id"] for s in langfuse.writes[0]]
    _check_langfuse(langfuse, rows)
    err = capsys.readouterr().err
    assert f"annotations to langfuse: {ROWS} of {ROWS} written" in err
    _no_secrets(err, *(p.read_text(encoding="utf-8") for p in tmp_path.iterdir()))


def test_langsmith_feedback_equals_the_rows_and_a_rerun_updates_it(
        plain: list[dict[str, Any]], langsmith: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [r | _langsmith_ids(i) for i, r in enumerate(plain)]
    scored = write_table(tmp_path / "scored.jsonl", rows)
    assert main(["annotate", str(scored), "--to", "langsmith"]) == 0
    first = set(langsmith.stored)
    _check_langsmith(langsmith, rows)
    assert all(h["x-api-key"] == LANGSMITH_KEY for h in langsmith.headers)
    rows[0]["score"] = 0.125  # a changed score: the re-run updates the feedback it has
    write_table(scored, rows)
    assert main(["annotate", str(scored), "--to", "langsmith"]) == 0
    assert set(langsmith.stored) == first
    assert sum("patch" in w for w in langsmith.writes) == ROWS  # the same ids again: 409, then updated in place
    _check_langsmith(langsmith, rows)
    err = capsys.readouterr().err
    assert f"annotations to langsmith: {ROWS} of {ROWS} written" in err
    assert "Traceback" not in err
    _no_secrets(err, *(p.read_text(encoding="utf-8") for p in tmp_path.iterdir()))


def test_rows_without_the_ids_a_store_needs_are_skipped(plain: list[dict[str, Any]], tmp_path: Path) -> None:
    rows = [r | _langsmith_ids(i) if i % 2 else r | {"span_id": "not-a-uuid"} for i, r in enumerate(plain)]
    target = tmp_path / "feedback.jsonl"
    outcome = deliver(rows, parse_target(f"langsmith-json:{target}", {}))
    assert (outcome.written, outcome.skipped) == (12, 13)
    assert [f["run_id"] for f in _lines(target)] == [r["span_id"] for r in rows[1::2]]
    outcome = deliver([r | {"trace_id": None} for r in plain], parse_target("langfuse-json:x", {}))
    assert (outcome.written, outcome.skipped) == (0, ROWS)


def test_file_targets_hold_the_bodies_the_apis_take(plain: list[dict[str, Any]], tmp_path: Path) -> None:
    rows = [r | _langfuse_ids(i) for i, r in enumerate(plain)]
    scored = write_table(tmp_path / "scored.jsonl", rows)
    scores = tmp_path / "scores.jsonl"
    assert main(["annotate", str(scored), "--to", f"langfuse-json:{scores}"]) == 0
    store = Store(stored={s["id"]: s for s in _lines(scores)})
    _check_langfuse(store, rows)
    assert main(["annotate", str(scored), "--to", f"langfuse-json:{scores}"]) == 0
    assert {s["id"] for s in _lines(scores)} == set(store.stored)  # appended again, with the same ids


def test_a_failing_then_down_langfuse_loses_no_score_and_the_side_file_replays(
        langfuse: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    records = _lines(LABELLED / "labelled.jsonl")
    source = write_table(tmp_path / "traced.jsonl", [r | _langfuse_ids(i) for i, r in enumerate(records)])
    out = tmp_path / "out.jsonl"
    langfuse.fail_next = 3  # every attempt answers 500
    assert main(["score", str(source), "-o", str(out), "--offline", "--quiet", "--pages", str(LABELLED / "pages"),
                 "--cache-dir", str(tmp_path / "cache"), "--annotate", "langfuse"]) == 0
    err = capsys.readouterr().err
    assert f"annotations to langfuse: 0 of {ROWS} written" in err and "HTTP 500 (after 3 attempts)" in err
    written = list(read_rows(out))  # every score is in the output file
    assert len(written) == ROWS and all(r["origin"] == "langfuse" for r in written)
    side = tmp_path / "out.jsonl.annotate-failed.jsonl"
    assert [r["id"] for r in _lines(side)] == [r["id"] for r in written]
    assert not langfuse.stored

    assert {r["target"] for r in _lines(side)} == {f"langfuse:{langfuse.url}"}
    langfuse.fail_next = 3  # still failing: the side file is kept as it was
    assert main(["annotate", str(side)]) == 1
    assert "HTTP 500 (after 3 attempts)" in capsys.readouterr().err
    assert len(_lines(side)) == ROWS

    monkeypatch.setenv("LANGFUSE_HOST", _down())  # the keys are for another host now: the side file's gets none
    assert main(["annotate", str(side)]) == 1
    err = capsys.readouterr().err
    assert f"langfuse:{langfuse.url}: sent without LANGFUSE_PUBLIC_KEY, LANGFUSE_SECRET_KEY" in err
    assert "HTTP 401" in err and "Authorization" not in langfuse.headers[-1]
    assert len(_lines(side)) == ROWS

    monkeypatch.setenv("LANGFUSE_HOST", langfuse.url)
    assert main(["annotate", str(side)]) == 0
    assert not side.exists()
    _check_langfuse(langfuse, written)
    _no_secrets(capsys.readouterr().err, out.read_text(encoding="utf-8"))


def test_retries_get_through_and_a_refused_key_is_not_retried(
        plain: list[dict[str, Any]], langfuse: Store, langsmith: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [r | _langfuse_ids(i) for i, r in enumerate(plain)]
    langfuse.fail_next = 2  # two 500s, then accepted
    env = {"LANGFUSE_HOST": langfuse.url, "LANGFUSE_PUBLIC_KEY": PUBLIC_KEY, "LANGFUSE_SECRET_KEY": SECRET_KEY}
    no_wait = Clock(sleep=lambda s: None)
    outcome = deliver(rows, parse_target("langfuse", env), policy=Policy(batch_size=10), clock=no_wait)
    assert (outcome.written, outcome.failed_rows, len(langfuse.headers)) == (ROWS, [], 5)
    _check_langfuse(langfuse, rows)

    wrong = env | {"LANGFUSE_SECRET_KEY": "sk-lf-wrong"}
    outcome = deliver(rows, parse_target("langfuse", wrong), clock=no_wait)
    assert outcome.errors == [f"rows 1-{ROWS}: HTTP 401"] and len(langfuse.headers) == 6

    smith_rows = [r | _langsmith_ids(i) for i, r in enumerate(plain)][:4]
    langsmith.fail_next = 1
    env = {"LANGSMITH_ENDPOINT": langsmith.url, "LANGSMITH_API_KEY": LANGSMITH_KEY}
    outcome = deliver(smith_rows, parse_target("langsmith", env), clock=no_wait)
    assert (outcome.written, outcome.errors) == (4, [])
    _check_langsmith(langsmith, smith_rows)
    bad = env | {"LANGSMITH_API_KEY": "lsv2_wrong"}
    outcome = deliver(smith_rows, parse_target("langsmith", bad), clock=no_wait)
    assert outcome.written == 0 and outcome.errors[0].startswith("rows 1-4: LangSmithAuthError")
    assert "(after" not in outcome.errors[0]


def test_targets_need_their_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    full = {"LANGFUSE_HOST": "https://lf.example/", "LANGFUSE_PUBLIC_KEY": "p", "LANGFUSE_SECRET_KEY": "s"}
    assert parse_target("langfuse", full).location == "https://lf.example"
    with pytest.raises(ConfigError, match="set LANGFUSE_HOST, LANGFUSE_SECRET_KEY"):
        parse_target("langfuse", {"LANGFUSE_PUBLIC_KEY": "p"})
    assert parse_target("langsmith", {"LANGSMITH_API_KEY": "k"}).location == "https://api.smith.langchain.com"
    with pytest.raises(ConfigError, match="set LANGSMITH_API_KEY"):
        parse_target("langsmith", {"LANGSMITH_ENDPOINT": "http://127.0.0.1:1"})
    assert parse_target("langsmith-json:f.jsonl", {}).file
    for name in ("LANGFUSE_HOST", "LANGFUSE_BASE_URL", "LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert main(["score", str(LABELLED / "labelled.jsonl"), "-o", str(tmp_path / "x.jsonl"), "--offline",
                 "--annotate", "langfuse"]) == 2
    assert "--to langfuse: set LANGFUSE_HOST" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_where_each_row_goes_back_to() -> None:
    assert destination({"origin": "phoenix", "source": "phoenix://127.0.0.1:6006/default?limit=5"}) == \
        "phoenix://127.0.0.1:6006"
    assert destination({"origin": "phoenix", "source": "phoenixs://px.example/p"}) == "phoenix:https://px.example"
    assert destination({"origin": "phoenix", "source": "spans.jsonl"}) is None
    assert [destination({"origin": o}) for o in ("otlp", "openinference", "langfuse", "langsmith")] == [
        "otlp", "otlp", "langfuse", "langsmith"]
    assert [destination({"origin": o}) for o in (None, "openai", float("nan"))] == [None, None, None]


def test_bare_annotate_sends_each_row_back_to_its_origin(
        langfuse: Store, langsmith: Store, receiver: OtlpReceiver, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    records = _lines(LABELLED / "labelled.jsonl")
    otel = {"origin": "otlp"}
    origins = [_langfuse_ids(i) if i < 5 else _langsmith_ids(i) if i < 10 else
               otel | {"trace_id": f"{i:032x}", "span_id": f"{i:016x}"} if i < 15 else {} for i in range(ROWS)]
    source = write_table(tmp_path / "mixed.jsonl", [r | o for r, o in zip(records, origins, strict=True)])
    out = tmp_path / "out.jsonl"
    assert main(["score", str(source), "-o", str(out), "--offline", "--quiet", "--pages", str(LABELLED / "pages"),
                 "--cache-dir", str(tmp_path / "cache"), "--annotate"]) == 0
    rows = list(read_rows(out))
    _check_langfuse(langfuse, rows[:5])
    _check_langsmith(langsmith, rows[5:10])
    assert [r.span_id.hex() for r in receiver.records] == [r["span_id"] for r in rows[10:15]]
    err = capsys.readouterr().err
    assert "not annotated: no trace to go back to: 10 rows" in err
    assert "annotations to langfuse (the rows' origin): 5 of 5 written" in err
    assert not (tmp_path / "out.jsonl.annotate-failed.jsonl").exists()
    _no_secrets(err, out.read_text(encoding="utf-8"))


def test_bare_annotate_keeps_rows_whose_origin_is_unreachable_or_not_configured(
        plain: list[dict[str, Any]], langsmith: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("LANGFUSE_HOST", raising=False)
    down = _down()
    rows = [r | (_langfuse_ids(i) if i < 3 else _langsmith_ids(i) if i < 6 else
                 {"origin": "phoenix", "source": f"phoenix://{down.removeprefix('http://')}/default",
                  "trace_id": f"{i:032x}", "span_id": f"{i:016x}"}) for i, r in enumerate(plain[:9])]
    scored = write_table(tmp_path / "scored.jsonl", rows)
    assert main(["annotate", str(scored), "--to", "origin"]) == 1
    err = capsys.readouterr().err
    assert "3 rows not annotated: --to langfuse: set LANGFUSE_HOST" in err
    assert f"annotations to phoenix://{down.removeprefix('http://')} (the rows' origin): 0 of 3 written" in err
    _check_langsmith(langsmith, rows[3:6])
    side = tmp_path / "scored.jsonl.annotate-failed.jsonl"
    kept = _lines(side)
    assert sorted(r["id"] for r in kept) == sorted(r["id"] for r in rows[:3] + rows[6:])
    assert all(r["source"] for r in kept)  # the Phoenix rows keep the address they go back to


def test_bare_annotate_refuses_an_input_whose_store_is_not_configured(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", raising=False)
    assert main(["score", str(LABELLED / "labelled.jsonl"), "--format", "otlp", "-o", str(tmp_path / "x.jsonl"),
                 "--offline", "--annotate"]) == 2
    err = capsys.readouterr().err
    assert "--annotate (back to each row's origin): --to otlp: set OTEL_EXPORTER_OTLP_ENDPOINT" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.jsonl").exists()
