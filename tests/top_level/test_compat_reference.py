"""cleanlab-tlm 1.1.39's own formatter tests (`tests/test_chat.py` of its sdist), run against `tlmscore.compat`.

The file is vendored unchanged in `tests/support/reference/cleanlab_tlm_1_1_39/` (see PROVENANCE.md there);
`tests/support/reference_suite.py` runs it with its cleanlab-tlm imports pointing at `tlmscore.compat`.
Its formatter tests (`form_prompt_string`, `form_response_string_responses_api`) must all pass,
web search aside: the reference's web-search prompt test fetches the page live, which compat
never does (pages come from `pages=`). With the page given in `pages=` it passes as published;
without, compat's prompt differs from the reference's by that page's content line alone. The
file's other tests run too; the few that cannot apply to compat are expected to fail, each with
the exact error its reason gives, and the run fails if one starts passing or fails otherwise.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest

from tests.support import reference_suite
from tlmscore import compat
from tlmscore.evidence.page import Page

CASES = {case.id: case for case in reference_suite.cases()}
FORMATTERS = ("test_form_prompt_string", "test_form_response_string_responses")
WEB_SEARCH = "web_search"
WEB_SEARCH_PROMPT = "test_form_prompt_string_responses_web_search"
WEB_URL = "https://www.podego.com/insights/august-2025-good-news-ai-pfas-stories?utm_source=openai"
NOT_RETRIEVED = ("This page could not be retrieved (offline_miss: no page was available). Its content is unknown; "
                 "nothing here confirms or refutes what the answer says about it.")
NOT_APPLICABLE: dict[str, tuple[str, type[BaseException], str]] = {
    "test_form_response_string_chat_completions_uses_api_function": (
        "patches cleanlab_tlm.utils.chat itself to check which of its functions calls which", AssertionError,
        "Expected 'form_response_string_chat_completions_api' to be called once. Called 0 times."),
    **{case_id: ("cleanlab_tlm.internal.rag._is_tool_call_response is a RAG helper, not a formatter",
                 NotImplementedError,
                 "_is_tool_call_response is part of cleanlab-tlm's RAG module, not of its formatters")
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


@pytest.mark.parametrize("case_id", [c for c in CASES
                                     if not _formatter(c) and c not in NOT_APPLICABLE and c != WEB_SEARCH_PROMPT])
def test_reference_other_test_passes(case_id: str) -> None:
    CASES[case_id].run()


@pytest.mark.parametrize("case_id", sorted(NOT_APPLICABLE))
def test_reference_test_that_cannot_apply_to_compat_fails(case_id: str) -> None:
    _reason, kind, message = NOT_APPLICABLE[case_id]
    with pytest.raises(kind) as raised:
        CASES[case_id].run()
    assert str(raised.value) == message


def _web_search_prompt(pages: dict[str, Page] | None) -> tuple[str, BaseException | None]:
    """The reference's web-search prompt test run with compat's `form_prompt_string(pages=pages)`:
    the prompt compat made, and what the test raised (None when it passed)."""
    made: list[str] = []

    def recording(*args: Any, **kwargs: Any) -> str:
        made.append(compat.form_prompt_string(*args, pages=pages, **kwargs))
        return made[-1]

    case = {c.id: c for c in reference_suite.cases(recording)}[WEB_SEARCH_PROMPT]
    try:
        case.run()
    except AssertionError as failed:
        return made[-1], failed
    return made[-1], None


def test_reference_web_search_prompt_test_passes_with_the_page_in_pages() -> None:
    """The README's way to give compat a page: the reference's own expected prompt, byte for byte."""
    _prompt, failed = _web_search_prompt({WEB_URL: Page(url=WEB_URL, status="ok", text="MOCK CONTENT")})
    assert failed is None


def test_reference_web_search_prompt_without_pages_differs_by_the_page_content_alone() -> None:
    """compat never fetches: the one deviation is the page shown as not retrieved."""
    given, _ = _web_search_prompt({WEB_URL: Page(url=WEB_URL, status="ok", text="MOCK CONTENT")})
    missing, failed = _web_search_prompt(None)
    assert isinstance(failed, AssertionError)
    assert given.count('"content": "MOCK CONTENT"') == 1
    assert missing == given.replace('"content": "MOCK CONTENT"', f'"content": "{NOT_RETRIEVED}"')


def test_vendored_files_are_the_sdist_files() -> None:
    """The reference tests run as published: each vendored file has the sha256 PROVENANCE.md records."""
    folder = reference_suite.REFERENCE
    table = (folder / "PROVENANCE.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([^`]+)` \| `[^`]+` \| `([0-9a-f]{64})` \|$", table, flags=re.MULTILINE)
    assert {name for name, _ in rows} == {"test_chat.py.txt", "openai_compat.py.txt", "LICENSE"}
    for name, digest in rows:
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
