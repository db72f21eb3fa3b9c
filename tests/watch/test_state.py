"""The watch's state: the cursor bounded by `late`, saved whole or not at all, and its evaluator identity."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import tlmscore
from tlmscore.errors import ConfigError
from tlmscore.watch import State, evaluator_of, load_state, save_state


def _at(second: int) -> str:
    return f"2026-01-01T00:{second // 60:02d}:{second % 60:02d}+00:00"


def test_the_watermark_is_the_newest_start_and_seen_keeps_only_calls_within_late_of_it() -> None:
    state = State()
    state.handled({f"s{n}": _at(n) for n in range(100)}, late=10)
    assert state.watermark == "2026-01-01T00:01:39+00:00"
    assert sorted(state.seen) == sorted(f"s{n}" for n in range(89, 100))
    since = state.since(10)
    assert since is not None
    assert since.isoformat() == "2026-01-01T00:01:29+00:00"
    state.handled({"late": _at(5)}, late=10)  # an old call handled late: the watermark stays, the set stays bounded
    assert state.watermark == "2026-01-01T00:01:39+00:00"
    assert "late" not in state.seen


def test_a_state_is_saved_whole_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "watch.json"
    state = State("2026-01-01T00:00:00+00:00", {"a": _at(0)}, "id", {"day": ["2026-01-01", 1.5]}, {"seen": 3})
    save_state(path, state)
    assert load_state(path) == state
    assert [p.name for p in tmp_path.iterdir()] == ["watch.json"]  # no temporary left


def test_a_kill_while_saving_leaves_the_old_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "watch.json"
    save_state(path, State("2026-01-01T00:00:00+00:00"))

    def killed(fd: int) -> None:
        raise KeyboardInterrupt  # the process dies after writing, before the rename

    monkeypatch.setattr(os, "fsync", killed)
    with pytest.raises(KeyboardInterrupt):
        save_state(path, State("2026-02-02T00:00:00+00:00"))
    assert load_state(path).watermark == "2026-01-01T00:00:00+00:00"


def test_an_unreadable_state_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "watch.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="unreadable watch state"):
        load_state(path)
    path.write_text(json.dumps({"version": 99}), encoding="utf-8")
    with pytest.raises(ConfigError, match="not a watch state"):
        load_state(path)
    assert load_state(tmp_path / "none.json") == State()


def test_the_identity_changes_with_what_changes_a_score_and_not_with_what_only_decides_spending() -> None:
    settings = tlmscore.Settings(offline=True)
    base = evaluator_of("judge", {"model": "m", "max_cost": 1.0}, settings)
    assert base.id.startswith(f"tlmscore.judge@{tlmscore.__version__}#")
    assert base.fields() == {"id": base.id, "scorer": "judge", "version": tlmscore.__version__,
                             "settings": base.settings}
    assert evaluator_of("judge", {"model": "m", "max_cost": 9.0, "price_in": 1.0}, settings) == base
    assert evaluator_of("judge", {"model": "other"}, settings) != base
    assert evaluator_of("judge", {"model": "m"}, settings, threshold=0.7) != base
    assert evaluator_of("judge", {"model": "m"}, tlmscore.Settings(offline=True, urls="all")) != base
