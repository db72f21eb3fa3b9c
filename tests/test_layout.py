"""The package's layout: stages depend only on earlier stages, and modules stay small."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tlmscore"
MAX_LINES = 400

# The pipeline's order. A module may import from its own stage and from earlier ones only.
STAGES: list[tuple[str, ...]] = [
    ("tlmscore.settings", "tlmscore.errors", "tlmscore.model", "tlmscore._urls", "tlmscore._retry_after",
     "tlmscore._lazy", "tlmscore._tables", "tlmscore._chat", "tlmscore._cost", "tlmscore.plugins"),
    ("tlmscore.sources", "tlmscore.stores", "tlmscore.agents"),
    ("tlmscore.ingest",),
    ("tlmscore.convert",),
    ("tlmscore.evidence",),
    ("tlmscore.rendering",),
    ("tlmscore.scoring",),
    ("tlmscore.output",),
    ("tlmscore.compare",),
    ("tlmscore.annotate",),
    ("tlmscore.pipeline",),
    ("tlmscore.ray", "tlmscore.compat", "tlmscore.audit", "tlmscore.fixtures"),
    ("tlmscore.cli", "tlmscore.pytest_plugin"),
    ("tlmscore.__main__",),
]


def stage_of(module: str) -> int | None:
    for rank, prefixes in enumerate(STAGES):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return None


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every tlmscore module a module imports, at any depth (lazy and type-only imports too)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + is_package]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m.startswith("tlmscore")}


MODULE_FILES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_stage() -> None:
    names = [module_name(p) for p in MODULE_FILES]
    assert [m for m in names if m != "tlmscore" and stage_of(m) is None] == []


@pytest.mark.parametrize("path", MODULE_FILES, ids=module_name)
def test_no_import_from_a_later_stage(path: Path) -> None:
    module = module_name(path)
    if module == "tlmscore":
        return  # the public API names every stage (lazily)
    rank = stage_of(module)
    assert rank is not None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    later = sorted(m for m in imported(tree, module, path.name == "__init__.py")
                   if (r := stage_of(m)) is not None and r > rank)
    assert later == [], f"{module} (stage {rank}) imports later stages: {later}"


def test_the_graph_check_sees_a_backward_import() -> None:
    tree = ast.parse("def f():\n    from tlmscore.scoring import get_scorer\n")
    assert "tlmscore.scoring" in imported(tree, "tlmscore.convert._web", is_package=False)
    assert stage_of("tlmscore.scoring") > stage_of("tlmscore.convert._web")  # type: ignore[operator]


@pytest.mark.parametrize("path", MODULE_FILES, ids=module_name)
def test_modules_stay_small(path: Path) -> None:
    assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def documented_name(path: Path) -> str:
    """How docs/architecture.md names a module: by its file name, or a sub-package's modules by the package."""
    parts = path.relative_to(PACKAGE).parts
    if len(parts) > 2:  # stage/sub/module.py: the sub-package stands for its modules
        return f"{parts[1]}/"
    return path.stem


@pytest.mark.parametrize("path", [p for p in MODULE_FILES if p.name != "__init__.py"], ids=module_name)
def test_the_architecture_document_names_every_module(path: Path) -> None:
    prose = re.sub(r"```.*?```", "", ARCHITECTURE.read_text(encoding="utf-8"), flags=re.DOTALL)
    spans = re.findall(r"`([^`]+)`", prose)
    named = set(re.findall(r"\w+/?", " ".join(spans)))
    assert documented_name(path) in named


def private_modules(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """The private modules (a `_name` part below `tlmscore`) a module imports, cut after that part."""
    found = set()
    for name in imported(tree, module, is_package):
        parts = name.split(".")
        cut = next((i for i, part in enumerate(parts) if i > 0 and part.startswith("_")), None)
        if cut is not None:
            found.add(".".join(parts[: cut + 1]))
    return found


def outside_of(module: str, privates: set[str]) -> set[tuple[str, str]]:
    """`(module, private module)` for each of `privates` that belongs to a package `module` is not in."""
    found = set()
    for private in privates:
        owner = private.rsplit(".", 1)[0]  # the package the private module belongs to
        if not (module == owner or module.startswith(owner + ".")):
            found.add((module, private))
    return found


def outside_private_imports(path: Path) -> set[tuple[str, str]]:
    """`(module, private module)` for each private module of another package that `path` imports."""
    module = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return outside_of(module, private_modules(tree, module, path.name == "__init__.py"))


@pytest.mark.parametrize("path", MODULE_FILES, ids=module_name)
def test_no_private_module_is_imported_from_outside_its_package(path: Path) -> None:
    """A package's private modules are its own: others use its `__init__` (or `model.py` for shared values)."""
    found = sorted(outside_private_imports(path))
    assert found == [], f"{module_name(path)} imports private modules of other packages: {found}"


def test_the_private_check_sees_an_outside_import_and_allows_an_inside_one() -> None:
    tree = ast.parse("from tlmscore.ingest._logfile import safe_text\nfrom tlmscore._urls import url_key\n")
    privates = private_modules(tree, "tlmscore.output._encoding", is_package=False)
    assert privates == {"tlmscore.ingest._logfile", "tlmscore._urls"}
    assert outside_of("tlmscore.output._encoding", privates) == {("tlmscore.output._encoding",
                                                                  "tlmscore.ingest._logfile")}
    assert outside_of("tlmscore.ingest._records", {"tlmscore.ingest._logfile"}) == set()
    assert outside_of("tlmscore.ingest", {"tlmscore.ingest._logfile"}) == set()


MODULES = {module_name(p): p for p in MODULE_FILES}


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the tlmscore modules it imports (at any depth, type-only too); the lazy top package left out.

    `from a.b import c` is an edge to `a.b.c` when that is a module, else to `a.b`.
    """
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        if module == "tlmscore":
            continue
        names = imported(ast.parse(path.read_text(encoding="utf-8")), module, path.name == "__init__.py")
        targets = {name for name in names if name in modules and name != "tlmscore"}
        graph[module] = {t for t in targets if not any(other.startswith(t + ".") for other in targets)} - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted; a group is a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert cycles(import_graph(MODULES)) == []


def test_the_cycle_check_sees_a_cycle_through_a_type_only_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tlmscore.scoring.judge import J\n")
    assert "tlmscore.scoring.judge" in imported(tree, "tlmscore.scoring.judge._batch", is_package=False)
