"""Message content parts as text; images, files and audio become short placeholders, never base64."""

from __future__ import annotations

import base64
import binascii
import hashlib
import urllib.parse
from collections.abc import Callable
from typing import Any

_TEXT_PARTS = ("output_text", "input_text", "text", "summary_text", "reasoning_text")
REASONING_PARTS = frozenset({"thinking", "redacted_thinking", "reasoning"})
"""Content parts that hold a model's reasoning, not its answer (Mistral's and others' `thinking`, `reasoning`)."""


_ATTACHMENT = "mlflow-attachment://"
"""MLflow's reference to media it keeps apart from a trace (its query names the media type and size)."""


def _attachment_summary(uri: str) -> str:
    """An MLflow attachment's media type and size as its URI states them; its bytes are not in the record."""
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(uri).query))
    size = query.get("size", "")
    pieces = [query.get("content_type", ""), f"{int(size):,} bytes" if size.isdigit() else "",
              f"kept in MLflow ({uri.split('?', 1)[0]})"]
    return ", ".join(p for p in pieces if p)


def blob_summary(data: str) -> str:
    """Describe inline data (a data: URL or bare base64) by media type, size and a short hash.

    An MLflow attachment URI in its place is described by what the URI states, never by its own length.
    """
    if _ATTACHMENT in data[:100]:
        return _attachment_summary(data[data.index(_ATTACHMENT):])
    media = ""
    payload = data
    if data.startswith("data:"):
        header, _, payload = data.partition(",")
        media = header[5:].split(";", 1)[0]
    try:
        raw = base64.b64decode(payload, validate=False)
    except (binascii.Error, ValueError):
        raw = payload.encode("utf-8", "replace")
    digest = hashlib.sha256(raw).hexdigest()[:12]
    pieces = [p for p in (media, f"{len(raw):,} bytes", f"sha256:{digest}") if p]
    return ", ".join(pieces)


def _image(part: dict[str, Any]) -> str:
    url = part.get("image_url")
    if isinstance(url, dict):
        url = url.get("url")
    if isinstance(url, str) and url.startswith(("data:", _ATTACHMENT)):
        return f"[image: {blob_summary(url)}]"
    if isinstance(url, str) and url:
        return f"[image: {url}]"
    if part.get("file_id"):
        return f"[image: file {part['file_id']}]"
    return "[image]"


def _file(part: dict[str, Any]) -> str:
    fields = [str(part["filename"])] if part.get("filename") else []
    if isinstance(part.get("file_data"), str) and part["file_data"]:
        fields.append(blob_summary(part["file_data"]))
    if part.get("file_url"):
        fields.append(str(part["file_url"]))
    if part.get("file_id"):
        fields.append(str(part["file_id"]))
    return f"[file: {', '.join(fields)}]" if fields else "[file]"


def _audio(part: dict[str, Any]) -> str:
    audio = part.get("input_audio") or part
    data = audio.get("data") if isinstance(audio, dict) else None
    fmt = audio.get("format") if isinstance(audio, dict) else None
    detail = ", ".join(str(x) for x in (fmt, blob_summary(data) if isinstance(data, str) else None) if x)
    return f"[audio: {detail}]" if detail else "[audio]"


def _refusal(part: dict[str, Any]) -> str:
    return str(part.get("refusal") or "")


def _text(part: dict[str, Any]) -> str:
    return str(part.get("text") or "")


def _chat_file(part: dict[str, Any]) -> str:
    inner = part.get("file")
    return _file(inner if isinstance(inner, dict) else part)


_PARTS: dict[str, Callable[[dict[str, Any]], str]] = {
    **dict.fromkeys(_TEXT_PARTS, _text),
    "refusal": _refusal,
    "input_image": _image, "image_url": _image, "image": _image,
    "input_file": _file, "file": _chat_file,
    "input_audio": _audio, "audio": _audio,
}


def reasoning_text(part: dict[str, Any]) -> str:
    """The text of a reasoning part: `thinking` as a string or a list of text chunks (Mistral), else `text`."""
    inner = part.get("thinking", part.get("reasoning", part.get("text")))
    if isinstance(inner, list):
        return "".join(part_text(chunk) for chunk in inner)
    return inner if isinstance(inner, str) else ""


def part_type(part: Any) -> str | None:
    """A content part's type, or None for a bare string."""
    return str(part.get("type")) if isinstance(part, dict) else None


def is_known_part(part: Any) -> bool:
    """Whether a content part is of a type shown as it is meant (text, media placeholders, reasoning)."""
    kind = part_type(part)
    return not isinstance(part, dict) or kind in _PARTS or kind in REASONING_PARTS


def part_text(part: Any) -> str:
    """The text of one content part as the scorer should see it (reasoning as a `<think>` block)."""
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        return str(part)
    if part.get("type") in REASONING_PARTS:
        return f"<think>{reasoning_text(part)}</think>"
    render = _PARTS.get(str(part.get("type")))
    if render is not None:
        return render(part)
    if isinstance(part.get("text"), str):
        return str(part["text"])
    return f"[{part.get('type') or 'content'}]"


def content_text(content: Any) -> str:
    """Message content (a string or a list of parts) as one string, parts joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part_text(part) for part in content)
    return str(content)
