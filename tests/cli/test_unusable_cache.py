"""A page cache that cannot be written, as a user meets it: one line, exit 2, nothing written.

The tests run as root, whom no permission bit stops, so each makes the cache truly unwritable:
a read-only file system (a read-only bind mount in a mount namespace of the command's own, as a
container's read-only HOME is), or a command that permission bits do stop (root without the
capabilities that override them, `setpriv`, as any other user is) and a folder it may not write.
`/sys`, which refuses new files even to root, is a row of test_bad_input.py's table.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES, ROOT

BOUND = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
"""A command run without the capabilities that let root past permission bits: a folder's mode binds it, as
it binds every other user (and it still reads this checkout and this interpreter, wherever they are)."""
FIX = "(give --cache-dir DIR or set TLMSCORE_CACHE_DIR to a writable folder, or run --offline)"


def cli_env(home: Path) -> dict[str, str]:
    """The command's environment: this checkout's code, HOME as given, no cache variable."""
    env = {k: v for k, v in os.environ.items() if k not in ("TLMSCORE_CACHE_DIR", "XDG_CACHE_HOME")}
    return env | {"HOME": str(home), "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder every user may read (the test's own tmp_path is root's alone), with the demo input."""
    folder = Path(tempfile.mkdtemp(prefix="tlmscore-cache-test-"))
    folder.chmod(0o755)
    shutil.copy(FIXTURES / "demo.jsonl", folder / "logs.jsonl")
    (folder / "logs.jsonl").chmod(0o644)
    (folder / "out").mkdir(mode=0o777)
    (folder / "out").chmod(0o777)  # whatever the umask
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def can_mount() -> str | None:
    """Why a read-only bind mount cannot be made here (None: it can)."""
    if shutil.which("unshare") is None:
        return "no unshare (util-linux)"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind -o ro / /mnt"], capture_output=True,
                           text=True, check=False)
    return None if probe.returncode == 0 else f"no mount namespace here: {probe.stderr.strip()}"


def assert_refused(proc: subprocess.CompletedProcess[str], line: str, out: Path) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [line]
    assert list(out.iterdir()) == []  # no OUT.manifest.json, no checkpoint: refused before any file is written


@pytest.mark.system("root")
def test_a_read_only_home_refuses_the_default_cache_in_one_line(shared_folder: Path) -> None:
    why = can_mount()
    assert why is None, why
    home = shared_folder / "home"
    home.mkdir()
    command = [sys.executable, "-m", "tlmscore", "score", "logs.jsonl", "-o", "out/scores.jsonl"]
    script = f'mount --bind -o ro "{home}" "{home}" && exec "$@"'
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", *command], capture_output=True, text=True,
                          timeout=120, check=False, cwd=shared_folder, env=cli_env(home))
    cache = home / ".cache" / "tlmscore"
    assert_refused(proc, f"tlmscore: error: {cache}: the cache folder cannot be written: {home}: Read-only file "
                         f"system {FIX}", shared_folder / "out")
    # the same mount, the cache elsewhere: the run goes (so what was refused was the cache)
    ok = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", *command, "--offline", "--quiet"],
                        capture_output=True, text=True, timeout=300, check=False, cwd=shared_folder,
                        env=cli_env(home))
    assert ok.returncode == 0, ok.stderr
    assert (shared_folder / "out" / "scores.jsonl").is_file()


def bound_by_permissions() -> str | None:
    """Why tlmscore cannot be run here bound by permission bits (None: it can)."""
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        return "no setpriv, or not root (then permission bits are enough; see test_checks.py)"
    probe = subprocess.run([*BOUND, sys.executable, "-c", "import tlmscore.cli"], capture_output=True, text=True,
                           check=False, cwd="/", env=cli_env(Path("/")))
    return None if probe.returncode == 0 else f"setpriv cannot drop capabilities here: {probe.stderr[-200:]}"


@pytest.mark.system("root")
@pytest.mark.parametrize("where", ["HOME", "--cache-dir"])
def test_a_cache_the_user_may_not_write_is_refused_in_one_line(shared_folder: Path, where: str) -> None:
    why = bound_by_permissions()
    assert why is None, why
    locked = shared_folder / "locked"
    locked.mkdir()
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    cache = locked / ".cache" / "tlmscore" if where == "HOME" else locked / "cache"
    flags = [] if where == "HOME" else ["--cache-dir", str(cache)]
    command = [*BOUND, sys.executable, "-m", "tlmscore", "score", "logs.jsonl", "-o", "out/scores.jsonl", *flags]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, cwd=shared_folder,
                          env=cli_env(locked))
    assert_refused(proc, f"tlmscore: error: {cache}: the cache folder cannot be written: {locked}: Permission "
                         f"denied {FIX}", shared_folder / "out")
