"""Regression fixtures: golden prompts (and pages) recorded once, checked offline on any machine.

A fixture folder holds transcript files (`*.jsonl`, `*.json`) and, once recorded:

    golden/<file stem>/<record>.prompt.txt     the rendered prompt
    golden/<file stem>/<record>.response.txt   the rendered response
    golden/<file stem>/<record>.json           warnings, error and URL counts (and score, when recorded)
    pages/<key>.json                           every page the prompts used, as a page record

Files named `*batch_input.jsonl` are OpenAI Batch API input files: they are joined to the batch
output lines by `custom_id` instead of being read as transcripts. All files are rendered in one
run, so a chain split across files resolves.

`check` renders again with pages only from `pages/` (no cache, no network) and reports every
difference as a unified diff.

Recorded with a scorer (`record_fixtures(..., scoring=GoldenScoring("grounding"))`, or
`tlmscore fixtures record DIR --scorer grounding`), a folder also guards how its answers score:

    golden/scoring.json                        the scorer, its options and the score tolerance

and each record's `.json` holds its score. `check` then scores again and reports a score that
moved by more than the tolerance (the rest of the `.json` must still match exactly).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import re
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, aclosing
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tlmscore._urls import url_key
from tlmscore.errors import ConfigError
from tlmscore.evidence.layers import LayeredPages, load_page_records, open_page_source
from tlmscore.evidence.page import AsOf, MemoryPages, Page, PageSource, pages_as_done
from tlmscore.output import Row
from tlmscore.pipeline import aiter_chunks, run_sync
from tlmscore.scoring.base import Scorer, get_scorer
from tlmscore.settings import Settings

__all__ = [
    "BATCH_INPUT_SUFFIX",
    "FixtureReport",
    "GoldenScoring",
    "RecordingPages",
    "check_fixtures",
    "golden_name",
    "golden_scoring",
    "record_fixtures",
]

BATCH_INPUT_SUFFIX = "batch_input.jsonl"
GOLDEN = "golden"
PAGES = "pages"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_NAME = 80
_META_KEYS = ("warnings", "error", "n_tool_calls", "n_urls", "n_urls_ok", "n_urls_failed")
SCORING = "scoring.json"


@dataclass(frozen=True)
class GoldenScoring:
    """How a fixture folder's answers are scored, and how far a score may move before `check` reports it.

    Options are the scorer's own (never a key: scorers read keys from the environment).
    """

    scorer: str
    options: dict[str, Any] = field(default_factory=dict)
    tolerance: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.tolerance <= 1.0:
            raise ConfigError(f"score tolerance {self.tolerance}: expected a number between 0 and 1")


def golden_scoring(folder: Path) -> GoldenScoring | None:
    """The folder's `golden/scoring.json`, or None when it was recorded without a scorer."""
    path = folder / GOLDEN / SCORING
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
        return GoldenScoring(scorer=str(value["scorer"]), options=dict(value.get("options") or {}),
                             tolerance=float(value.get("tolerance", 0.0)))
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a scoring file: {exc}") from None


class RecordingPages(PageSource):
    """A page source that remembers every page it handed out, to save them with the fixtures."""

    def __init__(self, inner: PageSource) -> None:
        self._inner = inner
        self.seen: dict[str, Page] = {}

    async def pages_as_done(self, urls: Sequence[str],
                            as_of: AsOf | None = None) -> AsyncGenerator[tuple[str, Page], None]:
        """Pages from the inner source as they come, remembered by `url_key`."""
        async with aclosing(pages_as_done(self._inner, urls, as_of)) as found:
            async for url, page in found:
                self.seen[url_key(page.url)] = page
                yield url, page


@dataclass
class FixtureReport:
    """What a check found: the transcripts whose golden files differ, with their diffs."""

    checked: int = 0
    changed: list[str] = field(default_factory=list)
    diffs: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing changed."""
        return not self.changed


def _inputs(folder: Path) -> tuple[list[Path], list[Path]]:
    """(transcript files, Batch API input files) of a fixture folder."""
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a directory")
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".jsonl", ".json"))
    batch = [p for p in files if p.name.endswith(BATCH_INPUT_SUFFIX)]
    transcripts = [p for p in files if p not in batch]
    if not transcripts:
        raise ConfigError(f"{folder}: no transcript files (*.jsonl, *.json)")
    return transcripts, batch


def golden_name(row: Mapping[str, Any]) -> str:
    """The file name stem of a row's golden files: its id, or its line when the id was made up (its file and line)."""
    source, line = str(row["source"]), int(row["line"])
    rid = str(row["id"])
    made_up = rid in (f"{source}:{line}", f"{Path(source).name}:{line}")
    name = f"line-{line:05d}" if made_up else _UNSAFE.sub("_", rid).strip("_")
    if len(name) > _MAX_NAME:
        name = name[: _MAX_NAME - 20] + "-" + hashlib.sha256(rid.encode()).hexdigest()[:12]
    return name


def _golden_files(folder: Path, row: Row) -> dict[Path, str]:
    base = folder / GOLDEN / Path(str(row["source"])).stem / golden_name(row)
    meta = {k: row.get(k) for k in _META_KEYS}
    for key in ("score", "scorer"):
        if key in row:
            value = row[key]
            meta[key] = None if isinstance(value, float) and math.isnan(value) else value
    return {
        base.with_name(base.name + ".prompt.txt"): (row.get("prompt") or "") + "\n",
        base.with_name(base.name + ".response.txt"): (row.get("response") or "") + "\n",
        base.with_name(base.name + ".json"): json.dumps(meta, indent=2, ensure_ascii=False, sort_keys=True,
                                                       default=str) + "\n",
    }


def _page_file(folder: Path, page: Page) -> Path:
    return folder / PAGES / f"{hashlib.sha256(url_key(page.url).encode()).hexdigest()[:24]}.json"


def _saved_pages(folder: Path) -> MemoryPages:
    pages_dir = folder / PAGES
    return MemoryPages(load_page_records(pages_dir) if pages_dir.is_dir() else [])


async def _render(folder: Path, settings: Settings, pages: PageSource,
                  scorer: Scorer | None = None) -> list[Row]:
    """Every transcript of the folder in one run (scored when `scorer`), so chains across its files resolve."""
    transcripts, batch = _inputs(folder)
    settings = settings.model_copy(update={"batch_inputs": (*settings.batch_inputs, *batch)})
    rows: list[Row] = []
    async for chunk in aiter_chunks(transcripts, settings, pages=pages, scorer=scorer):
        rows.extend(_portable(row, folder) for row in chunk)
    return rows


def _portable(row: Row, folder: Path) -> Row:
    """The row with the folder's own path taken out of messages, so golden files move with it."""
    prefix = f"{folder}{os.sep}"
    return replace(row, error=row.error.replace(prefix, "") if row.error is not None else None,
                   warnings=tuple(w.replace(prefix, "") for w in row.warnings))


async def _record(folder: Path, settings: Settings, pages: PageSource | None,
                  scorer: Scorer | None) -> tuple[list[Row], list[Page]]:
    """The folder's rows and every page they used: from its saved pages, `settings.page_files`, then `pages`.

    The page files (`--pages`) are read behind the recorder, not in front of it as a run reads them,
    so the pages taken from them are saved in the folder too and `check` finds them there.
    """
    async with AsyncExitStack() as stack:
        inner = await stack.enter_async_context(open_page_source(settings, given=pages))
        recorder = RecordingPages(LayeredPages(_saved_pages(folder), inner))
        rows = await _render(folder, settings.model_copy(update={"page_files": ()}), recorder, scorer)
    return rows, list(recorder.seen.values())


def record_fixtures(folder: Path, settings: Settings | None = None,
                    pages: PageSource | None = None, *, scoring: GoldenScoring | None = None) -> int:
    """Render every transcript in `folder` and write its golden files and the pages it used.

    Pages already saved in the folder are used first, then `settings.page_files`; the rest come from
    `pages` (default: the cache, then the network unless `settings.offline`). Every page used is
    saved in the folder's `pages/`, so `check_fixtures` passes straight after. With `scoring` (or a folder recorded with
    one before), every answer is scored too and its score kept. Returns the number of transcripts.
    """
    settings = settings or Settings()
    scoring = scoring or golden_scoring(folder)
    scorer = get_scorer(scoring.scorer, scoring.options) if scoring else None
    rows, used = run_sync(lambda: _record(folder, settings, pages, scorer))
    _write(folder, rows, used)
    if scoring is not None:
        (folder / GOLDEN / SCORING).write_text(json.dumps(asdict(scoring), indent=2, sort_keys=True) + "\n",
                                               encoding="utf-8")
    return len(rows)


def _write(folder: Path, rows: list[Row], pages: Iterable[Page]) -> None:
    for page in pages:
        target = _page_file(folder, page)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(page.to_record(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for row in rows:
        for path, text in _golden_files(folder, row).items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")


def _json_change(old: str, new: str, tolerance: float) -> str | None:
    """How two golden `.json` texts differ: None when only `score` moved, by at most `tolerance`."""
    try:
        before, after = json.loads(old), json.loads(new)
    except json.JSONDecodeError:
        return ""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return ""
    was, now = before.pop("score", None), after.pop("score", None)
    if before != after:
        return ""
    if was is None or now is None:
        return None if was is now else f"score {was} → {now}\n"
    moved = abs(float(now) - float(was))
    return f"score moved by {moved:.4f}, beyond the tolerance {tolerance:g}\n" if moved > tolerance + 1e-12 else None


def _change(path: Path, old: str, text: str, scoring: GoldenScoring | None) -> str | None:
    """None when the golden file still holds; else a note to put before its diff ("" for none)."""
    if old == text:
        return None
    if scoring is None or path.suffix != ".json":
        return ""
    return _json_change(old, text, scoring.tolerance)


def check_fixtures(folder: Path, settings: Settings | None = None, *, update: bool = False,
                   score_tolerance: float | None = None) -> FixtureReport:
    """Render `folder` offline from its saved pages and compare with its golden files.

    A folder recorded with a scorer is scored again; a score further than the tolerance (the
    folder's, or `score_tolerance`) from its golden score is a change. With `update`, changed golden
    files are rewritten (and the report still lists them).
    """
    settings = (settings or Settings()).model_copy(update={"offline": True})
    saved = _saved_pages(folder)
    scoring = golden_scoring(folder)
    if scoring is not None and score_tolerance is not None:
        scoring = GoldenScoring(scoring.scorer, scoring.options, score_tolerance)
    scorer = get_scorer(scoring.scorer, scoring.options) if scoring else None
    rows = run_sync(lambda: _render(folder, settings, saved, scorer))
    report = FixtureReport(checked=len(rows))
    for row in rows:
        for path, text in _golden_files(folder, row).items():
            old = path.read_text(encoding="utf-8") if path.exists() else ""
            note = _change(path, old, text, scoring)
            if note is None:
                continue
            label = f"{Path(str(row['source'])).name}:{row['line']} ({row['id']})"
            if label not in report.changed:
                report.changed.append(label)
            rel = path.relative_to(folder)
            report.diffs.append((f"{rel}: {note}" if note else "") + "".join(difflib.unified_diff(
                old.splitlines(keepends=True), text.splitlines(keepends=True),
                fromfile=f"a/{rel}", tofile=f"b/{rel}")))
            if update:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    return report

