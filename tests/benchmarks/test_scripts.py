"""The benchmarks folder's rules: every benchmark reproduces a figure a docs page names it for, none imports another,
and where one reaches past tlmscore's public names it is listed here with why.

A benchmark is a script of `benchmarks/` whose name does not start with `_`; a `_module` there is a helper the
benchmarks share (`_common`, the validity sets, the local webs, …), imported by at least one of them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.paths import ROOT

BENCHMARKS = ROOT / "benchmarks"
DOCS = ROOT / "docs"
_NAMED = re.compile(r"(?<![:\w/])benchmarks/(\w+)\.py")
"""`benchmarks/NAME.py` as a page names a script of the tree (not `REV:benchmarks/NAME.py`, a file at a commit)."""

# A private tlmscore module a benchmark (or helper) imports, with why no public name serves.
PRIVATE_REACH: dict[tuple[str, str], str] = {
    ("_corpus_edits.py", "tlmscore.scoring.grounding._text"): "the set is made of the scorer's own sentences",
    ("_https_web.py", "tlmscore.evidence._download"): "tlmscore's request side alone, against the bare client",
    ("_https_web.py", "tlmscore.evidence._guard"): "the resolver the request side is built with",
    ("_https_web.py", "tlmscore.evidence._reply"): "the reply the request side hands back",
    ("watch_bench.py", "tlmscore.watch._loop"): "the watch with its store and write-back replaced in-process",
    ("watch_bench.py", "tlmscore.watch._feeds"): "the calls the replaced store yields",
    ("_scorer_table.py", "tlmscore._cost"): "the judge's price table and cost of those tokens, for a cost per 1,000 "
                                            "rows at a named price",
}


def is_benchmark(path: Path) -> bool:
    return not path.name.startswith("_")


def imported_names(path: Path) -> set[str]:
    """Every module `path` imports, at any depth (imports inside functions too), by its full dotted name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def local_imports(folder: Path) -> dict[str, set[str]]:
    """For each script of `folder`, the other scripts of `folder` it imports (by file name)."""
    scripts = {p.stem: p for p in folder.glob("*.py")}
    return {path.name: {f"{name}.py" for name in {m.split(".")[0] for m in imported_names(path)} & set(scripts)}
            for path in scripts.values()}


def benchmarks_importing_benchmarks(folder: Path) -> list[str]:
    """`A imports B` for every script of `folder` that imports a benchmark (helpers may be imported; benchmarks not)."""
    return sorted(f"{name} imports {other}" for name, others in local_imports(folder).items()
                  for other in others if is_benchmark(Path(other)))


def unused_helpers(folder: Path) -> list[str]:
    """Helpers no benchmark imports, directly or through other helpers."""
    graph = local_imports(folder)
    reached: set[str] = set()
    todo = [name for name in graph if is_benchmark(Path(name))]
    while todo:
        for other in graph[todo.pop()] - reached:
            reached.add(other)
            todo.append(other)
    return sorted(name for name in graph if not is_benchmark(Path(name)) and name not in reached)


def named_in_docs(docs: Path) -> dict[str, list[str]]:
    """Each `benchmarks/NAME.py` a docs page names, with the pages that name it."""
    found: dict[str, list[str]] = {}
    for page in sorted(docs.glob("*.md")):
        for name in sorted(set(_NAMED.findall(page.read_text(encoding="utf-8")))):
            found.setdefault(f"{name}.py", []).append(page.name)
    return found


def unnamed_benchmarks(folder: Path, docs: Path) -> list[str]:
    """Benchmarks no docs page names as `benchmarks/NAME.py` (so no figure says it reproduces it)."""
    named = named_in_docs(docs)
    return sorted(p.name for p in folder.glob("*.py") if is_benchmark(p) and p.name not in named)


def missing_scripts(folder: Path, docs: Path) -> list[str]:
    """Scripts a docs page names as `benchmarks/NAME.py` that are not in the folder."""
    return sorted(f"{', '.join(pages)}: benchmarks/{name}" for name, pages in named_in_docs(docs).items()
                  if not (folder / name).is_file())


def private_reaches(folder: Path) -> set[tuple[str, str]]:
    """`(script, private module)` for every private tlmscore module a script of `folder` imports."""
    found = set()
    for path in sorted(folder.glob("*.py")):
        for module in imported_names(path):
            parts = module.split(".")
            for depth in range(1, len(parts)):
                if parts[0] == "tlmscore" and parts[depth].startswith("_") and not parts[depth].startswith("__"):
                    found.add((path.name, ".".join(parts[:depth + 1])))
                    break
    return found


def test_every_benchmark_is_named_by_a_docs_page() -> None:
    assert unnamed_benchmarks(BENCHMARKS, DOCS) == []


def test_every_script_a_docs_page_names_is_there() -> None:
    assert missing_scripts(BENCHMARKS, DOCS) == []


def test_no_benchmark_imports_another_and_every_helper_is_used() -> None:
    assert benchmarks_importing_benchmarks(BENCHMARKS) == []
    assert unused_helpers(BENCHMARKS) == []


def test_a_private_module_is_reached_only_as_listed_with_a_reason() -> None:
    assert private_reaches(BENCHMARKS) == set(PRIVATE_REACH)


def test_the_checks_see_an_unnamed_benchmark_a_benchmark_imported_and_an_unused_helper(tmp_path: Path) -> None:
    folder, docs = tmp_path / "benchmarks", tmp_path / "docs"
    folder.mkdir()
    docs.mkdir()
    scripts = {
        "speed.py": "import _common\nimport other\n",
        "other.py": "def helper():\n    from _web import serve\n",
        "_common.py": "from tlmscore.evidence._guard import check\nimport tlmscore.settings\n",
        "_web.py": "",
        "_orphan.py": "import _common\n",
    }
    for name, text in scripts.items():
        (folder / name).write_text(text, encoding="utf-8")
    (docs / "speed.md").write_text("`python benchmarks/speed.py` and `benchmarks/gone.py`; `git show "
                                   "abc123:benchmarks/old.py`\n", encoding="utf-8")
    assert unnamed_benchmarks(folder, docs) == ["other.py"]
    assert missing_scripts(folder, docs) == ["speed.md: benchmarks/gone.py"]
    assert benchmarks_importing_benchmarks(folder) == ["speed.py imports other.py"]
    assert unused_helpers(folder) == ["_orphan.py"]
    assert private_reaches(folder) == {("_common.py", "tlmscore.evidence._guard")}
