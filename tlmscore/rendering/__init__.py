"""Render: a `Conversation` and its pages become the TLM prompt and response strings, and evidence values.

Pure: the same Conversation, pages and Settings give the same bytes. `_prompt` writes cleanlab-tlm's
prompt format; `_shown` builds the evidence each tool response shows, once, as prompt text and as
`Evidence` values for scorers; `_excerpt` cuts page text to its budget, cited passages first.

The package is named `rendering` because `tlmscore.render` is the public function it provides.
"""

from __future__ import annotations

from tlmscore.rendering._prompt import render

__all__ = ["render"]
