"""The package's layout: stages depend only on earlier stages, and modules stay small; the tests mirror the package."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tlmscore"
MAX_LINES = 400

# The pipeline's order. A module may import from its own stage and from earlier ones only.
STAGES: list[tuple[str, ...]] = [
    ("tlmscore.settings", "tlmscore.errors", "tlmscore.model", "tlmscore._urls", "tlmscore._retry_after",
     "tlmscore._lazy", "tlmscore._tables", "tlmscore._chat", "tlmscore._endpoint", "tlmscore._cost", "tlmscore.plugins",
     "tlmscore._breaker", "tlmscore._reach", "tlmscore._cores", "tlmscore._content", "tlmscore._think",
     "tlmscore._contract"),
    ("tlmscore.stores", "tlmscore.agents"),
    ("tlmscore.ingest",),
    ("tlmscore.convert",),
    ("tlmscore.evidence",),
    ("tlmscore.rendering",),
    ("tlmscore.scoring",),
    ("tlmscore.output",),
    ("tlmscore.compare",),
    ("tlmscore.annotate",),
    ("tlmscore.pipeline",),
    ("tlmscore.ray", "tlmscore.compat", "tlmscore.audit", "tlmscore.fixtures", "tlmscore.watch",
     "tlmscore.local_judge"),
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


def store_imports(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """The modules of `tlmscore.stores` a module imports (at any depth, type-only too)."""
    return {m for m in imported(tree, module, is_package) if m == "tlmscore.stores" or m.startswith("tlmscore.stores.")}


@pytest.mark.parametrize("path", [p for p in MODULE_FILES if stage_of(module_name(p)) == stage_of("tlmscore.ingest")],
                         ids=module_name)
def test_ingest_imports_no_store(path: Path) -> None:
    """Ingest reads through the `Reader` its caller finds: it imports no store, so none of their write-back."""
    module = module_name(path)
    assert store_imports(ast.parse(path.read_text(encoding="utf-8")), module, path.name == "__init__.py") == set()


def test_the_store_check_sees_a_store_imported_by_ingest() -> None:
    tree = ast.parse("from tlmscore._contract import is_live\n\ndef f():\n"
                     "    from tlmscore.stores.openai import stored_id\n    from ..stores import find_reader\n")
    assert store_imports(tree, "tlmscore.ingest._records", is_package=False) == {
        "tlmscore.stores.openai", "tlmscore.stores.openai.stored_id", "tlmscore.stores", "tlmscore.stores.find_reader"}


def loaded_stores(module: str) -> list[str]:
    """The `tlmscore.stores` modules a fresh interpreter holds once it has imported `module` (of this checkout)."""
    code = (f"import sys, {module}; assert {module}.__file__.startswith({str(PACKAGE)!r}), {module}.__file__; "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[:2] == ['tlmscore', 'stores'])))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=PACKAGE.parent, env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)})
    return done.stdout.split()


def test_importing_ingest_loads_no_store() -> None:
    assert loaded_stores("tlmscore.ingest") == []
    assert "tlmscore.stores.openai" in loaded_stores("tlmscore.pipeline")  # the check sees a store when one is loaded


# ---------------------------------------------------------------------------------------------- the tests' layout

TESTS = Path(__file__).resolve().parent
LAYOUT_TESTS = {"test_layout.py"}
"""The only test modules kept directly in tests/: this one, which holds the package's and the tests' layout."""
TOP_LEVEL = "top_level"
"""The tests of tlmscore's top-level modules (`compat.py`, `audit.py`, `settings.py`, …)."""
NO_PACKAGE = {TOP_LEVEL, "docs", "notebooks", "benchmarks"}
"""Test folders that hold tests of something other than one package."""
NO_TESTS = {"servers", "support"}
"""Folders of what the tests use (local servers and fakes; paths, strategies, cleanlab-tlm's vendored suite)."""

# A private module a test reaches, with why no public name serves. Each is reached only from the test folder of
# its own package (tests/top_level for tlmscore's own `_modules`), unless CROSS_PACKAGE names the test file.
PRIVATE_REACH: dict[str, str] = {
    "tlmscore._breaker": "the breaker's count and reason, tested on its own; its users export none of it",
    "tlmscore._chat": "the judge's reply types (Completion, TokenLogprob), built by hand for the fake server",
    "tlmscore._endpoint": "the key lookup and client every model endpoint shares, tested on its own",
    "tlmscore._retry_after": "Retry-After parsing, tested on its own; every client uses it, none exports it",
    "tlmscore._urls": "url_key, the one spelling of a URL that pages, cache and archive are keyed by",
    "tlmscore.cli._args": "the parser and Settings made from flags: help texts and the documented flags",
    "tlmscore.cli._reference": "the CLI reference page the docs test compares with the parser",
    "tlmscore.cli._summary": "the run summary's quartiles, checked without a run",
    "tlmscore.compare._svg": "the scatter's colours, which the HTML report's test looks for",
    "tlmscore.convert._citations": "sentence ends and message citations: the citation parser's own cases",
    "tlmscore.ingest._status": "a record's and a response's status, over every documented status",
    "tlmscore.convert._tools": "the built-in tools' declarations the prompt lists",
    "tlmscore.evidence._archive": "the archive's lookup URL and snapshot time, without a live archive",
    "tlmscore.evidence._body": "the body decoder's limits and encodings, fed hostile bytes directly",
    "tlmscore.evidence._chat_pages": "pages read by a model: the source itself, against a fake model server",
    "tlmscore.evidence._download": "the fetch slots' order and release, which no run shows one by one",
    "tlmscore.evidence._guard": "the address guard and the resolver the tests replace DNS with",
    "tlmscore.evidence._transport": "the guarded transport, checked on every hop against loopback servers",
    "tlmscore.evidence._workers": "the extraction pool's limits, met with hostile pages",
    "tlmscore.ingest._chunks": "the marker a cut-off stream ends with",
    "tlmscore.ingest._logfile": "random access into plain and .gz inputs",
    "tlmscore.ingest._records": "load_at, one record read back by its place in a file",
    "tlmscore.ingest._streams": "the event-stream reassembly, fuzzed line by line",
    "tlmscore.output._checkpoint": "where a run keeps its checkpoint, which the resume tests break on purpose",
    "tlmscore.output._manifest": "the resume manifest, read back to check what a run wrote",
    "tlmscore.pipeline._meter": "the progress bar's byte count, checked without a terminal",
    "tlmscore.pipeline._run": "the scorer factory a run calls, counted to show a run builds its scorer once",
    "tlmscore.pipeline._stages": "the reader lookup a run hands ingest, counted per input",
    "tlmscore.ray._engine": "how many partitions the Ray engine's shuffles have, without a cluster",
    "tlmscore.ray._pages": "the Ray engine's fetch actor and its page store read-back, run without a cluster",
    "tlmscore.ray._read": "how the Ray engine splits inputs into rows, checked without a cluster",
    "tlmscore.ray._tables": "the tables flat_rows hands on, bounded, checked without a cluster",
    "tlmscore.rendering._prompt": "the JSON and text blocks a prompt is built of, byte for byte",
    "tlmscore.rendering._shown": "the text a page already shown above is replaced with",
    "tlmscore.scoring.grounding._claims": "the grounding scorer's claims: unit cases of the sentence rules",
    "tlmscore.scoring.grounding._evidence": "the grounding scorer's evidence documents and table lines",
    "tlmscore.scoring.grounding._lexicon": "the WordNet lexicon, loaded from a given folder",
    "tlmscore.scoring.grounding._recent": "the grounding scorer's recency window",
    "tlmscore.scoring.grounding._scorer": "which claims the grounding scorer lists",
    "tlmscore.scoring.grounding._signals": "the grounding scorer's feature names",
    "tlmscore.scoring.grounding._support": "the evidence index and derived-value support",
    "tlmscore.scoring.grounding._text": "sentence, clause, date and negation analysis",
    "tlmscore.scoring.grounding._tokens": "stemming, tokens and normalised numbers",
}

# A test that reaches a private module of another package than the one its folder tests.
CROSS_PACKAGE: dict[tuple[str, str], str] = {
    ("docs/test_documents.py", "tlmscore.cli._args"): "the documented flags are the parser's",
    ("docs/test_documents.py", "tlmscore.cli._reference"): "docs/cli.md is the reference the CLI renders",
    ("cli/test_resume.py", "tlmscore.output._checkpoint"): "a resumed run's checkpoint, damaged on purpose",
    ("cli/test_resume_manifest.py", "tlmscore.output._checkpoint"): "a resumed run's checkpoint",
    ("cli/test_resume_manifest.py", "tlmscore.output._manifest"): "what the resumed run wrote",
    ("convert/test_provider_shapes.py", "tlmscore.rendering._shown"): "a page two searches list is shown once",
    ("evidence/test_archive.py", "tlmscore._urls"): "archived pages are keyed as fetched ones",
    ("rendering/test_prompt.py", "tlmscore._urls"): "the prompt's pages are keyed as fetched ones",
    ("scoring/test_judge.py", "tlmscore._chat"): "the judge's fake server answers in the chat reply types",
    ("scoring/test_judge_claims.py", "tlmscore._chat"): "P(yes) is read from the chat reply types, built by hand",
    ("scoring/test_grounding_model_pages.py", "tlmscore.evidence._chat_pages"): "model-read pages, weighed",
    ("scoring/test_grounding_model_pages.py", "tlmscore.ray._pages"): "model-read pages in the Ray fetch actor",
    ("servers/ray_scenarios.py", "tlmscore.ray._tables"): "the settings the Ray engine gives its datasets, "
                                                           "looked for in the host's own context",
}


def modules_of_tests(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if p.name.startswith("test_"))


def misplaced_tests(root: Path, packages: set[str]) -> list[str]:
    """Test modules that are not where the layout puts them, each with why."""
    found = []
    for path in modules_of_tests(root):
        parts = path.relative_to(root).parts
        where = "/".join(parts)
        if len(parts) == 1:
            if path.name not in LAYOUT_TESTS:
                found.append(f"{where}: directly in tests/ (put it in the folder of the package it tests)")
        elif parts[0] in NO_TESTS:
            found.append(f"{where}: {parts[0]}/ holds what tests use, not tests")
        elif parts[0] not in packages | NO_PACKAGE:
            found.append(f"{where}: {parts[0]}/ is no package of tlmscore nor one of {sorted(NO_PACKAGE)}")
        elif len(parts) > 2 and ".".join(parts[:-1]) not in packages:
            found.append(f"{where}: {'/'.join(parts[:-1])}/ is no package of tlmscore")
    return found


def uncollected_tests(root: Path) -> list[str]:
    """Test functions or classes in servers/ or support/, where pytest never collects them."""
    found = []
    for folder in sorted(NO_TESTS):
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [f"{path.relative_to(root).as_posix()}: {node.name}" for node in tree.body
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and node.name.startswith(("test_", "Test"))]
    return found


def folders_without_init(root: Path) -> list[str]:
    """Folders of Python files that are no package: their modules' names would clash (two test_compare.py)."""
    return sorted(str(folder.relative_to(root)) for folder in {p.parent for p in root.rglob("*.py")}
                  if not (folder / "__init__.py").exists())


def tlmscore_packages() -> set[str]:
    """tlmscore's packages as test folders: `ingest`, `scoring`, `scoring.grounding`, …"""
    return {".".join(p.parent.relative_to(PACKAGE).parts) for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE}


def package_under_test(relative: Path) -> str:
    """The package a test module's folder tests: `tlmscore.evidence` for evidence/…, `tlmscore` for top_level/."""
    folder = relative.parts[0]
    return "tlmscore" if folder == TOP_LEVEL else f"tlmscore.{folder}"


def private_reaches(root: Path) -> set[tuple[str, str]]:
    """`(test module relative to root, private module)` for every private tlmscore module a test module imports."""
    found = set()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found.update((relative.as_posix(), private) for private in private_modules(tree, "tests", is_package=False))
    return found


def unlisted_reaches(reaches: set[tuple[str, str]]) -> list[str]:
    """The private reaches neither list allows, each with why."""
    found = []
    for test, private in sorted(reaches):
        owner = private.rsplit(".", 1)[0]
        package = package_under_test(Path(test))
        own = private in PRIVATE_REACH and (owner == package or owner.startswith(package + "."))
        if not own and (test, private) not in CROSS_PACKAGE:
            why = "not in PRIVATE_REACH" if private not in PRIVATE_REACH else f"{owner} is not what {test} tests"
            found.append(f"{test} imports {private}: {why}")
    return found


def test_every_test_module_is_in_the_folder_of_what_it_tests() -> None:
    assert misplaced_tests(TESTS, tlmscore_packages()) == []


def test_servers_and_support_hold_no_tests() -> None:
    assert uncollected_tests(TESTS) == []


def test_every_folder_of_python_files_is_a_package() -> None:
    assert folders_without_init(TESTS) == []


def test_a_test_reaches_a_private_module_only_as_listed_with_a_reason() -> None:
    assert unlisted_reaches(private_reaches(TESTS)) == []


def test_every_listed_private_reach_is_still_needed() -> None:
    """An entry nothing uses any more goes: the lists stay the short record of where tests go past a public face."""
    reaches = private_reaches(TESTS)
    assert sorted(set(PRIVATE_REACH) - {private for _, private in reaches}) == []
    assert sorted(set(CROSS_PACKAGE) - reaches) == []


def test_the_layout_checks_see_a_test_in_the_wrong_place(tmp_path: Path) -> None:
    files = ["__init__.py", "test_layout.py", "test_loose.py", "ingest/__init__.py", "ingest/test_ok.py",
             "ingst/__init__.py", "ingst/test_typo.py", "servers/__init__.py", "servers/test_hidden.py",
             "top_level/__init__.py", "top_level/test_api.py", "scoring/__init__.py", "scoring/grounding/test_deep.py",
             "scoring/judges/__init__.py", "scoring/judges/test_deeper.py"]
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    found = misplaced_tests(tmp_path, {"ingest", "scoring", "scoring.grounding"})
    assert [line.split(":")[0] for line in found] == [
        "ingst/test_typo.py", "scoring/judges/test_deeper.py", "servers/test_hidden.py", "test_loose.py"]
    assert folders_without_init(tmp_path) == ["scoring/grounding"]
    (tmp_path / "support").mkdir()
    (tmp_path / "support" / "fakes.py").write_text("def make():\n    pass\n\n\ndef test_unseen():\n    pass\n",
                                                   encoding="utf-8")
    assert uncollected_tests(tmp_path) == ["support/fakes.py: test_unseen"]


def test_the_private_check_sees_an_unlisted_and_an_other_packages_reach(tmp_path: Path) -> None:
    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "test_a.py").write_text(
        "from tlmscore.evidence._guard import check_url\nfrom tlmscore.evidence import Page\n"
        "def test_x():\n    from tlmscore.ingest._logfile import lines\n", encoding="utf-8")
    (tmp_path / "evidence" / "test_b.py").write_text("from tlmscore.evidence._nowhere import x\n", encoding="utf-8")
    reaches = private_reaches(tmp_path)
    assert reaches == {("evidence/test_a.py", "tlmscore.evidence._guard"),
                       ("evidence/test_a.py", "tlmscore.ingest._logfile"),
                       ("evidence/test_b.py", "tlmscore.evidence._nowhere")}
    assert unlisted_reaches(reaches) == [
        "evidence/test_a.py imports tlmscore.ingest._logfile: tlmscore.ingest is not what evidence/test_a.py tests",
        "evidence/test_b.py imports tlmscore.evidence._nowhere: not in PRIVATE_REACH"]


def test_one_built_in_table_per_kind_of_plug_in() -> None:
    """docs/architecture.md: five built-in tables, one per kind of plug-in, each loaded by `plugins.py`."""
    from tlmscore import convert, output, scoring, stores

    made = [path for path in MODULE_FILES for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Kind"]
    assert len(made) == 5  # the kinds the page names
    kinds = [stores.SOURCE_PLUGINS, stores.PLUGINS, convert.registry.PLUGINS, scoring.base.PLUGINS, output.PLUGINS]
    assert [kind.group for kind in kinds] == ["tlmscore.sources", "tlmscore.connectors", "tlmscore.converters",
                                              "tlmscore.scorers", "tlmscore.sinks"]
    expected = [stores.READERS, stores.CONNECTORS, convert.registry.REGISTRY, scoring.base.SCORERS, output.SINKS]
    assert all(kind.builtin() is table for kind, table in zip(kinds, expected, strict=True))
    prose = (PACKAGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "five, one per kind of plug-in" in " ".join(prose.split())
