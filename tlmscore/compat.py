"""Drop-in versions of cleanlab-tlm's prompt formatters, with the same signatures.

For input without web search these return exactly what cleanlab-tlm 1.1.39 returns, warn where it
warns (a prompt that ends with a tool call or an assistant message, tool calls it cannot read) and
raise where its own tests expect it to (a message without `content`); cleanlab-tlm's own formatter
tests run against this module. docs/cleanlab-differences.md lists where they deliberately differ (web evidence,
content parts the reference drops, and other inputs on which the reference raises).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from typing import Any

from tlmscore._urls import url_key
from tlmscore.convert import convert_chat, convert_items, input_items, split_answer
from tlmscore.evidence.page import Page
from tlmscore.model import Conversation
from tlmscore.rendering import render_prompt, render_response
from tlmscore.settings import Settings

__all__ = [
    "LAST_MESSAGE_WARNING",
    "form_prompt_string",
    "form_response_string_chat_completions",
    "form_response_string_chat_completions_api",
    "form_response_string_responses_api",
    "uses_responses_api",
]

_RESPONSES_KWARGS = ("instructions", "input")
LAST_MESSAGE_WARNING = ("The last message is a tool call or assistant message. The next message should not be an LLM "
                        "response. This prompt should not be used for trustworthiness scoring.")


def _reference(settings: Settings | None) -> Settings:
    """`settings` (or the defaults) set to render the reference's bytes.

    JSON blocks escape non-ASCII (`json.dumps`' default, which cleanlab-tlm uses) and `<think>`
    text is left in answers, as it leaves it.
    """
    return (settings or Settings()).model_copy(update={"ascii_json": True, "think": "keep"})


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


def _warn_last() -> None:
    """The reference's warning about a prompt that ends where the model already answered."""
    warnings.warn(LAST_MESSAGE_WARNING, UserWarning, stacklevel=4)


def _require_content(items: list[dict[str, Any]], *, roles: tuple[str, ...] | None = None) -> None:
    """Raise `KeyError` for a message without `content`, as the reference does (it reads `msg["content"]`).

    `roles` limits the check to those roles (the Chat Completions path reads an assistant
    message's content with `.get`); None checks every message item.
    """
    for item in items:
        is_message = item.get("type", "message") == "message"
        if is_message and "content" not in item and (roles is None or item.get("role", "user") in roles):
            raise KeyError("content")


def _spoken_content(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items with the `content` a tool-call item carries said by the assistant before it, as the reference does.

    Reasoning is the exception: its content is the model's private reasoning, never shown.
    """
    spoken: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type", "message")
        if kind not in ("message", "reasoning") and item.get("content"):
            spoken.append({"role": "assistant", "content": item["content"]})
        spoken.append(item)
    return spoken


def _responses_conversation(messages: list[dict[str, Any]] | str, tools: list[dict[str, Any]] | None,
                            response: Any, instructions: Any, settings: Settings) -> Conversation:
    items = input_items(messages)
    _require_content(items)
    output = list((_plain(response) or {}).get("output") or []) if response is not None else []
    items = _spoken_content(items)
    history = len(items)
    items = items + output[: split_answer(output)]
    if items and items[-1].get("type") == "function_call":
        _warn_last()
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
    settings = _reference(settings)
    kwargs = dict(responses_api_kwargs)
    if response is not None:
        kwargs["response"] = response
    responses = response is not None and use_responses is not False
    if responses or isinstance(messages, str) or uses_responses_api(messages, tools, use_responses, **kwargs):
        conv = _responses_conversation(messages, tools, response, kwargs.get("instructions"), settings)
    else:
        _require_content(messages, roles=("system", "developer", "user", "tool"))
        last = messages[-1] if messages else {}
        if last.get("role") == "assistant" or "tool_calls" in last:
            _warn_last()
        conv = convert_chat(messages, tools=tools, settings=settings)
    keyed = {url_key(url): page for url, page in (pages or {}).items()}  # render looks pages up by key
    return render_prompt(conv, keyed, settings)


def form_response_string_responses_api(response: Any) -> str:
    """The answer of a Responses API `Response` (or its dict) as a string, tool calls included."""
    output = list((_plain(response) or {}).get("output") or [])
    start = split_answer(output)
    settings = _reference(None)
    conv = convert_items(output, answer_start=start, settings=settings)
    return render_response(conv, settings=settings)


def _message_dict(response: Any) -> dict[str, Any]:
    """A chat message as a dict; `TypeError` for anything else, with the reference's message."""
    plain = _plain(response)
    if not isinstance(plain, dict):
        got = type(response).__name__
        raise TypeError(f"Expected response to be a dict or ChatCompletionMessage object, got {got}")
    return plain


def _check_tool_calls(tool_calls: Any) -> None:
    """Read tool calls as strictly as the reference does: raises where it raises (then it shows content only)."""
    for call in tool_calls:
        function = call["function"]
        arguments = function.get("arguments")
        str(function["name"])
        if arguments:
            json.loads(arguments)


def form_response_string_chat_completions_api(response: Any) -> str:
    """An assistant message of Chat Completions (dict or SDK object) as a string.

    Tool calls the reference cannot read (no `function` or `name`, arguments that are not a JSON
    string) make it show the content only, with a warning; so does this.
    """
    message = _message_dict(response)
    if message.get("tool_calls") is not None:
        try:
            _check_tool_calls(message["tool_calls"])
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            warnings.warn(f"Error formatting tool_calls in response: {exc}. Returning content only.",
                          UserWarning, stacklevel=2)
            return str(message.get("content") or "")
    settings = _reference(None)
    conv = convert_chat([], answer=message, settings=settings)
    return render_response(conv, settings=settings)


def form_response_string_chat_completions(response: Any) -> str:
    """The first choice's message of a `ChatCompletion` as a string."""
    return form_response_string_chat_completions_api(_plain(response)["choices"][0]["message"])
