"""Recorded API replies (`fixtures/responses/`, and the shared corpus's when it is present): every file
yields a row, an API error body an error row; covered shapes render cleanly."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from tests.support.paths import FIXTURES
from tlmscore import MemoryPages, Settings, prepare

COVERED_TYPES = {"message", "function_call", "function_call_output", "reasoning", "file_search_call",
                 "web_search_call"}


def _body(path: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return body


def _api_errors(paths: list[Path]) -> set[str]:
    """The files that hold the API's error body (`{"error": {...}}`), not a response."""
    return {p.name for p in paths if "object" not in _body(p) and "error" in _body(p)}


@pytest.mark.parametrize("path", sorted((FIXTURES / "responses").glob("*.json")), ids=lambda p: p.stem)
def test_the_projects_replies_have_the_apis_shapes(path: Path) -> None:
    """OpenAI's and Perplexity's replies validate with the openai SDK's types (generated from OpenAI's API
    reference); an error body has the fields of OpenAI's error object; xAI's follow xAI's Responses API
    (`web_search_call` with `arguments`, citations without indices), which the SDK's types do not hold."""
    body = _body(path)
    if "object" not in body:
        assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    elif path.name.startswith("xai-"):
        assert body["object"] == "response" and body["output"]
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            (Response if body["object"] == "response" else ChatCompletion).model_validate(body)


def test_every_recorded_file_yields_exactly_one_row(recorded_responses: Path, tmp_path: Path) -> None:
    files = sorted(recorded_responses.glob("*.json"))
    errors = _api_errors(files)
    assert len(errors) >= 2
    df = prepare(files, Settings(offline=True, cache_dir=tmp_path), pages=MemoryPages())
    assert len(df) == len(files)
    for name in errors:
        (message,) = df.error[df.source.map(lambda s: Path(s).name) == name]
        assert f"{name}:1: record is an API error" in message


def test_openai_and_azure_responses_of_covered_types_render_without_error(recorded_responses: Path,
                                                                          tmp_path: Path) -> None:
    covered = []
    for path in sorted(recorded_responses.glob("*.json")):
        data = _body(path)
        if not path.name.startswith(("openai-", "azure-")) or data.get("object") != "response":
            continue
        if {item["type"] for item in data["output"]} <= COVERED_TYPES:
            covered.append(path)
    assert len(covered) >= 5
    df = prepare(covered, Settings(offline=True, cache_dir=tmp_path), pages=MemoryPages())
    assert df.error.isna().all(), df.error.dropna().tolist()
    assert (df.response.str.len() > 0).all()
    assert not any("unhandled item type" in w for ws in df.warnings for w in ws)


def test_every_recorded_response_prepares_without_error_or_unhandled_items(recorded_responses: Path,
                                                                           tmp_path: Path) -> None:
    files = sorted(recorded_responses.glob("*.json"))
    df = prepare(files, Settings(offline=True, cache_dir=tmp_path), pages=MemoryPages())
    names = df.source.map(lambda s: Path(s).name)
    assert set(names[df.error.notna()]) == _api_errors(files), df.error.dropna().tolist()
    unhandled = {n: w for n, ws in zip(names, df.warnings, strict=True) for w in ws if "unhandled item type" in w}
    assert not unhandled
    assert df.prompt.notna().sum() == len(files) - len(_api_errors(files))


def _as_the_client_parsed_it(body: dict[str, Any]) -> dict[str, Any]:
    """A reply as a program that logs the `openai` client's objects writes it (MLflow's autolog, Langfuse's
    integrations): parsed into the SDK's types as the client parses (no validation), dumped again, so each
    object's keys come in the types' field order and every field the API left out is there as null."""
    from openai._models import construct_type  # the client's own parse of a reply

    kind = Response if body.get("object") == "response" else ChatCompletion
    parsed = construct_type(type_=kind, value=body)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # xAI's items are not the SDK's: dumped as they came
        dumped: dict[str, Any] = parsed.model_dump(mode="json")
    return dumped


def test_a_reply_renders_the_same_bytes_as_the_openai_client_parses_and_dumps_it(recorded_responses: Path,
                                                                                  tmp_path: Path) -> None:
    """Built-in tool items' objects (an action, an operation, an error) are shown in one form whoever
    serialised them: the API's key order and the SDK's, with or without its nulls, give the same prompt."""
    files = [p for p in sorted(recorded_responses.glob("*.json")) if p.name not in _api_errors([p])]
    raw = prepare([{"response": _body(p)} for p in files], Settings(offline=True, cache_dir=tmp_path),
                  pages=MemoryPages())
    parsed = prepare([{"response": _as_the_client_parsed_it(_body(p))} for p in files],
                     Settings(offline=True, cache_dir=tmp_path), pages=MemoryPages())
    assert raw["error"].isna().sum() > len(files) // 2
    for column in ("prompt", "response"):
        differ = [files[i].name for i in range(len(files)) if raw[column][i] != parsed[column][i]]
        assert not differ, (column, differ)
