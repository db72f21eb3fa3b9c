"""`<think>…</think>` reasoning that chat models write into their answer text, split from the answer.

Reasoning models served through OpenAI-compatible chat endpoints (DeepSeek-R1, Qwen3/QwQ,
Perplexity sonar-reasoning, most vLLM/llama.cpp/Ollama deployments without a reasoning parser)
put their chain of thought in the message content, inside `<think>` tags. It is not the answer:
it is removed from what is scored. Shapes handled:

- one or more closed blocks `<think>…</think>`, anywhere in the text;
- a leading block without its opening tag (`…</think>answer`): chat templates that open the
  block in the prompt (DeepSeek-R1, QwQ) make the model write only the closing tag;
- an opening tag never closed at the start of the text (`<think>…` to the end): the answer was
  cut off while reasoning, and there is no answer text.

A lone `<think>` elsewhere (prose about the tag) is left as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_OPEN = "<think>"
_CLOSE = "</think>"
_BLOCK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


@dataclass(frozen=True)
class ThinkSplit:
    """An answer text with its reasoning taken out.

    `text` is what remains (stripped of the whitespace the blocks leave at its ends), `reasoning`
    the removed blocks' inner text in order, and `unclosed` true when a `<think>` block ran to the
    end of the text (nothing after it is answer).
    """

    text: str
    reasoning: tuple[str, ...] = ()
    unclosed: bool = False

    @property
    def found(self) -> bool:
        """Whether the text held any reasoning at all."""
        return bool(self.reasoning) or self.unclosed


def split_think(text: str) -> ThinkSplit:
    """Split `<think>` reasoning from an answer text; text without it comes back unchanged."""
    if _OPEN not in text and _CLOSE not in text:
        return ThinkSplit(text)
    reasoning: list[str] = []
    rest = text
    close = rest.find(_CLOSE)
    opening = rest.find(_OPEN)
    if close != -1 and (opening == -1 or close < opening):  # the opening tag was in the prompt
        reasoning.append(rest[:close].strip())
        rest = rest[close + len(_CLOSE):]
    reasoning.extend(match.group(1).strip() for match in _BLOCK.finditer(rest))
    rest = _BLOCK.sub("", rest)
    unclosed = rest.lstrip().startswith(_OPEN)
    if unclosed:
        reasoning.append(rest.lstrip()[len(_OPEN):].strip())
        rest = ""
    if not reasoning:
        return ThinkSplit(text)
    return ThinkSplit(rest.strip(), tuple(reasoning), unclosed)
