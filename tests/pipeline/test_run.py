"""`tlmscore.run`: the library's one run, with the output, resume and calibration the command line has."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Container
from pathlib import Path
from typing import Any

import pytest

import tlmscore
import tlmscore.pipeline
from tests.servers.judge_server import JsonHandler, LoopbackServer
from tlmscore.errors import ConfigError
from tlmscore.scoring import calibration

ROWS_IN_DEMO = 17


def settings(tmp_path: Path, demo_path: Path, **extra: Any) -> tlmscore.Settings:
    return tlmscore.Settings(offline=True, cache_dir=tmp_path / "c", page_files=(demo_path.parent / "pages",),
                             progress=False, **extra)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_run_writes_the_output_and_hands_out_every_chunk(tmp_path: Path, demo_path: Path) -> None:
    out = tmp_path / "scores.jsonl"
    seen: list[dict[str, Any]] = []
    result = tlmscore.run([demo_path], out, scorer="grounding", settings=settings(tmp_path, demo_path, chunk_size=5),
                          on_rows=seen.extend)
    assert result == tlmscore.RunResult(out, ROWS_IN_DEMO, 0, ROWS_IN_DEMO)
    rows = lines(out)
    assert [r["line"] for r in rows] == [r["line"] for r in seen] == sorted(r["line"] for r in rows)
    assert {r["scorer"] for r in rows} == {"grounding"} and "calibrated_score" not in rows[0]


def test_without_an_output_the_rows_only_go_to_the_caller(tmp_path: Path, demo_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    result = tlmscore.run([demo_path], settings=settings(tmp_path, demo_path), on_rows=seen.extend)
    assert result == tlmscore.RunResult(None, ROWS_IN_DEMO, 0, ROWS_IN_DEMO)
    assert len(seen) == ROWS_IN_DEMO and "score" not in seen[0]
    assert list(tmp_path.iterdir()) == []  # offline, no output: nothing written, not even a cache


def test_resume_keeps_the_earlier_rows_and_does_only_the_rest(tmp_path: Path, demo_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    config = settings(tmp_path, demo_path)
    first = tlmscore.run([demo_path], out, settings=config)
    before = lines(out)
    earlier: list[int] = []
    again = tlmscore.run([demo_path], out, settings=config, resume=True, on_start=earlier.append)
    assert earlier == [ROWS_IN_DEMO]
    assert again == tlmscore.RunResult(out, 0, ROWS_IN_DEMO, ROWS_IN_DEMO)
    assert lines(out) == before and len(before) == first.total
    with pytest.raises(ConfigError, match="urls"):
        tlmscore.run([demo_path], out, settings=settings(tmp_path, demo_path, urls="all"), resume=True)


def test_calibration_adds_its_column_from_a_value_or_a_file(tmp_path: Path, demo_path: Path) -> None:
    fitted = calibration.fit([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1], scorer="grounding")
    calibration.save(fitted, tmp_path / "calib.json")
    config = settings(tmp_path, demo_path)
    by_value, by_file = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    tlmscore.run([demo_path], by_value, scorer="grounding", settings=config, calibration=fitted)
    tlmscore.run([demo_path], by_file, scorer="grounding", settings=config, calibration=tmp_path / "calib.json")
    rows = lines(by_value)
    assert [r["calibrated_score"] for r in rows] == [r["calibrated_score"] for r in lines(by_file)]
    for row in rows:
        expected = calibration.apply(fitted, [math.nan if row["score"] is None else row["score"]])[0]
        assert (row["calibrated_score"] is None) == math.isnan(expected)
    assert any(r["calibrated_score"] is not None for r in rows)
    with pytest.raises(ConfigError, match="grounding"):
        tlmscore.run([demo_path], tmp_path / "c.jsonl", scorer="judge", options={"model": "m"}, settings=config,
                     calibration=fitted)
    assert not (tmp_path / "c.jsonl").exists()


def test_score_and_run_are_one_run_calibration_pages_and_converters_on_both(tmp_path: Path, demo_path: Path) -> None:
    """`tlmscore.score` is `tlmscore.run` with no output file: what one accepts, the other does, with the same rows."""
    from tlmscore import MemoryPages

    fitted = calibration.fit([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1], scorer="grounding")
    calibration.save(fitted, tmp_path / "calib.json")
    config = settings(tmp_path, demo_path)
    out = tmp_path / "run.jsonl"
    tlmscore.run([demo_path], out, scorer="grounding", settings=config, calibration=fitted)
    scored = tlmscore.score(str(demo_path), "grounding", config, calibration=tmp_path / "calib.json")
    assert list(scored.columns)[-1] == "calibrated_score"
    assert [r["calibrated_score"] for r in lines(out)] == [
        None if math.isnan(v) else v for v in scored["calibrated_score"]]
    with pytest.raises(ConfigError, match="grounding"):  # a calibration fitted for another scorer, before any work
        tlmscore.score(str(demo_path), "grounding", config, calibration=calibration.fit([0.1, 0.9], [0, 1],
                                                                                        scorer="judge"))

    def shouting(item: dict[str, Any], ctx: Any) -> list[Any]:
        return [tlmscore.model.Message(role="system", text="A SEARCH WAS HERE")]

    only = MemoryPages({"https://docs.python.org/3/library/asyncio-task.html": "Held in memory: asyncio tasks."})
    bare = config.model_copy(update={"page_files": ()})  # no page files: the caller's pages, else none (offline)
    kept = tmp_path / "kept.jsonl"
    tlmscore.run([demo_path], kept, settings=bare, pages=only, converters={"file_search_call": shouting})
    prepared = tlmscore.prepare(str(demo_path), bare, pages=only, converters={"file_search_call": shouting})
    assert [r["prompt"] for r in lines(kept)] == list(prepared["prompt"])
    assert any("Held in memory: asyncio tasks." in (r["prompt"] or "") for r in lines(kept))  # the run used the pages
    assert any("A SEARCH WAS HERE" in (r["prompt"] or "") for r in lines(kept))  # and the converter


def test_a_run_builds_its_scorer_once(tmp_path: Path, demo_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tlmscore.pipeline._run as run_module
    from tlmscore.scoring.base import get_scorer

    built: list[str] = []

    def counting(name: Any, options: Any = None) -> Any:
        built.append(name)
        return get_scorer(name, options)

    monkeypatch.setattr(run_module, "get_scorer", counting)
    config = settings(tmp_path, demo_path, chunk_size=5)
    tlmscore.run([demo_path], tmp_path / "out.jsonl", scorer="grounding", settings=config)
    assert built == ["grounding"]  # checked before any work, then used for every chunk


# ---------------------------------------------------------------- engines and the scorer wrappers


class Recording:
    """An engine that keeps the job it is given and makes one row per call (what a third engine would get)."""

    def __init__(self) -> None:
        self.jobs: list[tlmscore.pipeline.Job] = []
        self.skips: list[Container[tuple[str, int]]] = []

    def rows(self, job: tlmscore.pipeline.Job, skip: Container[tuple[str, int]],
             sink: Callable[[list[tlmscore.Row]], None]) -> None:
        self.jobs.append(job)
        self.skips.append(skip)
        if ("made", 1) not in skip:
            sink([tlmscore.Row(id="a", source="made", line=1, scorer="judge", score=0.5)])


def test_run_hands_an_engine_the_checked_job(tmp_path: Path, demo_path: Path) -> None:
    fitted = calibration.fit([0.1, 0.9], [0, 1], scorer="judge")
    calibration.save(fitted, tmp_path / "calib.json")
    engine = Recording()
    assert isinstance(engine, tlmscore.pipeline.Engine) and isinstance(tlmscore.Local(), tlmscore.pipeline.Engine)
    config = settings(tmp_path, demo_path)
    out = tmp_path / "out.jsonl"
    with LoopbackServer(JsonHandler) as judge:  # an endpoint that answers (the run checks it before the engine)
        options = {"model": "m", "base_url": judge.url}
        result = tlmscore.run([demo_path], out, scorer="judge", options=options, settings=config,
                              calibration=tmp_path / "calib.json", engine=engine)
        (job,) = engine.jobs
        assert job.inputs == (demo_path,) and job.output == out and job.command == "score"
        assert job.calibration == fitted  # the file, loaded and checked against the scorer before the engine runs
        assert job.options["cache_dir"] == str(tmp_path / "c" / "judge")  # the verdict cache, as the local run has it
        assert job.columns()[-1] == "calibrated_score"
        made = job.built
        assert isinstance(made, calibration.Calibrated) and made.name == "judge"
        # the engine makes the rows; the run writes them, and resumes any engine under the same rules
        assert (result.rows, result.total) == (1, 1) and json.loads(out.read_text(encoding="utf-8"))["id"] == "a"
        again = tlmscore.run([demo_path], out, scorer="judge", options=options, settings=config, resume=True,
                             calibration=tmp_path / "calib.json", engine=engine)
        assert ("made", 1) in engine.skips[-1] and (again.rows, again.earlier, again.total) == (0, 1, 1)
        with pytest.raises(ConfigError, match="urls"):
            tlmscore.run([demo_path], out, scorer="judge", options=options, resume=True, engine=engine,
                         settings=config.model_copy(update={"urls": "all"}), calibration=tmp_path / "calib.json")
    assert len(engine.jobs) == 2  # the changed setting was refused before the engine was asked


def test_a_run_decides_how_each_input_is_read_once(tmp_path: Path, demo_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain index's passes and the read share one decision per input (its reader, or its kind)."""
    import tlmscore.pipeline._stages as stages

    asked: list[str] = []
    find = stages.find_reader

    def counting(address: str, fmt: str | None = None) -> Any:
        asked.append(address)
        return find(address, fmt)

    monkeypatch.setattr(stages, "find_reader", counting)
    rows = tlmscore.prepare([str(demo_path)], settings(tmp_path, demo_path))
    assert len(rows) == ROWS_IN_DEMO and asked == [str(demo_path)]
