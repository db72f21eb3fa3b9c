"""A fake of OpenAI's Files and Batches endpoints on 127.0.0.1, for the judge's Batch API mode.

- `POST /v1/files` (multipart, as the SDK uploads) stores a file; `GET /v1/files/{id}/content`
  serves one back.
- `POST /v1/batches` creates a batch from an uploaded input file; `GET /v1/batches/{id}` reports
  it: `validating`, then `in_progress`, then, once `release` is set and `polls_to_finish`
  retrievals have passed, `completed` with an output file (and an error file for lines whose
  reply is not 200), each line answered by `reply(body, n)` as the chat server does;
  `GET /v1/batches` lists batches newest first, in pages (`limit`, `after`).

The server counts every `custom_id` it was asked to run, over all batches (`submitted`), so a test
can check that a resumed run submits nothing twice. State lives in the server, so a client process
can be killed and started again against it.
"""

from __future__ import annotations

import email.parser
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.servers.judge_server import ChatReply, JsonHandler, LoopbackServer, Reply, rating_reply


class BatchServer(LoopbackServer):
    """The fake; use as a context manager. `url` is the API root to give the client as base_url."""

    def __init__(self, reply: Reply = rating_reply, *, polls_to_finish: int = 1,
                 fail_status: str | None = None) -> None:
        self.reply = reply
        self.polls_to_finish = polls_to_finish
        self.fail_status = fail_status
        self.release = threading.Event()
        self.release.set()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.submitted: Counter[str] = Counter()
        self.requests: list[tuple[str, str]] = []
        self._polls: Counter[str] = Counter()
        self._calls = 0
        self._lock = threading.Lock()
        super().__init__(self._handler())

    # ------------------------------------------------------------ the endpoints

    def upload(self, content_type: str, data: bytes) -> dict[str, Any]:
        message = email.parser.BytesParser().parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + data)
        fields = {part.get_param("name", header="content-disposition"): part for part in message.get_payload()}
        payload = fields["file"].get_payload(decode=True)
        with self._lock:
            file_id = f"file-{len(self.files) + 1:04d}"
            self.files[file_id] = payload
        return self._file(file_id, "input.jsonl", "batch")

    def _file(self, file_id: str, name: str, purpose: str) -> dict[str, Any]:
        return {"id": file_id, "object": "file", "bytes": len(self.files[file_id]), "created_at": int(time.time()),
                "filename": name, "purpose": purpose, "status": "processed"}

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            lines = [json.loads(line) for line in self.files[body["input_file_id"]].splitlines() if line.strip()]
            batch_id = f"batch_{len(self.batches) + 1:04d}"
            self.submitted.update(line["custom_id"] for line in lines)
            batch = {"id": batch_id, "object": "batch", "endpoint": body["endpoint"], "errors": None,
                     "input_file_id": body["input_file_id"], "completion_window": body["completion_window"],
                     "status": "validating", "output_file_id": None, "error_file_id": None,
                     "created_at": int(time.time()), "metadata": body.get("metadata"),
                     "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
            self.batches[batch_id] = batch
            return batch

    def retrieve(self, batch_id: str) -> dict[str, Any]:
        with self._lock:
            batch = self.batches[batch_id]
            self._polls[batch_id] += 1
            if batch["status"] == "validating":
                batch["status"] = "in_progress"
            elif batch["status"] == "in_progress" and self.release.is_set() \
                    and self._polls[batch_id] > self.polls_to_finish:
                self._finish(batch)
            return dict(batch)

    def _finish(self, batch: dict[str, Any]) -> None:
        if self.fail_status is not None:
            batch["status"] = self.fail_status
            batch["errors"] = {"object": "list", "data": [{"code": "x", "message": f"batch {self.fail_status}"}]}
            return
        out, errors = [], []
        for line in self.files[batch["input_file_id"]].splitlines():
            request = json.loads(line)
            self._calls += 1
            reply: ChatReply = self.reply(request["body"], self._calls)
            result = {"id": f"batch_req_{self._calls}", "custom_id": request["custom_id"],
                      "response": {"status_code": reply.status, "request_id": f"req_{self._calls}",
                                   "body": reply.body}, "error": None}
            (out if reply.status == 200 else errors).append(json.dumps(result))
        for kind, lines in (("output_file_id", out), ("error_file_id", errors)):
            if lines:
                file_id = f"file-{len(self.files) + 1:04d}"
                self.files[file_id] = ("\n".join(lines) + "\n").encode()
                batch[kind] = file_id
        batch["status"] = "completed"
        batch["request_counts"] = {"total": len(out) + len(errors), "completed": len(out), "failed": len(errors)}

    def listing(self, query: dict[str, list[str]]) -> dict[str, Any]:
        limit = int(query.get("limit", ["20"])[0])
        with self._lock:
            newest = sorted(self.batches.values(), key=lambda b: b["id"], reverse=True)
        after = query.get("after", [None])[0]
        if after is not None:
            newest = newest[[b["id"] for b in newest].index(after) + 1:]
        page = newest[:limit]
        return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None, "has_more": len(newest) > limit}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:  # noqa: N802  (the name http.server calls)
                parts = urlsplit(self.path)
                path = parts.path.rstrip("/")
                server.requests.append(("GET", path))
                if path.startswith("/v1/files/") and path.endswith("/content"):
                    file_id = path.split("/")[3]
                    self.send_bytes(200, server.files[file_id], "application/octet-stream")
                elif path == "/v1/batches":
                    self.send_json(200, server.listing(parse_qs(parts.query)))
                elif path.startswith("/v1/batches/"):
                    self.send_json(200, server.retrieve(path.rsplit("/", 1)[1]))
                else:
                    self.send_json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:  # noqa: N802  (the name http.server calls)
                data = self.read_body()
                path = urlsplit(self.path).path.rstrip("/")
                server.requests.append(("POST", path))
                if path == "/v1/files":
                    self.send_json(200, server.upload(self.headers["Content-Type"], data))
                elif path == "/v1/batches":
                    self.send_json(200, server.create(json.loads(data)))
                else:
                    self.send_json(404, {"error": {"message": "not found"}})

        return Handler


def main() -> None:
    """Serve the fake until stdin closes; print its base URL on the first line of stdout."""
    import sys

    with BatchServer() as server:
        print(server.url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
