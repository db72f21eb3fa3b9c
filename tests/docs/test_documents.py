"""The documents name what the code has: every import in the examples of the README and of every page under
docs/, every dotted name; the site lists every page; the README stays a short page whose links resolve."""

from __future__ import annotations

import argparse
import importlib
import re

import pytest

from tests.support.paths import ROOT

PAGES = sorted((ROOT / "docs").glob("*.md"))
DOCS = [ROOT / "README.md", *PAGES]
README_MAX_LINES = 250
# names of entry-point groups, not of modules
ENTRY_POINT_GROUPS = {"tlmscore.connectors", "tlmscore.converters", "tlmscore.scorers",
                      "tlmscore.sinks", "tlmscore.sources"}
# names tlmscore writes into reports and traces (JUnit suites, annotation names, metadata keys), not Python names
WRITTEN_NAMES = {"tlmscore.compare.rows", "tlmscore.compare.gates", "tlmscore.grounding", "tlmscore.record.id"}


def imports_in_examples(text: str) -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    return [line.strip() for block in blocks for line in block.splitlines()
            if re.match(r"\s*(from tlmscore[\w.]* import |import tlmscore)", line)]


def dotted_names(text: str) -> set[str]:
    return {m for m in re.findall(r"`(tlmscore(?:\.\w+)+)", text) if m not in ENTRY_POINT_GROUPS | WRITTEN_NAMES}


def resolve(name: str) -> object:
    """A dotted name: the longest importable module prefix, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            value = getattr(value, attribute)
        return value
    raise ModuleNotFoundError(name)


EXAMPLE_IMPORTS = sorted({line for doc in DOCS for line in imports_in_examples(doc.read_text(encoding="utf-8"))})
NAMES = sorted({n for doc in DOCS for n in dotted_names(doc.read_text(encoding="utf-8"))})


def test_the_documents_have_examples_and_names() -> None:
    assert len(EXAMPLE_IMPORTS) >= 5 and len(NAMES) >= 5


@pytest.mark.parametrize("line", EXAMPLE_IMPORTS)
def test_every_import_in_the_examples_works(line: str) -> None:
    """`tlmscore.ray` too: it imports `ray` only when a function of it is called."""
    exec(line, {})  # noqa: S102  (an import line from the README, nothing else)


@pytest.mark.parametrize("name", NAMES)
def test_every_dotted_name_in_the_documents_exists(name: str) -> None:
    assert resolve(name) is not None


def test_a_name_that_does_not_exist_is_caught() -> None:
    with pytest.raises((AttributeError, ModuleNotFoundError)):
        resolve("tlmscore.evidence.no_such_module.Thing")


def test_the_site_lists_every_page() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = re.findall(r"^\s+- [^:]+: (\S+\.md)$", config, flags=re.MULTILINE)
    assert sorted(listed) == sorted(page.name for page in PAGES)
    assert "strict: true" in config


def test_the_home_page_lists_every_page() -> None:
    text = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| \[[^]]+\]\(([\w-]+\.md)\) \|", text, flags=re.MULTILINE)
    assert sorted(listed) == sorted(page.name for page in PAGES if page.name != "index.md")


def test_the_readme_is_a_short_page_whose_links_resolve() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    local = [target for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text) if "://" not in target]
    assert len(local) >= 10
    missing = [target for target in local if not (ROOT / target).exists()]
    assert not missing


def test_the_readme_says_what_a_score_means() -> None:
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "Grounding, not truth." in text and "NaN means nothing to check against." in text
    assert "The default scorer is not Cleanlab TLM." in text


def _commands() -> list[str]:
    from tlmscore.cli._args import build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return list(commands.choices)


def test_the_flag_reference_of_the_command_line_page_is_the_parsers() -> None:
    from tlmscore.cli._reference import with_reference

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert with_reference(text) == text, "run: python -m tlmscore.cli._reference docs/cli.md"


@pytest.mark.parametrize("command", ["", *_commands()])
def test_every_flag_help_shows_is_on_the_command_line_page(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    from tlmscore.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"] if command else ["--help"])
    shown = set(re.findall(r"(?<![\w-])--?[A-Za-z][\w-]*", capsys.readouterr().out)) - {"-h", "--help"}
    assert shown or command == "plugins"  # the one command with no flag of its own
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert sorted(f for f in shown if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", page)) == []


def test_the_property_test_command_names_every_property_test_file() -> None:
    """docs/development.md's command for fresh seeds runs every file with a Hypothesis test, and only those."""
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    command = re.search(r"python -m pytest -q -m hypothesis[^`]*", text)
    assert command is not None
    named = set(re.findall(r"tests/[\w/]+\.py", command.group()))
    decorated = re.compile(r"^\s*@given\(", flags=re.MULTILINE)
    given = {path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").rglob("test_*.py")
             if decorated.search(path.read_text(encoding="utf-8"))}
    assert named == given
