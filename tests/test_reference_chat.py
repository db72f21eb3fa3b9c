"""cleanlab-tlm 1.1.39's own formatter tests (`tests/test_chat.py` of its sdist), run against `tlmscore.compat`.

The file is vendored unchanged in `tests/reference/cleanlab_tlm_1_1_39/` (see PROVENANCE.md there);
`tests/reference_suite.py` runs it with its cleanlab-tlm imports pointing at `tlmscore.compat`.
Its formatter tests (`form_prompt_string`, `form_response_string_responses_api`) must all pass,
web search aside: the reference's web-search prompt test fetches the page live, which compat
never does (pages come from `pages=`). The file's other tests run too; the few that cannot apply
to compat are expected to fail, each for the reason given, and the run fails if one starts passing.
"""

from __future__ import annotations

import hashlib
import re

import pytest

from tests import reference_suite

CASES = {case.id: case for case in reference_suite.cases()}
FORMATTERS = ("test_form_prompt_string", "test_form_response_string_responses")
WEB_SEARCH = "web_search"
NOT_APPLICABLE: dict[str, tuple[str, tuple[type[BaseException], ...]]] = {
    "test_form_prompt_string_responses_web_search": (
        "fetches the cited page live (only `trafilatura.extract` is mocked); compat never fetches: a page "
        "not given in `pages=` is shown as not retrieved, which docs/cleanlab-differences.md lists as a "
        "deviation", (AssertionError,)),
    "test_form_response_string_chat_completions_uses_api_function": (
        "patches cleanlab_tlm.utils.chat itself to check which of its functions calls which",
        (AssertionError, ImportError)),
    **{case_id: ("cleanlab_tlm.internal.rag._is_tool_call_response is a RAG helper, not a formatter",
                 (NotImplementedError,))
       for case_id in CASES if case_id.startswith("TestIsToolCallResponse::")},
}


def _formatter(case_id: str) -> bool:
    return case_id.startswith(FORMATTERS) and WEB_SEARCH not in case_id


def test_selection_is_the_reference_formatter_suite() -> None:
    """The counts docs/cleanlab-differences.md states: 87 tests, 37 formatter tests outside web search, 2 on it."""
    assert len(CASES) == 87
    assert sum(_formatter(c) for c in CASES) == 37
    assert sorted(c for c in CASES if c.startswith(FORMATTERS) and WEB_SEARCH in c) == [
        "test_form_prompt_string_responses_web_search", "test_form_response_string_responses_web_search"]


@pytest.mark.parametrize("case_id", [c for c in CASES if _formatter(c)])
def test_reference_formatter_test_passes(case_id: str) -> None:
    CASES[case_id].run()


@pytest.mark.parametrize("case_id", [c for c in CASES if not _formatter(c) and c not in NOT_APPLICABLE])
def test_reference_other_test_passes(case_id: str) -> None:
    CASES[case_id].run()


@pytest.mark.parametrize("case_id", sorted(NOT_APPLICABLE))
def test_reference_test_that_cannot_apply_to_compat_fails(case_id: str) -> None:
    _reason, expected = NOT_APPLICABLE[case_id]
    with pytest.raises(expected):
        CASES[case_id].run()


def test_vendored_files_are_the_sdist_files() -> None:
    """The reference tests run as published: each vendored file has the sha256 PROVENANCE.md records."""
    folder = reference_suite.REFERENCE
    table = (folder / "PROVENANCE.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([^`]+)` \| `[^`]+` \| `([0-9a-f]{64})` \|$", table, flags=re.MULTILINE)
    assert {name for name, _ in rows} == {"test_chat.py.txt", "openai_compat.py.txt", "LICENSE"}
    for name, digest in rows:
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
