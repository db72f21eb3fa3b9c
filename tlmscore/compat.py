"""Drop-in versions of cleanlab-tlm's prompt formatters, with the same signatures.

For input without web search these return exactly what cleanlab-tlm 1.1.39 returns; the README
lists where they deliberately differ (web evidence, content parts the reference drops, and inputs
on which the reference raises).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tlmscore.convert import convert_chat, convert_items, input_items, split_answer
from tlmscore.evidence.page import Page
from tlmscore.model import Conversation
from tlmscore.prompt import render_prompt, render_response
from tlmscore.settings import Settings

__all__ = [
    "form_prompt_string",
    "form_response_string_chat_completions",
    "form_response_string_chat_completions_api",
    "form_response_string_responses_api",
    "uses_responses_api",
]

_RESPONSES_KWARGS = ("instructions", "input")


def _plain(obj: Any) -> Any:
    dump = getattr(obj, "model_dump", None)
    return dump(mode="json") if callable(dump) else obj


def uses_responses_api(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                       use_responses: bool | None = None, **kwargs: Any) -> bool:
    """Whether `messages` are in Responses format, decided as the reference decides it."""
    if use_responses is False and kwargs:
        raise ValueError("Responses API kwargs are only supported in Responses API format. "
                         "Cannot use with use_responses=False.")
    if use_responses is not None:
        return use_responses
    if any(key in kwargs for key in _RESPONSES_KWARGS):
        return True
    if any(isinstance(m, dict) and m.get("type") in ("function_call", "function_call_output") for m in messages):
        return True
    return bool(tools and any("name" in t and "function" not in t for t in tools))


def _responses_conversation(messages: list[dict[str, Any]] | str, tools: list[dict[str, Any]] | None,
                            response: Any, instructions: Any, settings: Settings) -> Conversation:
    items = input_items(messages)
    output = list((_plain(response) or {}).get("output") or []) if response is not None else []
    history = len(items)
    items = items + output[: split_answer(output)]
    return convert_items(items, answer_start=history + len(output), tools=tools, instructions=instructions,
                         settings=settings)


def form_prompt_string(
    messages: list[dict[str, Any]] | str,
    tools: list[dict[str, Any]] | None = None,
    use_responses: bool | None = None,
    response: Any = None,
    *,
    pages: Mapping[str, Page] | None = None,
    settings: Settings | None = None,
    **responses_api_kwargs: Any,
) -> str:
    """Chat messages (Responses or Chat Completions format) as one prompt string.

    `response` (a Responses API `Response` or its dict) adds the tool use that came before its
    answer; its web results are filled from `pages` (a URL to `Page` mapping), and a page not there
    is shown as unavailable rather than fetched.
    """
    settings = settings or Settings()
    kwargs = dict(responses_api_kwargs)
    if response is not None:
        kwargs["response"] = response
    responses = response is not None and use_responses is not False
    if responses or isinstance(messages, str) or uses_responses_api(messages, tools, use_responses, **kwargs):
        conv = _responses_conversation(messages, tools, response, kwargs.get("instructions"), settings)
    else:
        conv = convert_chat(messages, tools=tools)
    return render_prompt(conv, pages, settings)


def form_response_string_responses_api(response: Any) -> str:
    """The answer of a Responses API `Response` (or its dict) as a string, tool calls included."""
    output = list((_plain(response) or {}).get("output") or [])
    start = split_answer(output)
    conv = convert_items(output, answer_start=start)
    return render_response(conv)


def form_response_string_chat_completions_api(response: Any) -> str:
    """An assistant message of Chat Completions (dict or SDK object) as a string."""
    conv = convert_chat([], answer=_plain(response))
    return render_response(conv)


def form_response_string_chat_completions(response: Any) -> str:
    """The first choice's message of a `ChatCompletion` as a string."""
    plain = _plain(response)
    return form_response_string_chat_completions_api(plain["choices"][0]["message"])
