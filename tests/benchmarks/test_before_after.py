"""`benchmarks/before_after.py`: each tree measured with its own code, CPU of the children counted, refs cleaned up."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.paths import ROOT

SCRIPT = ROOT / "benchmarks" / "before_after.py"
BUSY = """import sys, tlmscore
total = sum(i * i for i in range(3_000_000))
print("tlmscore from", tlmscore.__file__)
print("args", *sys.argv[1:])
"""


def before_after() -> ModuleType:
    spec = importlib.util.spec_from_file_location("before_after", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["before_after"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def fake_tree(root: Path, script: str = BUSY) -> Path:
    """A checkout with a `tlmscore` package of its own and a benchmark script that burns some CPU."""
    (root / "tlmscore").mkdir(parents=True)
    (root / "tlmscore" / "__init__.py").write_text("", encoding="utf-8")
    (root / "benchmarks").mkdir()
    (root / "benchmarks" / "stream_bench.py").write_text(script, encoding="utf-8")
    return root


def test_a_tree_runs_its_own_script_with_its_own_package_and_its_cpu_is_counted(tmp_path: Path) -> None:
    ba = before_after()
    tree = ba.Tree("before", fake_tree(tmp_path / "old"))
    measured = ba.measure(tree, "benchmarks/stream_bench.py", ["--sizes", "5"], timeout=120)
    assert measured.code == 0
    assert f"tlmscore from {tmp_path / 'old' / 'tlmscore' / '__init__.py'}" in measured.output
    assert "args --sizes 5" in measured.output
    assert measured.cpu > 0


def test_a_tree_that_would_import_another_trees_package_stops_the_run(tmp_path: Path) -> None:
    ba = before_after()
    bare = tmp_path / "bare"
    bare.mkdir()  # no tlmscore of its own: the installed one would be measured
    ba.check_imports([ba.Tree("after", ba.ROOT)])
    with pytest.raises(SystemExit, match="imports tlmscore from"):
        ba.check_imports([ba.Tree("before", bare)])


def test_a_failed_run_is_reported_with_its_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ba = before_after()
    old = ba.Tree("before", fake_tree(tmp_path / "old", "raise SystemExit('broken on purpose')\n"))
    new = ba.Tree("after", fake_tree(tmp_path / "new"))
    assert ba.run(["stream"], [new, old], 1, {}, 120) == 1
    shown = capsys.readouterr().out
    assert "(before: exit 1)" in shown and "broken on purpose" in shown
    assert "after wall s" in shown and "after / before: wall" in shown


def test_the_outputs_are_shown_in_two_columns() -> None:
    ba = before_after()
    text = ba.side_by_side("a 1\nb 2\nc 3", "a 9", ("after", "before"))
    lines = text.splitlines()
    assert lines[0].split(" | ") == ["after", "before"]
    assert lines[2] == "a 1   | a 9" and lines[4] == "c 3   | "


def test_a_ref_is_checked_out_and_removed_again(tmp_path: Path) -> None:
    ba = before_after()
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "--quiet"], check=True)
    (repo / "marker.txt").write_text("first", encoding="utf-8")
    subprocess.run([*git, "add", "marker.txt"], check=True)
    subprocess.run([*git, "commit", "--quiet", "-m", "first"], check=True)
    (repo / "marker.txt").write_text("changed, not committed", encoding="utf-8")
    with ba.checked_out("HEAD", repo) as folder:
        assert (folder / "marker.txt").read_text(encoding="utf-8") == "first"
    assert not folder.exists()
    listed = subprocess.run([*git, "worktree", "list"], capture_output=True, text=True, check=True).stdout
    assert len(listed.splitlines()) == 1
