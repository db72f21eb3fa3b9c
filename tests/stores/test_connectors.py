"""Trace stores at their seams: a live source that is down or not what it claims, a target that hangs
or takes part of a batch, the side file and its replay, where keys go, and the plug-in registry.

The servers here are loopback stand-ins (`pytest-httpserver`, a socket that never answers) that
answer as the documented REST APIs do; the real Phoenix and MLflow servers are in
`tests/stores/test_phoenix.py` and `tests/stores/test_mlflow.py`.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

import tlmscore
from tests.support.dists import install
from tests.support.paths import ROOT
from tests.support.tables import json_lines, write_table
from tlmscore.annotate import NOT_SCORABLE, annotation_of
from tlmscore.cli import main
from tlmscore.errors import ConfigError, TranscriptError
from tlmscore.plugins import forget
from tlmscore.stores import CONNECTORS, Connector, connectors, for_origin, parse_target, target_forms

LABELLED = ROOT / "fixtures" / "labelled"
KEY = "phx-key-0b7e41d9"  # a made-up key the outputs and the wrong servers are searched for


@pytest.fixture(scope="module")
def plain(labelled_scores: Path) -> list[dict[str, Any]]:
    """The labelled fixtures scored offline."""
    return json_lines(labelled_scores)


def _phoenix_rows(plain: list[dict[str, Any]], count: int, source: str = "spans.jsonl") -> list[dict[str, Any]]:
    """`count` scored rows read from Phoenix (`source`), each with a span of its own."""
    return [plain[i % len(plain)] | {"id": f"row-{i}", "origin": "phoenix", "source": source,
                                     "trace_id": f"{i + 1:032x}", "span_id": f"{i + 1:016x}"} for i in range(count)]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _address(server: HTTPServer) -> str:
    return f"127.0.0.1:{server.port}"


def _annotations(server: HTTPServer) -> list[dict[str, Any]]:
    """Every span annotation a Phoenix stand-in was sent."""
    return [item for request, _ in server.log if request.path == "/v1/span_annotations"
            for item in request.get_json()["data"]]


def _accepts_annotations(server: HTTPServer, failing_after: int | None = None) -> None:
    """Answer `POST /v1/span_annotations` as Phoenix does (one id per annotation); 500 after `failing_after` posts."""
    posts = {"count": 0}

    def handler(request: Request) -> Response:
        posts["count"] += 1
        if failing_after is not None and posts["count"] > failing_after:
            return Response("{}", status=500, content_type="application/json")
        data = request.get_json()["data"]
        return Response(json.dumps({"data": [{"id": str(i)} for i in range(len(data))]}),
                        content_type="application/json")

    server.expect_request("/v1/span_annotations", method="POST").respond_with_handler(handler)


# ---- a live source that is down, answers 500, or is not the store its address names ----------------------

def _web_server(server: HTTPServer, kind: str) -> None:
    if kind == "answers 500":
        server.expect_request(re.compile(".*")).respond_with_data("boom", status=500)
    else:  # a web site, not a trace store
        server.expect_request(re.compile(".*")).respond_with_data("<!doctype html><title>Welcome</title>",
                                                                  content_type="text/html")


@pytest.mark.parametrize(("scheme", "kind", "said"), [
    ("phoenix", "answers 500", "the server answered HTTP 500 INTERNAL SERVER ERROR"),
    ("phoenix", "a web site", "not a Phoenix server (GET /arize_phoenix_version answered HTTP 200 OK, not a version)"),
    ("mlflow", "answers 500", "the server answered HTTP 500 INTERNAL SERVER ERROR"),
    ("mlflow", "a web site", "not an MLflow server (GET /version answered HTTP 200 OK, not a version)"),
])
def test_a_live_source_that_is_not_its_store_is_one_line_exit_2_before_any_work(  # noqa: PLR0917
        httpserver: HTTPServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], scheme: str, kind: str,
        said: str) -> None:
    _web_server(httpserver, kind)
    out = tmp_path / "rows.jsonl"
    address = f"{scheme}://{_address(httpserver)}/default"
    assert main(["prepare", address, "-o", str(out), "--offline", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"tlmscore: error: http://{_address(httpserver)}: {said}"]
    assert list(tmp_path.iterdir()) == []  # no output, no manifest, no checkpoint
    with pytest.raises(TranscriptError, match=said.split(" (", maxsplit=1)[0]):
        tlmscore.prepare(address, tlmscore.Settings(offline=True, cache_dir=tmp_path / "cache"))


def test_a_live_source_that_is_down_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    assert main(["score", f"phoenix://127.0.0.1:{port}/default", "-o", str(tmp_path / "rows.jsonl"), "--offline",
                 "--quiet"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"tlmscore: error: http://127.0.0.1:{port}: ConnectError: ")
    assert list(tmp_path.iterdir()) == []


# ---- a target that never answers, or takes part of what it is sent ------------------------------------------

@pytest.fixture
def silent() -> Iterator[tuple[str, list[socket.socket]]]:
    """A loopback port that accepts connections and never answers; the connections it accepted."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{listener.getsockname()[1]}", accepted
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    listener.close()


def test_a_target_that_never_answers_is_given_up_and_every_row_kept_with_its_target(
        plain: list[dict[str, Any]], silent: tuple[str, list[socket.socket]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    address, accepted = silent
    scored = write_table(tmp_path / "scored.jsonl", _phoenix_rows(plain, 1000))
    assert main(["annotate", str(scored), "--to", f"phoenix://{address}", "--timeout", "0.5"]) == 1
    err = capsys.readouterr().err
    assert f"annotations to phoenix://{address}: 0 of 1000 written" in err
    assert "gave up after 3 failed attempts in a row (last: no answer within 0.5 s (ReadTimeout)); " \
           "1000 rows kept to replay" in err
    assert len(accepted) == 3  # one batch, three tries; the nine other batches are never sent
    side = json_lines(tmp_path / "scored.jsonl.annotate-failed.jsonl")
    assert [r["id"] for r in side] == [f"row-{i}" for i in range(1000)]
    assert {r["target"] for r in side} == {f"phoenix://{address}"}


def test_the_deadline_keeps_what_is_left(plain: list[dict[str, Any]], httpserver: HTTPServer,
                                         tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _accepts_annotations(httpserver)
    scored = write_table(tmp_path / "scored.jsonl", _phoenix_rows(plain, 30))
    assert main(["annotate", str(scored), "--to", f"phoenix://{_address(httpserver)}", "--deadline", "0"]) == 1
    assert "the deadline passed; 30 rows kept to replay" in capsys.readouterr().err
    assert _annotations(httpserver) == []
    assert len(json_lines(tmp_path / "scored.jsonl.annotate-failed.jsonl")) == 30


def test_what_the_store_took_is_counted_and_only_the_rest_is_kept(
        plain: list[dict[str, Any]], httpserver: HTTPServer, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    _accepts_annotations(httpserver, failing_after=1)  # the first post of 100 is stored, then the store fails
    rows = _phoenix_rows(plain, 150)
    scored = write_table(tmp_path / "scored.jsonl", rows)
    assert main(["annotate", str(scored), "--to", f"phoenix://{_address(httpserver)}"]) == 1
    err = capsys.readouterr().err
    assert f"annotations to phoenix://{_address(httpserver)}: 100 of 150 written" in err
    assert "rows 101-150: HTTP 500 INTERNAL SERVER ERROR (after 3 attempts)" in err
    failed = json_lines(tmp_path / "scored.jsonl.annotate-failed.jsonl")
    assert [r["id"] for r in failed] == [r["id"] for r in rows[100:]]


# ---- the side file names its target, and is replayed there -------------------------------------------------

def test_a_side_file_goes_back_to_the_target_it_names(plain: list[dict[str, Any]], httpserver: HTTPServer,
                                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _accepts_annotations(httpserver)  # the rows' origin, which must not get what failed elsewhere
    port = _free_port()  # the target: down for now
    rows = _phoenix_rows(plain, 12, source=f"phoenix://{_address(httpserver)}/default")
    scored = write_table(tmp_path / "scored.jsonl", rows)
    assert main(["annotate", str(scored), "--to", f"phoenix://127.0.0.1:{port}"]) == 1
    side = tmp_path / "scored.jsonl.annotate-failed.jsonl"
    assert {r["target"] for r in json_lines(side)} == {f"phoenix://127.0.0.1:{port}"}
    err = capsys.readouterr().err
    assert f"replay with: tlmscore annotate {side}\n" in err and "--to ..." not in err

    assert main(["annotate", str(side), "--to", "origin"]) == 2  # not to where the rows came from
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("tlmscore: error: a side file's rows go back to the target each names")
    assert len(json_lines(side)) == 12 and _annotations(httpserver) == []

    with HTTPServer(host="127.0.0.1", port=port) as target:
        _accepts_annotations(target)
        assert main(["annotate", str(side)]) == 0
        assert sorted(a["metadata"]["tlmscore.record.id"] for a in _annotations(target)) == sorted(
            r["id"] for r in rows)
    assert not side.exists() and _annotations(httpserver) == []


def test_a_side_file_keeps_the_rows_of_targets_not_replayed(plain: list[dict[str, Any]], httpserver: HTTPServer,
                                                            tmp_path: Path) -> None:
    _accepts_annotations(httpserver)
    down = f"phoenix://127.0.0.1:{_free_port()}"
    rows = _phoenix_rows(plain, 6)
    scored = write_table(tmp_path / "scored.jsonl", rows)
    side = tmp_path / "scored.jsonl.annotate-failed.jsonl"
    up = f"phoenix://{_address(httpserver)}"
    assert main(["annotate", str(scored), "--to", down, "--to", "otlp-json:/nonexistent/dir/events.jsonl"]) == 1
    assert sorted({r["target"] for r in json_lines(side)}) == sorted({down, "otlp-json:/nonexistent/dir/events.jsonl"})
    assert main(["annotate", str(scored), "--to", up]) == 1  # written there; the other targets' rows stay
    assert len(json_lines(side)) == 12 and len(_annotations(httpserver)) == 6
    events = tmp_path / "events.jsonl"
    kept = [r | {"target": f"otlp-json:{events}"} if r["target"].startswith("otlp-json") else r
            for r in json_lines(side)]
    write_table(side, kept)
    assert main(["annotate", str(side), "--to", f"otlp-json:{events}"]) == 1  # only those rows were picked
    assert {r["target"] for r in json_lines(side)} == {down}
    assert len(json_lines(events)) == 1


# ---- keys go only to the server they are for --------------------------------------------------------------

def test_a_key_is_not_sent_to_an_address_read_from_the_rows(plain: list[dict[str, Any]], httpserver: HTTPServer,
                                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    _accepts_annotations(httpserver)
    crafted = f"phoenix://{_address(httpserver)}/default"  # what a scored file from elsewhere may name
    scored = write_table(tmp_path / "scored.jsonl", _phoenix_rows(plain, 4, source=crafted))
    monkeypatch.setenv("PHOENIX_API_KEY", KEY)
    monkeypatch.delenv("PHOENIX_ENDPOINT", raising=False)
    monkeypatch.delenv("PHOENIX_COLLECTOR_ENDPOINT", raising=False)
    assert main(["annotate", str(scored), "--to", "origin"]) == 0
    assert [r.headers.get("Authorization") for r, _ in httpserver.log] == [None]
    assert "sent without PHOENIX_API_KEY" in capsys.readouterr().err

    monkeypatch.setenv("PHOENIX_ENDPOINT", "https://px.example")  # the key is for another server
    assert main(["annotate", str(scored), "--to", "origin"]) == 0
    assert [r.headers.get("Authorization") for r, _ in httpserver.log] == [None, None]

    monkeypatch.setenv("PHOENIX_ENDPOINT", f"http://{_address(httpserver)}")  # the key is for this one
    assert main(["annotate", str(scored), "--to", "origin"]) == 0
    assert httpserver.log[-1][0].headers.get("Authorization") == f"Bearer {KEY}"
    assert KEY not in capsys.readouterr().err


def test_a_key_goes_to_one_named_server_and_two_must_be_told_apart(
        plain: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    scored = write_table(tmp_path / "scored.jsonl", _phoenix_rows(plain, 3))
    monkeypatch.setenv("PHOENIX_API_KEY", KEY)
    monkeypatch.delenv("PHOENIX_ENDPOINT", raising=False)
    monkeypatch.delenv("PHOENIX_COLLECTOR_ENDPOINT", raising=False)
    with HTTPServer(host="127.0.0.1", port=0) as first, HTTPServer(host="127.0.0.1", port=0) as second:
        _accepts_annotations(first)
        _accepts_annotations(second)
        one, two = f"phoenix://{_address(first)}", f"phoenix://{_address(second)}"
        assert main(["annotate", str(scored), "--to", one]) == 0  # the only server named: the key is for it
        assert first.log[-1][0].headers.get("Authorization") == f"Bearer {KEY}"

        assert main(["annotate", str(scored), "--to", one, "--to", two]) == 2  # which one is the key for?
        (line,) = capsys.readouterr().err.splitlines()[-1:]
        assert "PHOENIX_API_KEY would go to 2 different servers" in line and "set PHOENIX_ENDPOINT" in line
        assert len(first.log) == 1 and second.log == []

        monkeypatch.setenv("PHOENIX_ENDPOINT", f"http://{_address(second)}")
        assert main(["annotate", str(scored), "--to", one, "--to", two]) == 0
        assert first.log[-1][0].headers.get("Authorization") is None
        assert second.log[-1][0].headers.get("Authorization") == f"Bearer {KEY}"


# ---- what an annotation says ------------------------------------------------------------------------------

def test_a_row_that_is_not_scorable_is_annotated_with_its_reason() -> None:
    row = {"id": "r1", "scorer": "grounding", "score": float("nan"), "error": None,
           "explanation": "no evidence to check the answer against: no tool result and no cited page"}
    annotation = annotation_of(row)
    assert (annotation.label, annotation.score, annotation.explanation) == (NOT_SCORABLE, None, row["explanation"])
    failed = annotation_of(row | {"error": "response failed: server_error"})
    assert failed.explanation == "response failed: server_error"
    assert annotation_of(row | {"explanation": None}).explanation == "no score"


# ---- the registry of stores and of plug-ins ---------------------------------------------------------------

def test_every_store_is_a_connector_and_rows_find_their_way_back() -> None:
    assert list(CONNECTORS) == ["phoenix", "otlp", "langfuse", "langsmith", "mlflow"]
    assert all(isinstance(c, Connector) for c in CONNECTORS.values())
    origins = ("phoenix", "openinference", "otlp", "langfuse", "langsmith", "mlflow")
    assert [for_origin(o).name for o in origins] == [  # type: ignore[union-attr]
        "phoenix", "otlp", "otlp", "langfuse", "langsmith", "mlflow"]
    # The Agents SDK's exports and stored responses are read, never written back: no store takes their rows.
    assert [for_origin(o) for o in (None, "elsewhere", "agents", "openai")] == [None] * 4
    assert list(tlmscore.stores.READERS).index("agents") < list(tlmscore.stores.READERS).index("mlflow")
    assert parse_target("phoenix://127.0.0.1:6006", {}).text == "phoenix://127.0.0.1:6006"
    assert parse_target("phoenix:https://px.example/root/", {}).location == "https://px.example/root"
    assert parse_target("mlflow://127.0.0.1:5000", {}).location == "http://127.0.0.1:5000"
    assert parse_target("mlflows://ml.example", {}).text == "mlflow:https://ml.example"
    assert parse_target("phoenix://px.example:6006/root/", {}).location == "http://px.example:6006/root"
    assert parse_target("mlflow://ml.example:5000/root", {}).location == "http://ml.example:5000"
    for store in ("phoenix", "mlflow"):
        with pytest.raises(ConfigError, match=f"expected {store}://HOST:PORT or {store}:http"):
            parse_target(f"{store}:ftp://x.example", {})
    assert target_forms().split(", ")[:2] == ["phoenix://HOST:PORT", "otlp:URL"]
    assert "mlflow://HOST:PORT" in target_forms()


PLUGIN = '''
from tlmscore.stores import Read, SourceReader
from tlmscore.stores.langsmith import LangSmithConnector


class Elsewhere(LangSmithConnector):
    name = "elsewhere"
    origins = ("elsewhere",)
    forms = ()
    readers = (SourceReader("elsewhere", lambda peek: peek.first.get("kind") == "elsewhere",
                            lambda address: iter([Read(1, error="nothing here")])),)


class Impostor(LangSmithConnector):
    name = "phoenix"


ELSEWHERE = Elsewhere()
IMPOSTOR = Impostor()
OTLP = SourceReader("otlp", lambda peek: True, lambda address: iter(()))
'''


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A distribution adding a store, one claiming to be Phoenix, a reader claiming to be OTLP, a broken one."""
    install(tmp_path, "acme_store", PLUGIN,
            "[tlmscore.connectors]\nelsewhere = acme_store:ELSEWHERE\nimpostor = acme_store:IMPOSTOR\n"
            "[tlmscore.sources]\notlp = acme_store:OTLP\nbroken = no_such_module:READER\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    forget()
    yield
    forget()


def test_plugins_add_and_never_replace_and_are_listed(installed: None, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.warns(UserWarning, match="plug-in") as warned:
        loaded_stores_and_readers = (connectors(), tlmscore.stores.readers())
    stores, readers = loaded_stores_and_readers
    assert list(stores)[-1] == "elsewhere" and stores["phoenix"] is CONNECTORS["phoenix"]
    assert readers["otlp"] is tlmscore.stores.otlp_logs.SPANS_READER and "elsewhere" in readers
    messages = sorted(str(w.message) for w in warned)
    assert "tlmscore: connector plug-in 'impostor' (acme_store:IMPOSTOR) refused: it would replace the built-in " \
           "'phoenix'" in messages
    assert any(m.startswith("tlmscore: source plug-in 'broken' (no_such_module:READER) skipped: "
                            "ModuleNotFoundError") for m in messages)
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "  elsewhere = acme_store:ELSEWHERE [acme-store 1.0]: adds elsewhere" in out
    assert "  otlp = acme_store:OTLP [acme-store 1.0]: refused: it would replace the built-in 'otlp'" in out
    assert "sink plug-ins (entry points: tlmscore.sinks)" in out
    assert "tlmscore.page_sources" not in out  # page sources are passed in (`pages=`), not loaded by name
