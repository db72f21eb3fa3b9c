"""GenAI content the completion hook uploaded, read back from where a span names it.

With `OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=upload` the OpenTelemetry GenAI instrumentations
write a call's messages, system instructions and tool definitions to files under
`OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH` (any `fsspec` location) and the span (and its event)
holds only their URIs: `gen_ai.input.messages_ref`, `gen_ai.output.messages_ref`,
`gen_ai.system_instructions_ref`, `gen_ai.tool.definitions_ref` (`….ref` read too). A file is one
line holding the JSON array (`json`, the default) or one message a line with its `index` (`jsonl`).

A `file://` URI or a path is read where it points (a relative path: from the trace file's
folder); when it is not there, or the URI names another place (`gs://`, `s3://`, `https://`), the
file of that name is looked for in the trace file's folder, then in the folder named as the
upload's own beside it (the uploads copied or moved with the trace). What is found nowhere is an
error that names the URIs to fetch and where to put them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["uploaded"]

CONTENT = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions", "gen_ai.tool.definitions")
"""The attributes the hook uploads; each span names its file as the attribute with `_ref` (or `.ref`) added."""


def _places(uri: str, base: Path) -> list[Path]:
    """Where the file a URI names may be: where it points (a local one), then by its name beside the trace."""
    parts = urlsplit(uri)
    places: list[Path] = []
    if parts.scheme in ("", "file") or len(parts.scheme) == 1:  # a Windows drive letter is a path too
        path = Path(unquote(parts.path) if parts.scheme == "file" else uri)
        places.append(path if path.is_absolute() else base / path)
    name = PurePosixPath(unquote(parts.path))
    places += [base / name.name, base / name.parent.name / name.name]
    return places


def _parsed(text: str) -> Any:
    """An uploaded file's value: its one JSON array, or its JSON lines (each with its `index`) in order."""
    values = [json.loads(line) for line in text.splitlines() if line.strip()]
    if len(values) == 1 and not isinstance(values[0], Mapping):
        return values[0]  # `json`: the one array
    values.sort(key=lambda v: v.get("index", 0) if isinstance(v, Mapping) else 0)
    return [{k: v for k, v in value.items() if k != "index"} if isinstance(value, Mapping) else value
            for value in values]


def refs(attributes: Mapping[str, Any]) -> dict[str, str]:
    """The uploaded files a span names, by the attribute each holds (only those the span does not hold itself)."""
    found: dict[str, str] = {}
    for name in CONTENT:
        uri = attributes.get(f"{name}_ref") or attributes.get(f"{name}.ref")
        if isinstance(uri, str) and uri and name not in attributes:
            found[name] = uri
    return found


def uploaded(attributes: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """The content a span names by URI, read from its files; `ValueError` names the files found nowhere.

    `base`: the folder of the trace file, where relative paths and moved uploads are looked for.
    """
    loaded: dict[str, Any] = {}
    missing: list[str] = []
    for name, uri in refs(attributes).items():
        path = next((p for p in _places(uri, base) if p.is_file()), None)
        if path is None:
            missing.append(uri)
            continue
        try:
            loaded[name] = _parsed(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"uploaded content {path} is not the hook's JSON: {exc}") from None
    if missing:
        raise ValueError(f"the span's messages were uploaded by the completion hook and are not here: fetch "
                         f"{', '.join(missing)} into {base} (or give the trace file where they are)")
    return loaded
