"""What the benchmarks share: where the repository and the shared data sets are, and the line said when one is absent.

A benchmark is a script of this folder that a page of docs/ names (`tests/benchmarks/test_scripts.py` holds the
rule); a module whose name starts with `_` is a helper the scripts import, never a benchmark, and no benchmark
imports another one.

The shared corpus and validity sets (`shared/corpus/`, `shared/validity/`) are not in the repository: they sit
beside a checkout (or beside the folder of its working trees). Only the benchmarks whose figures are about them
read them, and each says in one line what is missing when they are absent.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The repository's root."""


def _shared() -> Path:
    """The `shared/` folder beside the repository (or beside the folder of its working trees)."""
    return next((p / "shared" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared").is_dir()),
                ROOT.parent / "shared")


SHARED = _shared()
CORPUS_PAGES = SHARED / "corpus" / "pages"
"""The real article pages (`html/*.html.gz`) and their annotated article bodies (`ground-truth.json`)."""
VALIDITY = SHARED / "validity"
"""The development sets: SummEdits (`summedits/`) and WiCE (`wice/dev.jsonl.gz`)."""


def absent(path: Path, what: str) -> str:
    """The one line a benchmark says when `what`, expected at `path`, is not there."""
    return f"{Path(sys.argv[0]).name}: {what} not found at {path} (the shared data sets sit beside the repository)"


def require(path: Path, what: str) -> Path:
    """`path`, or the benchmark ends with the one line saying it is absent."""
    if not path.exists():
        sys.exit(absent(path, what))
    return path
