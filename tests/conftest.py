"""Shared test helpers: where the bundled fixtures and the optional shared corpus live, and local
http and https page servers (https with a test certificate authority)."""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator
from pathlib import Path

import hypothesis
import pytest
import trustme

from tests.evidence_server import EvidenceServer
from tests.llama_server import llama_server  # noqa: F401  (one llama.cpp server for the whole test run)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
CORPUS = ROOT.parent / "shared" / "corpus"
TLS_NAMES = ("a.test", "b.test")
"""The names `tls_server`'s certificate is for."""

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


@pytest.fixture
def demo_path() -> Path:
    return FIXTURES / "demo.jsonl"


@pytest.fixture
def corpus_responses() -> Path:
    folder = CORPUS / "responses"
    if not folder.is_dir():
        pytest.skip(f"shared corpus not present at {folder}")
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
