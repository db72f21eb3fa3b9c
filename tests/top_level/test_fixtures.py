"""Regression fixtures: record, check offline, diff on a prompt-format change, update."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tlmscore.cli import main
from tlmscore.fixtures import check_fixtures
from tlmscore.rendering import _prompt as prompt

RECORDS = ["order-status-tool-results", "web-search-jwst-sources", "hr-file-search-results"]


@pytest.fixture
def folder(tmp_path: Path, demo_path: Path) -> Path:
    """A fixture folder with three demo transcripts (one with web pages) and their pages."""
    target = tmp_path / "fx"
    target.mkdir()
    lines = [line for line in demo_path.read_text(encoding="utf-8").splitlines()
             if any(f'"id": "{r}"' in line for r in RECORDS)]
    (target / "cases.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    shutil.copytree(demo_path.parent / "pages", target / "pages")
    return target


def record(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fixtures", "record", str(folder), "--offline", "--cache-dir", str(folder.parent / "c")]) == 0
    capsys.readouterr()


def test_record_writes_readable_golden_files(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record(folder, capsys)
    prompt_file = folder / "golden" / "cases" / "web-search-jwst-sources.prompt.txt"
    assert "<tool_response>" in prompt_file.read_text(encoding="utf-8")
    assert (folder / "golden" / "cases" / "order-status-tool-results.response.txt").is_file()
    assert main(["fixtures", "check", str(folder)]) == 0
    assert "3 transcripts match" in capsys.readouterr().err


def test_record_with_pages_from_elsewhere_keeps_them_so_check_passes_straight_after(
        folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = tmp_path / "my-pages"
    shutil.move(folder / "pages", elsewhere)  # the pages are the user's, outside the fixture folder
    assert main(["fixtures", "record", str(folder), "--pages", str(elsewhere), "--offline",
                 "--cache-dir", str(tmp_path / "c")]) == 0
    kept = sorted(p.name for p in (folder / "pages").iterdir())
    assert kept and len(kept) <= len(list(elsewhere.iterdir()))  # the pages the records used, copied in
    capsys.readouterr()
    assert main(["fixtures", "check", str(folder), "--cache-dir", str(tmp_path / "empty")]) == 0
    assert "3 transcripts match" in capsys.readouterr().err
    golden = (folder / "golden" / "cases" / "web-search-jwst-sources.json").read_text(encoding="utf-8")
    assert '"n_urls_ok": 2' in golden  # recorded with the pages (the third URL has none), not without them


def test_a_prompt_format_change_fails_check_with_a_diff_until_updated(
        folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    record(folder, capsys)
    monkeypatch.setattr(prompt, "TOOL_DEFINITIONS_PREFIX", prompt.TOOL_DEFINITIONS_PREFIX.replace(
        "You are an AI Assistant", "You are a careful AI Assistant"))
    assert main(["fixtures", "check", str(folder)]) == 1
    captured = capsys.readouterr()
    assert "order-status-tool-results" in captured.err
    assert "-System: You are an AI Assistant" in captured.out
    assert "+System: You are a careful AI Assistant" in captured.out
    assert "+++ b/golden/cases/order-status-tool-results.prompt.txt" in captured.out
    assert main(["fixtures", "check", str(folder), "--update"]) == 0
    assert main(["fixtures", "check", str(folder)]) == 0


def test_check_replays_with_an_empty_cache_and_no_network(folder: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    record(folder, capsys)
    moved = tmp_path / "elsewhere"
    shutil.copytree(folder, moved)
    env_script = textwrap.dedent(f"""
        import socket, sys
        def refuse(*a, **k):
            raise OSError("network used")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        from tlmscore.cli import main
        sys.exit(main(["fixtures", "check", {str(moved)!r}, "--cache-dir", {str(tmp_path / "empty")!r}]))
    """)
    proc = subprocess.run([sys.executable, "-c", env_script], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (tmp_path / "empty").exists()


def test_a_missing_page_file_shows_as_a_change(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record(folder, capsys)
    for page in (folder / "pages").glob("*.json"):
        if "wikipedia" in page.read_text(encoding="utf-8"):
            page.unlink()
    report = check_fixtures(folder)
    assert [c.split(" ")[0] for c in report.changed] == ["cases.jsonl:3"]
    assert any("offline_miss" in d for d in report.diffs)


# A user's suite, run as pytest runs it. Its folder has no pytest configuration, so the plug-ins of the
# installed packages load; those of arize-phoenix-client (the whole Phoenix server package) and langsmith
# cost seconds of CPU each start and take no part: left out, as the project's own configuration does.
NESTED_PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:phoenix",
                 "-p", "no:langsmith_plugin"]


def test_snapshot_fixture_in_a_user_suite(folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record(folder, capsys)
    test_file = tmp_path / "test_user.py"
    test_file.write_text(f"def test_prompts(tlmscore_snapshot):\n    tlmscore_snapshot.check({str(folder)!r})\n",
                         encoding="utf-8")
    ok = subprocess.run([*NESTED_PYTEST, str(test_file)],
                        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout
    golden = folder / "golden" / "cases" / "hr-file-search-results.response.txt"
    golden.write_text("something else\n", encoding="utf-8")
    failed = subprocess.run([*NESTED_PYTEST, str(test_file)],
                            capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)
    assert failed.returncode == 1 and "hr-file-search-results" in failed.stdout and "-something else" in failed.stdout
    updated = subprocess.run([*NESTED_PYTEST, str(test_file),
                              "--tlmscore-update"], capture_output=True, text=True, timeout=120, check=False,
                             cwd=tmp_path)
    assert updated.returncode == 0, updated.stdout
    assert golden.read_text(encoding="utf-8") != "something else\n"


def test_the_repository_fixtures_match_their_golden_files() -> None:
    from tests.support.paths import FIXTURES

    report = check_fixtures(FIXTURES)
    assert report.checked >= 50
    assert report.ok, "\n".join(report.diffs)
