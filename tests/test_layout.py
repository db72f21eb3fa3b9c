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
    ("tlmscore.settings", "tlmscore.errors", "tlmscore.model", "tlmscore._urls", "tlmscore._retry_after"),
    ("tlmscore.sources",),
    ("tlmscore.ingest",),
    ("tlmscore.convert",),
    ("tlmscore.evidence",),
    ("tlmscore.rendering",),
    ("tlmscore.scoring",),
    ("tlmscore.output",),
    ("tlmscore.compare",),
    ("tlmscore.annotate",),
    ("tlmscore.pipeline",),
    ("tlmscore.engines", "tlmscore.ray", "tlmscore.compat", "tlmscore.audit", "tlmscore.fixtures"),
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
