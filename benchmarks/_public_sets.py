"""Readers for public hallucination benchmarks in their published file formats, as labelled transcript records.

Users download the sets themselves (they are not shipped, and not fetched here); each reader turns
one into records like `_validity.document_record`'s — the source as a function call's output,
the answer as the response — with `metadata.label` 1 for a faithful answer, 0 for a hallucinated one.

- RAGTruth (Niu et al., 2024): a folder with `response.jsonl` (`id`, `source_id`, `model`,
  `labels`: hallucinated spans, `split`, `response`) and `source_info.jsonl` (`source_id`,
  `task_type`: QA, Summary, Data2txt, `source_info`: a string or an object, `prompt`). A response
  with any labelled span is hallucinated. Only the `test` split is read (`split=None`: all).
- LLM-AggreFact (Tang et al., 2024): JSON lines or CSV with `dataset`, `doc`, `claim`, `label`
  (1 supported, 0 not), one benchmark per `dataset` value.
- HaluEval (Li et al., 2023): JSON lines of one task file — QA (`knowledge`, `question`,
  `right_answer`, `hallucinated_answer`), summarization (`document`, `right_summary`,
  `hallucinated_summary`) or dialogue (`knowledge`, `dialogue_history`, `right_response`,
  `hallucinated_response`); each line gives a faithful and a hallucinated record.

A line that does not parse or lacks a field stops the reader with one line naming the file and line.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Published references, printed beside our figures (the papers' and the leaderboard's numbers).
RAGTRUTH_REFERENCES = (("GPT-4 prompt", 63.4), ("LettuceDetect-large", 79.2), ("fine-tuned Llama-2-13B", 78.7))
AGGREFACT_REFERENCES = (("MiniCheck-7B", 77.1), ("GPT-4o", 75.9), ("AlignScore", 70.5), ("SummaC-ZS", 67.7))
_TOOL = {"type": "function", "name": "read_source", "description": "Read the source the answer is based on.",
         "parameters": {"type": "object", "properties": {}, "additionalProperties": False}, "strict": True}


class FormatError(ValueError):
    """A benchmark file that is not in its published format; the message names the file and line."""


def record(key: str, source: str, answer: str, label: int, question: str = "Answer from the source.",
           **metadata: Any) -> dict[str, Any]:
    """A Responses API record: the source as a function call's output, the answer as the response."""
    call = f"call_{key}"
    request = {"model": "unknown", "tools": [_TOOL], "input": [
        {"role": "user", "content": question},
        {"type": "function_call", "name": "read_source", "arguments": "{}", "call_id": call, "id": f"fc_{key}",
         "status": "completed"},
        {"type": "function_call_output", "call_id": call, "output": source}]}
    response = {"id": f"resp_{key}", "object": "response", "model": "unknown", "status": "completed",
                "output": [{"type": "message", "id": f"msg_{key}", "role": "assistant", "status": "completed",
                            "content": [{"type": "output_text", "text": answer, "annotations": []}]}]}
    return {"id": key, "request": request, "response": response, "metadata": {"label": label, **metadata}}


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each object of a JSON-lines file (a JSON array is read too), with its line number."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
        yield from ((n, item) for n, item in enumerate(items, 1))
        return
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{path}:{n}: not JSON: {exc.msg}") from None
        if not isinstance(item, dict):
            raise FormatError(f"{path}:{n}: expected a JSON object")
        yield n, item


def _field(item: dict[str, Any], name: str, where: str) -> Any:
    """`item[name]`; a missing or null field (a CSV row's missing cell) is a `FormatError` naming `where`."""
    if item.get(name) is None:
        raise FormatError(f"{where}: missing field {name!r}")
    return item[name]


def _source_text(info: Any) -> str:
    """RAGTruth's `source_info`: a string (summaries), or an object (QA passages, data-to-text records)."""
    if isinstance(info, str):
        return info
    if isinstance(info, dict) and "passages" in info:
        return str(info["passages"])
    return json.dumps(info, ensure_ascii=False)


def ragtruth(folder: Path, split: str | None = "test") -> list[dict[str, Any]]:
    """RAGTruth's responses of `split` (all with None), labelled 0 when any span is marked hallucinated."""
    sources: dict[str, dict[str, Any]] = {}
    for n, item in _json_lines(folder / "source_info.jsonl"):
        sources[str(_field(item, "source_id", f"{folder / 'source_info.jsonl'}:{n}"))] = item
    found = []
    for n, item in _json_lines(folder / "response.jsonl"):
        where = f"{folder / 'response.jsonl'}:{n}"
        if split is not None and item.get("split") != split:
            continue
        source = sources.get(str(_field(item, "source_id", where)))
        if source is None:
            raise FormatError(f"{where}: source_id {item['source_id']!r} is not in source_info.jsonl")
        info = _field(source, "source_info", where)
        question = info.get("question", "Answer from the source.") if isinstance(info, dict) else "Summarise."
        found.append(record(f"ragtruth-{_field(item, 'id', where)}", _source_text(info),
                            str(_field(item, "response", where)), int(not _field(item, "labels", where)),
                            str(question), task=source.get("task_type", ""), model=item.get("model", "")))
    return found


def aggrefact(path: Path) -> list[dict[str, Any]]:
    """LLM-AggreFact's rows (JSON lines or CSV), each a claim against its document, by `dataset`."""
    if path.suffix.lower() == ".csv":
        with path.open(encoding="utf-8", newline="") as handle:
            rows: list[tuple[int, dict[str, Any]]] = [(n, dict(r)) for n, r in enumerate(csv.DictReader(handle), 2)]
    else:
        rows = list(_json_lines(path))
    found = []
    for n, item in rows:
        where = f"{path}:{n}"
        label = str(_field(item, "label", where)).strip()
        if label not in {"0", "1", "0.0", "1.0"}:
            raise FormatError(f"{where}: label must be 0 or 1, not {label!r}")
        found.append(record(f"aggrefact-{n}", str(_field(item, "doc", where)), str(_field(item, "claim", where)),
                            int(float(label)), dataset=str(_field(item, "dataset", where))))
    return found


_HALUEVAL = (  # (fields of the source, the question, the faithful answer, the hallucinated one) per task
    ("qa", ("knowledge",), "question", "right_answer", "hallucinated_answer"),
    ("summarization", ("document",), None, "right_summary", "hallucinated_summary"),
    ("dialogue", ("knowledge",), "dialogue_history", "right_response", "hallucinated_response"),
)


def halueval(path: Path) -> list[dict[str, Any]]:
    """A HaluEval task file: each line's faithful answer (label 1) and hallucinated answer (label 0)."""
    found = []
    for n, item in _json_lines(path):
        task = next((t for t in _HALUEVAL if t[3] in item), None)
        if task is None:
            raise FormatError(f"{path}:{n}: not a HaluEval QA, summarization or dialogue line "
                              f"(no right_answer, right_summary or right_response)")
        name, sources, question, right, wrong = task
        where = f"{path}:{n}"
        source = "\n".join(str(_field(item, s, where)) for s in sources)
        asked = str(_field(item, question, where)) if question else "Summarise the document."
        found.append(record(f"halueval-{n}-right", source, str(item[right]), 1, asked, task=name))
        found.append(record(f"halueval-{n}-wrong", source, str(_field(item, wrong, where)), 0, asked, task=name))
    return found
