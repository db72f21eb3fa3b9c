"""Render: a `Conversation` and its pages become the TLM prompt and response strings, and evidence values.

Pure: the same Conversation, pages and Settings give the same bytes. `_prompt` writes cleanlab-tlm's
prompt format; `_shown` builds the evidence each tool response shows, once, as prompt text and as
`Evidence` values for scorers; `_excerpt` cuts page text to its budget, cited passages first.

The package is named `rendering` because `tlmscore.render` is the public function it provides.
Later stages also use its halves (`render_prompt`, `render_response`), the prompt's tool-section
wording (`TOOL_DEFINITIONS_PREFIX`, `TOOL_CALL_SCHEMA`), `unavailable_text` and `text_words` (the words an
excerpt is chosen by), from here.
"""

from __future__ import annotations

from tlmscore.rendering._excerpt import text_words
from tlmscore.rendering._prompt import (
    TOOL_CALL_SCHEMA,
    TOOL_DEFINITIONS_PREFIX,
    render,
    render_prompt,
    render_response,
)
from tlmscore.rendering._shown import unavailable_text

__all__ = ["TOOL_CALL_SCHEMA", "TOOL_DEFINITIONS_PREFIX", "render", "render_prompt", "render_response",
           "text_words", "unavailable_text"]
