"""The evidence a prompt holds, as documents the grounding scorer can search.

When render handed over its evidence as values (`ScoringInput.evidence`), those are the documents:
the budgeted text the prompt shows, whether it was available (a failed page counts as missing
evidence whatever the prompt says about it), its URL, title, citation number and the answer spans
citing it. Only for prompts rendered elsewhere (`evidence` is None) are tool results read back from
the prompt's `<tool_response>` blocks, which is what a scorer sees there. Web results list pages
(`url`, `title`, `content`), file search lists results (`filename`, `text`), any other tool output
is flattened to `key: value` lines (a short table too, `count` over `17` as `count: 17`). Image
placeholders are no evidence: a tool output that is only an image is unavailable (`IMAGE_ONLY`).
Messages that count as evidence (instructions and system/developer messages, unless
`messages="none"`; user and assistant messages too with `messages="all"`) come from render's
values, else the `Conversation` when the input has one, otherwise from the prompt's role-prefixed
sections.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from tlmscore._tables import json_cell
from tlmscore._urls import url_key
from tlmscore.convert import FILE_SEARCH_NOT_LOGGED
from tlmscore.model import Conversation, Evidence, Message, ScoringInput, WebResult
from tlmscore.rendering import TOOL_CALL_SCHEMA, TOOL_DEFINITIONS_PREFIX

UNAVAILABLE_PREFIX = "This page could not be retrieved ("
MODEL_NOTE_PREFIX = "summarised by "
IMAGE_ONLY = "only an image, no text to check against"
MessagePolicy = Literal["none", "context", "system", "all"]
_BLOCK = re.compile(r"<(tool_response|tool_call)>\n(.*?)\n</\1>", re.DOTALL)
_ROLE = re.compile(r"(?m)^(System|User|Assistant|Tool): ?")
_TOOLS_SECTION = re.compile(re.escape(TOOL_DEFINITIONS_PREFIX) + r".*?" + re.escape(TOOL_CALL_SCHEMA), re.DOTALL)
_SYSTEM_ROLES = ("system", "developer")
# Convert's placeholder for an image in a tool result (`[image]`, `[image: image/png, 70 bytes, sha256:…]`).
_IMAGE = re.compile(r"\[image(?::[^\]\n]*)?\]")
_KEY_ONLY = re.compile(r"(?m)^[^\n:]{0,60}:[ \t]*$")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
# A short table a tool returned (CSV, TSV, a markdown table, or a header line over a value line).
_TABLE_LINES = (2, 40)
_TABLE_CELL = 40
_TABLE_NUMBER = re.compile(r"^[-+]?[$€£]?\d[\d,]*(?:\.\d+)?%?$")


@dataclass(frozen=True)
class Document:
    """One piece of evidence: a page, a file search result, a tool output or a message.

    `source` names it for people (URL, file name, tool name, role); `key` matches citations
    (`url_key` of a page's URL, else empty, or `evidence_key` of an `Evidence`); `number` is the
    answer's citation number for it (`[n]`), when known; `structured` marks a tool output that was
    JSON (now `key: value` lines, whose facts belong together however far apart). An unavailable
    document has no text and a `reason`. `summary` marks a page a model read and summarised
    (render's `origin` `model`, or a prompt entry's note "summarised by ..."): weaker evidence
    than a page's own text.
    """

    kind: Literal["page", "file", "tool", "message"]
    source: str
    text: str
    key: str = ""
    reason: str | None = None
    number: int | None = None
    structured: bool = False
    summary: bool = False

    @property
    def available(self) -> bool:
        """True when the document has text to check against."""
        return self.reason is None and bool(self.text.strip())


def strip_blocks(text: str) -> str:
    """`text` without its `<tool_call>` and `<tool_response>` blocks."""
    return _BLOCK.sub(" ", text)


def _json_in(text: str) -> Any:
    """The object or array `text` holds as JSON, else None."""
    value = json_cell(text.strip())
    return value if isinstance(value, (dict, list)) else None


def _flatten(value: Any, path: str = "") -> Iterator[str]:
    """A JSON value as `key: value` lines, so its facts read like sentences."""
    if isinstance(value, str):
        parsed = _json_in(value)
        if parsed is not None:
            yield from _flatten(parsed, path)
        else:
            yield f"{path}: {value}" if path else value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _flatten(item, f"{path} {_key_words(str(key))}".strip())
    elif isinstance(value, list):
        for item in value:
            yield from _flatten(item, path)
    elif value is not None:
        yield f"{path}: {value}" if path else str(value)


def _key_words(key: str) -> str:
    """A JSON key as words: `requested_units` and `requestedUnits` both read `requested units`."""
    spaced = _CAMEL.sub(" ", key)
    return (spaced.lower() if spaced != key else key).replace("_", " ")


def without_images(text: str) -> str:
    """`text` without image placeholders, and without the `key:` lines that held nothing else."""
    if "[image" not in text:
        return text
    return _KEY_ONLY.sub("", _IMAGE.sub("", text)).strip()


def _cells(line: str, delimiter: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split(delimiter)] if delimiter else [line.strip()]


def table_lines(text: str) -> list[str] | None:
    """A short table as `column: value` lines (`count` over `17` → `count: 17`), or None when `text` is no table.

    A table: 2 to 40 lines with the same number of cells split at commas, tabs or bars (or one
    cell each: a header over a value), no cell longer than a few words or ending a sentence, and a
    number among the values. A markdown table's rule line (`|---|`) is left out.
    """
    lines = [ln for ln in text.strip().splitlines() if ln.strip() and not re.fullmatch(r"[\s|:-]+", ln)]
    if not _TABLE_LINES[0] <= len(lines) <= _TABLE_LINES[1]:
        return None
    delimiter = next((d for d in ("\t", "|", ",") if all(d in ln for ln in lines)), "")
    rows = [_cells(ln, delimiter) for ln in lines]
    width = len(rows[0])
    if any(len(r) != width for r in rows) or (not delimiter and len(rows) != _TABLE_LINES[0]):
        return None
    if any(len(c) > _TABLE_CELL or c.endswith((".", "!", "?")) for r in rows for c in r):
        return None
    if not any(_TABLE_NUMBER.match(c) for r in rows[1:] for c in r):
        return None
    header = rows[0]
    return [f"{key}: {value}" for row in rows[1:] for key, value in zip(header, row, strict=True)]


def _structured(value: Any) -> bool:
    """Whether a tool output is JSON (a value, or a string holding an object or array)."""
    return _json_in(value) is not None if isinstance(value, str) else value is not None


def _tool(name: str, output: Any) -> Document:
    return _tool_document(Document("tool", name, "\n".join(_flatten(output)), structured=_structured(output)))


def _tool_document(doc: Document) -> Document:
    """A tool output without its image placeholders (only an image: no evidence), a short table as `column: value`."""
    text = without_images(doc.text)
    if not text and doc.text.strip():
        return Document(doc.kind, doc.source, "", doc.key, IMAGE_ONLY, doc.number)
    table = None if doc.structured else table_lines(text)
    if table is not None:
        return Document(doc.kind, doc.source, "\n".join(table), doc.key, doc.reason, doc.number, structured=True)
    return Document(doc.kind, doc.source, text, doc.key, doc.reason, doc.number, doc.structured)


def _page(entry: dict[str, Any]) -> Document:
    url = str(entry.get("url") or "")
    content = str(entry.get("content") or "")
    title = str(entry.get("title") or "")
    if content.startswith(UNAVAILABLE_PREFIX):
        reason = content[len(UNAVAILABLE_PREFIX):].split(")", 1)[0]
        return Document("page", url, "", url_key(url), reason or "could not be retrieved")
    text = f"{title}\n{content}" if title else content
    summary = str(entry.get("note") or "").startswith(MODEL_NOTE_PREFIX)
    return Document("page", url, text, url_key(url), None if content.strip() else "empty page", summary=summary)


def _file(entry: dict[str, Any]) -> Document:
    name = str(entry.get("filename") or entry.get("file_id") or "file")
    return Document("file", name, str(entry.get("text") or ""))


def _tool_documents(body: Any) -> list[Document]:
    """Documents of one parsed `<tool_response>` body."""
    if not isinstance(body, dict):
        return [_tool("tool", body)]
    name = str(body.get("name") or "tool")
    output = body.get("output")
    entries = output if isinstance(output, list) and all(isinstance(e, dict) for e in output) else []
    if entries and all("url" in e for e in entries):
        return [_page(e) for e in entries]
    if entries and all("text" in e for e in entries):
        return [_file(e) for e in entries]
    if output == FILE_SEARCH_NOT_LOGGED:
        return [Document("file", name, "", reason="file search results were not logged")]
    return [_tool(name, output)]


def _tool_responses(prompt: str) -> list[Document]:
    docs: list[Document] = []
    for match in _BLOCK.finditer(prompt):
        if match.group(1) != "tool_response":
            continue
        try:
            body = json.loads(match.group(2))
        except json.JSONDecodeError:
            docs.append(Document("tool", "tool", match.group(2)))
            continue
        docs.extend(_tool_documents(body))
    return docs


def _conversation_messages(conv: Conversation, policy: MessagePolicy) -> list[Document]:
    docs = [Document("message", "instructions", conv.instructions)] if conv.instructions else []
    for turn in conv.turns:
        if isinstance(turn, Message) and (policy == "all" or turn.role in _SYSTEM_ROLES):
            docs.append(Document("message", turn.role, turn.text))
    return docs


def _prompt_messages(prompt: str, policy: MessagePolicy) -> list[Document]:
    text = strip_blocks(_TOOLS_SECTION.sub(" ", prompt))
    pieces = _ROLE.split(text)
    sections = [("User", pieces[0])] if pieces[0].strip() else []
    sections += list(zip(pieces[1::2], pieces[2::2], strict=True))
    wanted = ("System", "User", "Assistant") if policy == "all" else ("System",)
    return [Document("message", role.lower(), body.strip()) for role, body in sections
            if role in wanted and body.strip()]


def evidence_key(evidence: Evidence) -> str:
    """The key citations use for `evidence`: the `url_key` of its URL, else its kind and id or title."""
    if evidence.url:
        return url_key(evidence.url)
    name = evidence.doc_id or evidence.title or evidence.call_id or ""
    return f"{evidence.kind}:{name}" if name else ""


def _from_evidence(evidence: Evidence) -> Document:
    """A document from render's value: unavailable evidence has no text, whatever its wording in the prompt."""
    source = evidence.url or evidence.title or evidence.doc_id or evidence.tool or evidence.origin or str(evidence.kind)
    if not evidence.available:
        failure = evidence.status if evidence.status and evidence.status != "ok" else "unavailable"
        if evidence.error:
            failure = f"{failure}: {evidence.error}"
        return Document(evidence.kind, source, "", evidence_key(evidence), failure, evidence.number)
    text = evidence.text
    if evidence.kind == "page" and evidence.title and not text.startswith(evidence.title):
        text = f"{evidence.title}\n{text}"
    structured = evidence.kind == "tool" and _structured(text)
    if structured:
        text = "\n".join(_flatten(text))
    reason = None if text.strip() else f"empty {evidence.kind}"
    doc = Document(evidence.kind, source, text, evidence_key(evidence), reason, evidence.number, structured,
                   summary=evidence.origin == "model")
    return _tool_document(doc) if evidence.kind == "tool" and reason is None else doc


def _message_selected(evidence: Evidence, policy: MessagePolicy) -> bool:
    return policy == "all" or (evidence.origin or "system") in {"instructions", *_SYSTEM_ROLES}


def _messages(item: ScoringInput, messages: MessagePolicy) -> list[Document]:
    """The messages that count as evidence, from render's values, the conversation or the prompt."""
    given = [e for e in item.evidence or () if e.kind == "message"]
    if given:
        return [Document("message", e.origin or "system", e.text) for e in given if _message_selected(e, messages)]
    if item.conversation is not None:
        return _conversation_messages(item.conversation, messages)
    return _prompt_messages(item.prompt, messages)


def documents(item: ScoringInput, messages: MessagePolicy = "system") -> list[Document]:
    """Every evidence document of one input: tool results first, then the messages `messages` selects.

    `context` and `system` select the same messages; they differ in whether messages alone make an
    input scorable, which is the grounding scorer's decision.
    """
    if item.evidence is not None:
        docs = [_from_evidence(e) for e in item.evidence if e.kind != "message"]
    else:
        docs = _tool_responses(item.prompt)
    if messages != "none":
        docs += _messages(item, messages)
    return [d for d in docs if d.available or d.reason is not None]


def cited_urls(item: ScoringInput) -> dict[str, tuple[str, ...]]:
    """Citation spans: evidence key → the answer spans citing it.

    From render's values (`Evidence.cited`, spans of the response) and from the conversation's
    web results (`WebRef.cited`), so prompts rendered elsewhere keep their recorded citations.
    """
    found: dict[str, tuple[str, ...]] = {}

    def add(key: str, spans: tuple[str, ...]) -> None:
        if key and spans:
            found[key] = tuple(dict.fromkeys((*found.get(key, ()), *spans)))

    for evidence in item.evidence or ():
        add(evidence_key(evidence), tuple(item.response[start:end] for start, end in evidence.cited))
    if item.conversation is not None:
        for turn in item.conversation.turns:
            if isinstance(turn, WebResult):
                for ref in turn.refs:
                    add(url_key(ref.url), ref.cited)
    return found


def numbered(item: ScoringInput) -> dict[int, str]:
    """The answer's citation numbers (`[n]`) → evidence keys, from render's values."""
    return {e.number: evidence_key(e) for e in item.evidence or () if e.number is not None and evidence_key(e)}
