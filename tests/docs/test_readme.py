"""The README's quickstart, run as written: its `tlmscore score …` command prints the summary the
README shows, line for line (a change of scores or counts must change the README with it)."""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.support.paths import FIXTURES, ROOT

README = ROOT / "README.md"
_HEADING = re.compile(r"^#+\s+Quickstart\b", re.MULTILINE)
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def quickstart(text: str) -> tuple[list[str], list[str]]:
    """The first `tlmscore score` command of the first ```bash block under "Quickstart" (without the
    install steps chained before it by `&&`), and the lines of the next fenced block: its summary."""
    heading = _HEADING.search(text)
    assert heading, "README.md has no Quickstart heading"
    blocks = list(_FENCE.finditer(text, heading.end()))
    first_bash = next(i for i, block in enumerate(blocks) if block.group(1) == "bash")
    commands = [part.strip() for line in blocks[first_bash].group(2).splitlines() for part in line.split("&&")]
    command = next(part for part in commands if part.startswith("tlmscore score "))
    summary = blocks[first_bash + 1].group(2).splitlines()
    return shlex.split(command)[1:], summary


def test_the_quickstart_parser_takes_the_command_and_the_block_after_it() -> None:
    text = ("# x\n## Quickstart\nintro\n```bash\n# 1. install\npython3 -m venv .venv && pip install . && "
            "tlmscore score a.jsonl --offline -o 's p.parquet'\n```\nprints:\n```\nline one\n  line two\n```\n"
            "```bash\ntlmscore score other.jsonl\n```\n")
    assert quickstart(text) == (["score", "a.jsonl", "--offline", "-o", "s p.parquet"], ["line one", "  line two"])


def test_the_quickstart_command_prints_the_readme_summary(tmp_path: Path) -> None:
    args, summary = quickstart(README.read_text(encoding="utf-8"))
    (tmp_path / "fixtures").symlink_to(FIXTURES, target_is_directory=True)  # the README's relative paths
    env = {**os.environ, "TLMSCORE_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "tlmscore", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == summary
    assert done.stdout == ""
    written = sorted(p.name for p in tmp_path.iterdir() if p.name not in ("fixtures", "cache"))
    assert written == ["scores.parquet", "scores.parquet.manifest.json"]
    assert [name for name in written if not ignored(name)] == []  # a clone stays clean in `git status`


def ignored(name: str) -> bool:
    """Whether .gitignore leaves out a file of that name at the top of the checkout."""
    patterns = [line.strip() for line in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")]
    return any(fnmatch.fnmatchcase(name, pattern.lstrip("/")) for pattern in patterns)


_VALIDITY = re.compile(r"\((\d{4}-\d\d-\d\d), default\s+install: WiCE dev ([\d.]+) / ([\d.]+) AUROC, "
                       r"SummEdits mean ([\d.]+)\)")


def test_the_readmes_validity_figures_are_the_dated_table_of_the_validity_page() -> None:
    """The README quotes the grounding scorer's figures; docs/validity.md holds them, dated, in the table of
    that day (measured by benchmarks/validity_bench.py on the two development sets, which are not bundled)."""
    day, wice, wice_rest, summedits = _VALIDITY.findall(README.read_text(encoding="utf-8"))[0]
    page = (ROOT / "docs" / "validity.md").read_text(encoding="utf-8")
    section = page.split(f"\n## {day}\n", 1)[1].split("\n## ", 1)[0]
    now = next(line for line in section.splitlines() if line.startswith("| now ("))
    cells = [cell.strip().strip("*") for cell in now.split("|")[2:6]]
    assert cells[:3] == [wice, wice_rest, summedits]
