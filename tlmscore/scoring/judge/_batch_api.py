"""Requests through the OpenAI Batch API, resumable by `custom_id`, with their state in a folder.

`BatchRunner.run(requests)` takes request bodies keyed by `custom_id` and returns, for each, the
response body or a `BatchFailure`. It writes the Batch input file (JSONL lines `{custom_id, method,
url, body}`, split at the API's limits), uploads it through the Files API, creates the batch, polls
it with a growing interval, downloads the output and error files and joins them by `custom_id`.

The folder makes a run resumable after it was stopped at any point:

- `results.jsonl` keeps every successful response as it arrives; a request that has one is never
  sent again;
- `state.json` lists each input file with its uploaded file id and batch id, written after each
  step; a rerun polls a batch already submitted instead of submitting its requests again, creates
  the batch of a file uploaded just before the stop (after checking the API's list of batches for
  one made from that file), and submits only what no batch covers.

A request that failed (an error line, or a batch that failed or expired) has no result, so the
next run sends it again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from tlmscore._chat import request_headers
from tlmscore.errors import ScorerError

if TYPE_CHECKING:
    import openai
    from openai.types import Batch

    from tlmscore.scoring.judge._options import JudgeOptions


STATE_FORMAT = "tlmscore-batch-state/1"
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
_LIST_SCAN = 1000  # batches looked through for one made from an uploaded file
_MAX_BYTES = 190_000_000  # an input file's size, under the API's 200 MB
_WINDOW = "24h"
_ENDPOINT: Final = "/v1/chat/completions"  # the requests every batch holds
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchFailure:
    """A request the batch did not answer with success: the HTTP status (None when there was none) and why."""

    status: int | None
    message: str


@dataclass
class _Entry:
    """One input file and how far it got: uploaded (`file_id`), submitted (`batch_id`), collected."""

    input: str
    file_id: str | None = None
    batch_id: str | None = None
    collected: bool = False


@dataclass
class _State:
    batches: list[_Entry] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)


def _objects(lines: Iterable[str | bytes]) -> Iterator[dict[str, Any]]:
    """The JSON objects among `lines`, skipping a line cut short by a stop mid-write."""
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    """JSON objects of a JSONL file (none when there is no file yet)."""
    if not path.exists():
        return
    with path.open("rb") as handle:
        yield from _objects(handle)


def _failure_of(line: dict[str, Any]) -> tuple[str, dict[str, Any] | BatchFailure] | None:
    """A Batch output or error line as (custom_id, body or failure); None for a line without custom_id."""
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str):
        return None
    response = line["response"] if isinstance(line.get("response"), dict) else {}
    status = response.get("status_code") if isinstance(response.get("status_code"), int) else None
    body = response.get("body")
    if status == 200 and isinstance(body, dict):  # noqa: PLR2004  (HTTP OK)
        return custom_id, body
    error = line.get("error") or (body.get("error") if isinstance(body, dict) else None) or body
    message = error.get("message") if isinstance(error, dict) else error
    prefix = f"HTTP {status}: " if status is not None else ""
    return custom_id, BatchFailure(status, f"{prefix}{message or 'no response'}")


class BatchRunner:
    """Runs requests through the Batch API of `client`, keeping its state in `folder` (created if needed).

    The judge's `options` say how often to poll (`poll_interval` doubling up to `max_poll_interval`),
    how long to wait (`batch_wait`) and how many requests one batch takes (`batch_max_requests`).
    """

    def __init__(self, client: openai.AsyncOpenAI, folder: str | Path, options: JudgeOptions) -> None:
        self._client = client
        self._folder = Path(folder)
        self._options = options
        self._headers = request_headers(client)
        self._state = _State()
        self.results_path = self._folder / "results.jsonl"  # successful responses, one `{custom_id, body}` each
        self.state_path = self._folder / "state.json"  # input files, their file and batch ids, whether collected

    async def run(self, requests: Mapping[str, dict[str, Any]], *,
                  wait: bool = True) -> dict[str, dict[str, Any] | BatchFailure]:
        """The response body (or failure) of every request, sending only those without a result yet.

        With `wait=False` the requests without a result are only submitted (nothing is polled), and
        only the results already kept are returned: a later `run` of the same requests collects them.
        """
        self._folder.mkdir(parents=True, exist_ok=True)
        self._state = self._read_state()
        found: dict[str, dict[str, Any] | BatchFailure] = {}
        for line in _lines(self.results_path):
            if line.get("custom_id") in requests and isinstance(line.get("body"), dict):
                found[line["custom_id"]] = line["body"]
        todo = set(requests) - found.keys()
        active: list[tuple[_Entry, set[str]]] = []
        for entry in self._state.batches:
            ids = self._ids(entry) & todo if not entry.collected else set()
            if ids:
                active.append((entry, ids))
                todo -= ids
        if found or active:
            _LOG.info("judge batch: %d of %d requests have results already; %d are in batches submitted before",
                      len(found), len(requests), sum(len(ids) for _, ids in active))
        for group in self._split(sorted(todo), requests):
            active.append((self._new_input(group, requests), set(group)))
        if not wait:
            await asyncio.gather(*(self._submit(entry, len(ids)) for entry, ids in active if entry.batch_id is None))
            return found
        for outcomes in await asyncio.gather(*(self._drive(entry, ids) for entry, ids in active)):
            found.update(outcomes)
        return found

    def notes(self) -> dict[str, Any]:
        """What the caller noted in the state file (e.g. what the endpoint rejected), for the next run."""
        if self.state_path.exists():
            self._state = self._read_state()
        return dict(self._state.notes)

    def note(self, key: str, value: Any) -> None:
        """Keep `value` under `key` in the state file."""
        self._folder.mkdir(parents=True, exist_ok=True)
        self._state.notes[key] = value
        self._save_state()

    def _split(self, ids: list[str], requests: Mapping[str, dict[str, Any]]) -> Iterator[list[str]]:
        """`ids` in groups that fit one batch (request count and file size)."""
        group: list[str] = []
        size = 0
        for custom_id in ids:
            line = len(self._line(custom_id, requests[custom_id]))
            if group and (len(group) >= self._options.batch_max_requests or size + line > _MAX_BYTES):
                yield group
                group, size = [], 0
            group.append(custom_id)
            size += line
        if group:
            yield group

    def _line(self, custom_id: str, body: dict[str, Any]) -> bytes:
        line = {"custom_id": custom_id, "method": "POST", "url": _ENDPOINT, "body": body}
        return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"

    def _new_input(self, ids: list[str], requests: Mapping[str, dict[str, Any]]) -> _Entry:
        name = f"input-{len(self._state.batches) + 1:06d}.jsonl"
        (self._folder / name).write_bytes(b"".join(self._line(i, requests[i]) for i in ids))
        entry = _Entry(name)
        self._state.batches.append(entry)
        self._save_state()
        return entry

    def _ids(self, entry: _Entry) -> set[str]:
        return {line["custom_id"] for line in _lines(self._folder / entry.input) if "custom_id" in line}

    async def _drive(self, entry: _Entry, ids: set[str]) -> dict[str, dict[str, Any] | BatchFailure]:
        """Upload, submit, poll and collect one input file, recording each step in the state file."""
        if entry.batch_id is None:
            await self._submit(entry, len(ids))
        assert entry.batch_id is not None  # noqa: S101  (set by _submit)
        batch = await self._poll(entry.batch_id)
        if batch.status not in TERMINAL:
            why = BatchFailure(None, f"batch {batch.id} is still {batch.status} after "
                                     f"{self._options.batch_wait:.0f} s; run again to collect its results")
            return dict.fromkeys(ids, why)
        outcomes = await self._collect(batch, ids)
        entry.collected = True
        self._save_state()
        return outcomes

    async def _submit(self, entry: _Entry, count: int) -> None:
        if entry.file_id is None:
            path = self._folder / entry.input
            uploaded = await self._client.files.create(file=(path.name, path.read_bytes(), "application/jsonl"),
                                                       purpose="batch", extra_headers=self._headers)
            entry.file_id = uploaded.id
            self._save_state()
        batch = await self._made_from(entry.file_id)
        if batch is None:
            batch = await self._client.batches.create(
                input_file_id=entry.file_id, endpoint=_ENDPOINT,
                completion_window=_WINDOW,  # type: ignore[arg-type]
                metadata={"tlmscore_input": entry.input}, extra_headers=self._headers)
            _LOG.info("judge batch: submitted %s (%d requests from %s)", batch.id, count, entry.input)
        entry.batch_id = batch.id
        self._save_state()

    async def _made_from(self, file_id: str) -> Batch | None:
        """A batch already created from `file_id` (a stop came between creating it and saving its id)."""
        seen = 0
        async for batch in self._client.batches.list(limit=100, extra_headers=self._headers):
            if batch.input_file_id == file_id:
                return batch
            seen += 1
            if seen >= _LIST_SCAN:
                break
        return None

    async def _poll(self, batch_id: str) -> Batch:
        """The batch once it is finished, or as it is when the wait is over; the interval doubles up to its cap."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._options.batch_wait
        interval = self._options.poll_interval
        while True:
            batch = await self._client.batches.retrieve(batch_id, extra_headers=self._headers)
            left = deadline - loop.time()
            if batch.status in TERMINAL or left <= 0:
                return batch
            counts = batch.request_counts
            _LOG.debug("judge batch: %s %s (%s)", batch_id, batch.status, counts)
            await asyncio.sleep(min(interval, left))
            interval = min(interval * 2, self._options.max_poll_interval)

    async def _collect(self, batch: Batch, ids: set[str]) -> dict[str, dict[str, Any] | BatchFailure]:
        """Outcomes of `ids` from the batch's output and error files; successes are appended to the results."""
        outcomes: dict[str, dict[str, Any] | BatchFailure] = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                content = await self._client.files.content(file_id, extra_headers=self._headers)
                for parsed in filter(None, map(_failure_of, _objects(content.text.splitlines()))):
                    if parsed[0] in ids and not isinstance(outcomes.get(parsed[0]), dict):
                        outcomes[parsed[0]] = parsed[1]
        self.remember((i, o) for i, o in outcomes.items() if not isinstance(o, BatchFailure))
        errors = "; ".join(e.message or e.code or "" for e in (batch.errors.data or [])) if batch.errors else ""
        missing = BatchFailure(None, f"batch {batch.id} {batch.status} without a result for this request"
                                     + (f": {errors}" if errors else ""))
        return {i: outcomes.get(i, missing) for i in ids}

    def remember(self, results: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """Keep response bodies under their ids (a caller's too, e.g. a request sent again in another form)."""
        text = "".join(json.dumps({"custom_id": i, "body": b}, ensure_ascii=False) + "\n" for i, b in results)
        if text:
            with self.results_path.open("a", encoding="utf-8") as handle:
                handle.write(text)

    def _read_state(self) -> _State:
        if not self.state_path.exists():
            return _State()
        problem = f"not a {STATE_FORMAT} file"
        try:
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
            if data.get("format") == STATE_FORMAT:
                return _State([_Entry(**entry) for entry in data["batches"]], dict(data.get("notes") or {}))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            problem = str(exc)
        raise ScorerError(f"{self.state_path}: unreadable batch state ({problem}); remove the folder to start over")

    def _save_state(self) -> None:
        """Write the state file whole (a temporary file renamed over it), so a stop never leaves half of one."""
        data = {"format": STATE_FORMAT, "batches": [asdict(e) for e in self._state.batches],
                "notes": self._state.notes}
        temporary = self.state_path.with_suffix(".tmp")
        temporary.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        temporary.replace(self.state_path)
