"""Notebook views: escaped HTML, cited spans marked by support, pages with their status."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
import pandas as pd
import pytest

from tlmscore import audit, read_transcripts
from tlmscore._urls import url_key
from tlmscore.audit import TranscriptView, plot_fetch_status, plot_scores, results_html
from tlmscore.evidence.layers import load_page_records
from tlmscore.evidence.page import MemoryPages, Page

matplotlib.use("Agg")


def view_of(demo_path: Path, record_id: str) -> TranscriptView:
    (t,) = [t for t in read_transcripts(demo_path) if t.id == record_id]
    pages = MemoryPages(load_page_records(demo_path.parent / "pages"))
    return TranscriptView(t, pages={url_key(u): pages.get(u) for u in t.raw and _urls(t)})


def _urls(t: object) -> list[str]:
    from tlmscore.convert import convert_transcript

    return list(convert_transcript(t).urls)  # type: ignore[arg-type]


def test_transcript_view_marks_citations_and_page_status(demo_path: Path) -> None:
    html = view_of(demo_path, "web-search-jwst-sources")._repr_html_()
    assert '<mark class="supported"' in html
    assert '<mark class="unavailable"' in html  # the 404 page
    assert '<span class="badge failed">http_error</span>' in html
    assert '<span class="badge ok">ok</span>' in html
    assert "could not be retrieved" in html


def test_a_contradicted_citation_is_marked_unsupported() -> None:
    record = {"id": "x", "request": {"input": "How tall?", "tools": [{"type": "web_search"}]},
              "response": {"id": "r", "object": "response", "output": [
                  {"type": "web_search_call", "id": "ws", "status": "completed",
                   "action": {"type": "search", "query": "tower height",
                              "sources": [{"type": "url", "url": "https://a.example/t"}]}},
                  {"type": "message", "id": "m", "role": "assistant", "status": "completed", "content": [
                      {"type": "output_text", "text": "Seagulls nest under bridges in winter. (a.example)",
                       "annotations": [{"type": "url_citation", "url": "https://a.example/t", "title": "T",
                                        "start_index": 39, "end_index": 50}]}]}]}}
    (t,) = read_transcripts(record)
    page = Page(url="https://a.example/t", status="ok", text="The tower is 330 metres tall.")
    html = TranscriptView(t, pages={page.url: page})._repr_html_()
    assert '<mark class="unsupported"' in html


def test_everything_from_the_log_is_escaped() -> None:
    record = {"request": {"input": "<script>alert(1)</script>"},
              "response": {"output": [{"type": "message", "role": "assistant", "content": [
                  {"type": "output_text", "text": "<img src=x onerror=alert(2)>", "annotations": []}]}]}}
    (t,) = read_transcripts(record)
    html = TranscriptView(t)._repr_html_()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html
    table = results_html(pd.DataFrame([{"id": "<b>x</b>", "score": 0.5}]))
    assert "<b>x</b>" not in table and "&lt;b&gt;x&lt;/b&gt;" in table


def test_plots_draw() -> None:
    ax = plot_scores(pd.DataFrame({"score": [0.1, 0.5, 0.9, float("nan")]}))
    assert sum(p.get_height() for p in ax.patches) == 3
    ax = plot_fetch_status([Page(url="a", status="ok", text="t"), Page(url="b", status="timeout"),
                            Page(url="c", status="timeout")])
    assert sorted(p.get_height() for p in ax.patches) == [1, 2]


@pytest.mark.parametrize("plot", ["plot_scores", "plot_score_by", "plot_fetch_status"])
def test_a_plot_without_matplotlib_names_the_extra_in_one_line(plot: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With matplotlib's import made to fail (as where it is not installed): an ImportError naming the extra."""
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)  # None: `import` raises ImportError
    with pytest.raises(ImportError) as raised:
        getattr(audit, plot)(pd.DataFrame({"score": [0.5], "model": ["m"]}))
    assert str(raised.value) == "tlmscore.audit's plots need matplotlib: pip install 'tlmscore[notebook]'"
    assert raised.value.__cause__ is None and raised.value.__suppress_context__  # one line, no chained traceback


def test_counts_are_ticked_at_whole_numbers() -> None:
    """Pages and answers are counted: no tick at 0.5 or 1.5 on a plot of one or two."""
    ax = plot_fetch_status([Page(url="a", status="ok", text="t"), Page(url="b", status="timeout"),
                            Page(url="c", status="timeout")])
    ax.figure.canvas.draw()
    assert [t for t in ax.get_yticks() if t != int(t)] == []
    ax = plot_scores(pd.DataFrame({"score": [0.1, 0.15, 0.9]}))
    ax.figure.canvas.draw()
    assert [t for t in ax.get_yticks() if t != int(t)] == []


def test_the_scorers_verdict_on_a_citation_is_shown(tmp_path: Path) -> None:
    import tlmscore
    from tests.support.paths import FIXTURES
    from tlmscore import Settings

    settings = Settings(offline=True, page_files=(FIXTURES / "labelled" / "pages",), cache_dir=tmp_path,
                        progress=False)
    df = tlmscore.score([FIXTURES / "labelled" / "labelled.jsonl"], settings=settings)
    row = df[df.id == "python-3.12-contradicted-5"].iloc[0]
    html = TranscriptView.from_row(row, settings)._repr_html_()
    marks = html.split("<mark class=")[1:]
    assert len(marks) == 3
    assert marks[0].startswith('"supported"') and marks[1].startswith('"unsupported"')
    assert marks[2].startswith('"unsupported"')


def test_a_row_is_shown_as_the_run_rendered_it_with_the_calls_it_continues(tmp_path: Path) -> None:
    import tlmscore
    from tests.support.paths import FIXTURES
    from tlmscore import Settings

    inputs = [FIXTURES / "chain_a.jsonl", FIXTURES / "chain_b.jsonl"]
    settings = Settings(offline=True, page_files=(FIXTURES / "pages",), cache_dir=tmp_path, progress=False)
    df = tlmscore.prepare(inputs, settings)
    row = df[df.id == "chain-3-packing"].iloc[0]
    assert "I'm in Lisbon this weekend" in row["prompt"]  # chain-1's question, two files and two calls back
    view = TranscriptView.from_row(row, settings, inputs=inputs)
    shown = [turn.text for turn in view.conversation.turns if hasattr(turn, "text")]
    assert any("I'm in Lisbon this weekend" in text for text in shown)
    assert "I&#x27;m in Lisbon this weekend" in view._repr_html_()
    alone = TranscriptView.from_row(row, settings)  # only its own file: the call it continues is not there
    assert not any("I'm in Lisbon this weekend" in getattr(t, "text", "") for t in alone.conversation.turns)
