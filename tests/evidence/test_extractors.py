"""The extractors a run can choose (`--extractor`): each finds a page's text, the worker pool runs the chosen one,
a cached page is re-extracted (not fetched) by another, and a missing package is refused in one line."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import get_args

import pytest

from tests.servers.evidence_server import EvidenceServer, Reply
from tlmscore.errors import ConfigError
from tlmscore.evidence.extract import EXTRACTOR_VERSION, EXTRACTORS, Extractor, extract, extractor_version
from tlmscore.evidence.fetch import Fetcher
from tlmscore.evidence.page import Page
from tlmscore.settings import ExtractorName, Settings

FACT = "The council voted on Tuesday to extend the tram line to the airport by 2031."
PAGE = (
    "<!doctype html><html><head><meta charset='utf-8'><title>Tram line extended</title></head><body>"
    "<nav><ul><li><a href='/'>Home</a></li><li><a href='/news'>News</a></li></ul></nav>"
    "<main><article><h1>Tram line extended</h1>"
    f"<p>{FACT}</p><p>Residents of Zürich welcomed the decision, which was long expected.</p>"
    "<h2>Details</h2><ul><li>Four new stops</li><li>A tram every six minutes</li></ul>"
    "<p>Work on the first section starts in spring, the city's transport office said in a statement.</p>"
    "</article></main><footer><p>(c) City News</p></footer></body></html>"
).encode()


@pytest.fixture
def server() -> EvidenceServer:
    with EvidenceServer() as running:
        yield running


def fetch(settings: Settings, url: str) -> Page:
    async def run() -> Page:
        async with Fetcher(settings) as fetcher:
            return (await fetcher.pages([url]))[url]

    return asyncio.run(run())


@pytest.mark.parametrize("extractor", EXTRACTORS)
def test_every_extractor_finds_the_article_text_and_title(extractor: str) -> None:
    found = extract(PAGE, "text/html", "https://news.example/tram", extractor)  # type: ignore[arg-type]
    assert found.status == "ok"
    assert found.title == "Tram line extended"
    assert FACT in (found.text or "")
    assert "Work on the first section starts in spring" in (found.text or "")
    if extractor != "resiliparse":  # its main-content rules drop a short list between paragraphs (docs/fetching.md)
        assert "Four new stops" in (found.text or "")


def test_trafilatura_writes_markdown_and_resiliparse_plain_text() -> None:
    markdown = extract(PAGE, "text/html", "https://news.example/tram", "recall").text or ""
    plain = extract(PAGE, "text/html", "https://news.example/tram", "resiliparse").text or ""
    assert markdown.startswith("# Tram line extended")
    assert plain.startswith("Tram line extended") and "#" not in plain


def test_the_settings_offer_exactly_the_extractors_there_are() -> None:
    assert get_args(ExtractorName) == EXTRACTORS == get_args(Extractor)


def test_extraction_workers_do_not_import_the_settings() -> None:
    code = ("import sys, tlmscore.evidence._template as t; t._warm_up(); "
            "print(sorted(m for m in ('pydantic', 'tlmscore.settings') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"  # a worker stays small: what it imports is what extraction needs


def test_each_extractor_has_its_own_version_and_the_default_keeps_the_stored_one() -> None:
    versions = {name: extractor_version(name) for name in EXTRACTORS}
    assert len(set(versions.values())) == len(EXTRACTORS)
    # caches written before extractors could be chosen hold this string: they must stay valid
    assert versions["recall"] == EXTRACTOR_VERSION == f"1;trafilatura={version('trafilatura')};pypdf={version('pypdf')}"
    assert versions["resiliparse"].endswith(f";resiliparse={version('resiliparse')}")


def test_a_cached_page_is_re_extracted_by_the_chosen_extractor_without_a_request(
        server: EvidenceServer, tmp_path: Path) -> None:
    url = server.route("/tram", Reply(body=PAGE))
    settings = Settings(cache_dir=tmp_path / "cache", allow_hosts=frozenset({"127.0.0.1"}), extract_workers=1)
    first = fetch(settings, url)
    assert first.status == "ok" and first.text is not None and first.text.startswith("# Tram line extended")
    again = fetch(settings.model_copy(update={"extractor": "resiliparse", "offline": True}), url)
    assert again.status == "ok"
    assert again.text == extract(PAGE, "text/html", url, "resiliparse").text  # the worker ran resiliparse
    assert again.text != first.text
    back = fetch(settings.model_copy(update={"offline": True}), url)
    assert back.text == first.text
    assert server.count() == 1


def test_a_missing_resiliparse_is_refused_before_any_fetch(server: EvidenceServer, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    url = server.route("/tram", Reply(body=PAGE))
    for name in [m for m in sys.modules if m == "resiliparse" or m.startswith("resiliparse.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "resiliparse", None)  # an import of it fails, as when it is not installed
    settings = Settings(cache_dir=tmp_path / "cache", allow_hosts=frozenset({"127.0.0.1"}), extractor="resiliparse")
    with pytest.raises(ConfigError, match=r"^--extractor resiliparse needs the resiliparse extra: pip install"):
        fetch(settings, url)
    assert server.count() == 0


def test_the_command_line_takes_the_extractor_and_says_one_line_without_the_package(tmp_path: Path) -> None:
    record = tmp_path / "calls.jsonl"
    record.write_text('{"request": {"model": "m", "input": "hi"}, "response": {"id": "resp_1", "object": "response",'
                      ' "status": "completed", "output": []}}\n', encoding="utf-8")
    blocked = ("import sys; sys.modules['resiliparse'] = None; from tlmscore.cli import main; "
               "raise SystemExit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", blocked, "prepare", str(record), "-o", str(tmp_path / "out.jsonl"),
                           "--extractor", "resiliparse", "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "--extractor resiliparse needs the resiliparse extra" in done.stderr
