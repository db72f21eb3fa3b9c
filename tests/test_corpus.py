"""Real recorded responses (../shared/corpus): every file yields a row; covered shapes render cleanly."""

from __future__ import annotations

from pathlib import Path

from tlmscore import MemoryPages, Settings, prepare

NOT_RESPONSES = {"openai-error.1.json", "openai-reasoning-model-temperature-error.json"}
COVERED_TYPES = {"message", "function_call", "function_call_output", "reasoning", "file_search_call",
                 "web_search_call"}


def test_every_corpus_file_yields_exactly_one_row(corpus_responses: Path, tmp_path: Path) -> None:
    files = sorted(corpus_responses.glob("*.json"))
    df = prepare(files, Settings(offline=True, cache_dir=tmp_path), pages=MemoryPages())
    assert len(df) == len(files)
    errors = {Path(s).name for s, e in zip(df.source, df.error, strict=True) if e is not None}
    assert errors >= NOT_RESPONSES
    for name in NOT_RESPONSES:
        (message,) = df.error[df.source.map(lambda s: Path(s).name) == name]
        assert f"{name}:1: record is an API error" in message


def test_openai_and_azure_responses_of_covered_types_render_without_error(corpus_responses: Path,
                                                                          tmp_path: Path) -> None:
    import json

    covered = []
    for path in sorted(corpus_responses.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if not path.name.startswith(("openai-", "azure-")) or data.get("object") != "response":
            continue
        if {item["type"] for item in data["output"]} <= COVERED_TYPES:
            covered.append(path)
    assert len(covered) >= 10
    df = prepare(covered, Settings(offline=True, cache_dir=tmp_path), pages=MemoryPages())
    assert df.error.isna().all(), df.error.dropna().tolist()
    assert (df.response.str.len() > 0).all()
    assert not any("unhandled item type" in w for ws in df.warnings for w in ws)


def test_every_corpus_response_prepares_without_error_or_unhandled_items(corpus_responses: Path,
                                                                          tmp_path: Path) -> None:
    files = sorted(corpus_responses.glob("*.json"))
    df = prepare(files, Settings(offline=True, cache_dir=tmp_path), pages=MemoryPages())
    names = df.source.map(lambda s: Path(s).name)
    assert set(names[df.error.notna()]) == NOT_RESPONSES, df.error.dropna().tolist()
    unhandled = {n: w for n, ws in zip(names, df.warnings, strict=True) for w in ws if "unhandled item type" in w}
    assert not unhandled
    assert df.prompt.notna().sum() == len(files) - len(NOT_RESPONSES)
