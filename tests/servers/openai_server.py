"""A fake OpenAI API on 127.0.0.1 that answers with recorded responses, for the source tests.

`POST /v1/responses` and `POST /v1/chat/completions` answer with the recorded response named by
the request's `model` (a file stem of the responses folder given); `GET /v1/responses/{id}` and
`GET /v1/responses/{id}/input_items` serve stored responses and their input items (paginated by
`after` and `limit`, at most `page_size` items a page), with a 404 for an id never stored and a
429 with `Retry-After` once for the ids listed in `throttle`.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.servers.judge_server import JsonHandler, LoopbackServer


class OpenAIServer(LoopbackServer):
    """The server; `url` is the API root to give the `openai` client as `base_url`."""

    def __init__(self, responses: Path, *, stored: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]
                 | None = None, throttle: set[str] | None = None, page_size: int = 2) -> None:
        self.responses = responses
        self.page_size = page_size
        self.stored = stored or {}
        self.throttle = set(throttle or ())
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        super().__init__(self._handler())

    def answer(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The recorded response named by the request's model, or None."""
        path = self.responses / f"{body.get('model')}.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def _get(self, path: str, query: dict[str, list[str]]) -> tuple[int, Any, dict[str, str]]:
        parts = path.strip("/").split("/")  # v1 responses ID [input_items]
        if len(parts) < 3 or parts[:2] != ["v1", "responses"]:
            return 404, {"error": {"message": "not found"}}, {}
        rid = parts[2]
        with self._lock:
            if rid in self.throttle:
                self.throttle.discard(rid)
                return 429, {"error": {"message": "rate limited", "type": "rate_limit"}}, {"Retry-After": "0"}
        if rid not in self.stored:
            message = f"Response with id '{rid}' not found."
            return 404, {"error": {"message": message, "type": "invalid_request_error"}}, {}
        response, items = self.stored[rid]
        if len(parts) == 3:
            return 200, response, {}
        after = (query.get("after") or [None])[0]
        limit = min(int((query.get("limit") or ["20"])[0]), self.page_size)
        ids = [i.get("id") for i in items]
        start = ids.index(after) + 1 if after in ids else 0
        page = items[start:start + limit]
        return 200, {"object": "list", "data": page, "first_id": page[0].get("id") if page else None,
                     "last_id": page[-1].get("id") if page else None,
                     "has_more": start + limit < len(items)}, {}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:  # noqa: N802  (the name http.server calls)
                url = urllib.parse.urlsplit(self.path)
                with server._lock:
                    server.requests.append(("GET", self.path, {}))
                status, body, headers = server._get(url.path, urllib.parse.parse_qs(url.query))
                self.send_json(status, body, headers)

            def do_POST(self) -> None:  # noqa: N802  (the name http.server calls)
                body = json.loads(self.read_body() or b"{}")
                with server._lock:
                    server.requests.append(("POST", self.path, body))
                answer = server.answer(body)
                if answer is None:
                    self.send_json(404, {"error": {"message": "no such recorded response"}})
                else:
                    self.send_json(200, answer)

        return Handler
