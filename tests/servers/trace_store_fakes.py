"""Local fakes of Langfuse's and LangSmith's documented write endpoints, on loopback, for the real SDKs.

No server of theirs can run here, so each fake answers the requests the SDK makes, as its API
reference describes them, and keeps what it was sent:

- Langfuse: `POST /api/public/scores`, a JSON array of score bodies (what `langfuse` 5's API
  client sends; 202 when all are accepted), basic auth with the public and secret key. Scores
  are stored by `id`, so a body sent again replaces the one stored (Langfuse upserts by id).
- LangSmith: `GET /info` (the client asks the server what it supports), `POST /feedback` (409
  for an id it has already: feedback ids are unique) and `PATCH /feedback/{id}`, with `x-api-key`.

`fail_next` makes the next N write requests answer 500 (to test retries).
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PUBLIC_KEY = "pk-lf-test-public"
SECRET_KEY = "sk-lf-do-not-print-me"  # noqa: S105 -- a made-up key the tests look for in every output
LANGSMITH_KEY = "lsv2_do-not-print-me"


@dataclass
class Store:
    """What a fake was sent: the objects stored by id, every write request's body, and headers."""

    url: str = ""
    stored: dict[str, dict[str, Any]] = field(default_factory=dict)
    writes: list[Any] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    fail_next: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    store: Store

    def _reply(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        return json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"null")

    def _failing(self) -> bool:
        """Count a write; True (and a 500 sent) while `fail_next` lasts."""
        self.store.headers.append(dict(self.headers.items()))
        if self.store.fail_next > 0:
            self.store.fail_next -= 1
            self._reply(500, {"message": "internal error"})
            return True
        return False

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 -- the base class's signature
        return


class _Langfuse(_Handler):
    def do_POST(self) -> None:
        expected = "Basic " + base64.b64encode(f"{PUBLIC_KEY}:{SECRET_KEY}".encode()).decode()
        body = self._body()
        with self.store.lock:
            if self._failing():
                return
            if self.headers.get("Authorization") != expected:
                self._reply(401, {"message": "Invalid credentials"})
                return
            if self.path != "/api/public/scores" or not isinstance(body, list):
                self._reply(404, {"message": f"no such endpoint: {self.path}"})
                return
            self.store.writes.append(body)
            for score in body:
                self.store.stored[score["id"]] = score
        self._reply(202, {"message": "Accepted"})


class _LangSmith(_Handler):
    def _authorised(self) -> bool:
        if self.headers.get("x-api-key") == LANGSMITH_KEY:
            return True
        self._reply(401, {"detail": "Invalid token"})
        return False

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/info":
            self._reply(200, {"version": "0.10.0", "instance_flags": {}})
        else:
            self._reply(404, {"detail": "Not found"})

    def do_POST(self) -> None:
        body = self._body()
        with self.store.lock:
            if self._failing() or not self._authorised():
                return
            if self.path != "/feedback":
                self._reply(404, {"detail": "Not found"})
                return
            self.store.writes.append(body)
            if body["id"] in self.store.stored:
                self._reply(409, {"detail": f"feedback {body['id']} already exists"})
                return
            self.store.stored[body["id"]] = body
        self._reply(200, body)

    def do_PATCH(self) -> None:
        body = self._body()
        with self.store.lock:
            if self._failing() or not self._authorised():
                return
            key = self.path.removeprefix("/feedback/")
            if key not in self.store.stored:
                self._reply(404, {"detail": "Not found"})
                return
            self.store.writes.append({"patch": key, **body})
            self.store.stored[key] |= body
            stored = self.store.stored[key]
        self._reply(200, stored)


def _serve(handler: type[_Handler]) -> Iterator[Store]:
    store = Store()
    bound = type(handler.__name__, (handler,), {"store": store})
    server = ThreadingHTTPServer(("127.0.0.1", 0), bound)
    store.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield store
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def serve_langfuse() -> Iterator[Store]:
    """A fake Langfuse on a free loopback port for as long as the generator is open."""
    yield from _serve(_Langfuse)


def serve_langsmith() -> Iterator[Store]:
    """A fake LangSmith API on a free loopback port for as long as the generator is open."""
    yield from _serve(_LangSmith)
