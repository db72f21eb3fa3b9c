"""The `tlmscore` executable (`tlmscore.cli.__main__`): runs as a module, exits with the command's status,
loads only what the command needs, keeps numpy to one BLAS thread and pydantic's plug-ins unloaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.support.dists import install
from tests.support.paths import FIXTURES

ROWS_IN_DEMO = 17


def test_console_script_runs_as_a_module(tmp_path: Path, demo_path: Path) -> None:
    out = tmp_path / "o.parquet"
    proc = subprocess.run([sys.executable, "-m", "tlmscore", "prepare", str(demo_path), "-o", str(out),
                           "--offline", "--cache-dir", str(tmp_path / "c")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert len(pd.read_parquet(out)) == ROWS_IN_DEMO
    assert "\r" not in proc.stderr  # no progress bars when stderr is not a terminal


def test_the_executable_exits_with_the_command_status(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "tlmscore", "prepare", str(tmp_path / "missing.jsonl"),
                           "-o", str(tmp_path / "o.parquet")], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert "missing.jsonl" in proc.stderr
    assert not (tmp_path / "o.parquet").exists()


EXECUTABLE_STATE = (
    "import atexit, os, sys\n"
    "atexit.register(lambda: print('httpx' in sys.modules, 'click' in sys.modules,"
    " os.environ.get('OPENBLAS_NUM_THREADS')))\n"
    "from tlmscore.__main__ import start\n"
    "start()\n"
)


def executable_state(tmp_path: Path, **env: str) -> str:
    """Run the executable's `cache stats`; return what it had loaded and set when it exited."""
    environment = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | env
    proc = subprocess.run([sys.executable, "-c", EXECUTABLE_STATE, "cache", "stats", "--cache-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False, env=environment)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()[-1]


def test_the_executable_starts_without_numpy(tmp_path: Path) -> None:
    """Only `compare` (its bootstrap interval) and scoring need numpy; a `prepare` or `cache` start-up does not."""
    script = ("import atexit, sys\n"
              "atexit.register(lambda: print('numpy' in sys.modules))\n"
              "from tlmscore.__main__ import start\n"
              "start()\n")
    proc = subprocess.run([sys.executable, "-c", script, "cache", "stats", "--cache-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "False"


def test_a_run_on_files_does_not_load_phoenix(tmp_path: Path) -> None:
    """`phoenix.client` loads the whole Phoenix server package when that is installed (seconds of CPU):
    only a `phoenix://` input or target loads it."""
    script = ("import atexit, sys\n"
              "atexit.register(lambda: print(sorted(m for m in sys.modules if m.split('.')[0] == 'phoenix')))\n"
              "from tlmscore.__main__ import start\n"
              "start()\n")
    out = tmp_path / "rows.jsonl"
    proc = subprocess.run([sys.executable, "-c", script, "score", str(FIXTURES / "demo.jsonl"), "-o", str(out),
                           "--offline", "--pages", str(FIXTURES / "pages"), "--quiet", "--annotate",
                           f"otlp-json:{tmp_path / 'events.json'}"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert out.is_file() and (tmp_path / "events.json").is_file()
    assert proc.stdout.splitlines()[-1] == "[]"


def test_the_executable_does_not_load_the_command_line_of_httpx(tmp_path: Path) -> None:
    """httpx brings its own command line (click and more) along on import; tlmscore never runs it."""
    assert executable_state(tmp_path).startswith("True False")


def test_the_executable_keeps_numpy_to_one_blas_thread_unless_told_otherwise(tmp_path: Path) -> None:
    assert executable_state(tmp_path).endswith(" 1")
    assert executable_state(tmp_path, OPENBLAS_NUM_THREADS="3").endswith(" 3")


PYDANTIC_PLUGIN = """import os, pathlib
pathlib.Path(os.environ["PLUGIN_MARK"]).write_text("loaded")


class Plugin:
    def new_schema_validator(self, *args, **kwargs):
        return None, None, None


plugin = Plugin()
"""


def test_the_executable_leaves_pydantic_plugins_unloaded_unless_told_otherwise(tmp_path: Path) -> None:
    """An installed pydantic plug-in (logfire's: its whole SDK) is imported with the first model made;
    the executable's own process makes its settings without it."""
    site = install(tmp_path / "site", "marking_plugin", PYDANTIC_PLUGIN, "[pydantic]\nmark = marking_plugin:plugin\n")
    mark = tmp_path / "mark"
    base = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    env = base | {"PYTHONPATH": path, "PLUGIN_MARK": str(mark)}
    model = "import pydantic\nclass M(pydantic.BaseModel):\n    x: int = 0\n"
    subprocess.run([sys.executable, "-c", model], env=env, check=True, timeout=120)
    assert mark.read_text(encoding="utf-8") == "loaded"  # the plug-in is seen where nothing stops it
    mark.unlink()
    executable_state(tmp_path / "cache", PYTHONPATH=env["PYTHONPATH"], PLUGIN_MARK=str(mark))
    assert not mark.exists()
    executable_state(tmp_path / "cache", PYTHONPATH=env["PYTHONPATH"], PLUGIN_MARK=str(mark),
                     PYDANTIC_DISABLE_PLUGINS="")
    assert mark.read_text(encoding="utf-8") == "loaded"
