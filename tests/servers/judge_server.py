"""A fake OpenAI-compatible chat server on 127.0.0.1 for the judge tests and benchmark.

`POST /v1/chat/completions` is answered by a `reply(request_json, n)` function (n counts calls from
1), after an optional fixed latency. The server counts requests, keeps the bodies and headers it
saw and the largest number of requests in flight at once (also at `GET /v1/stats`).

`python -m tests.servers.judge_server --latency 0.05` serves confident ratings in a process of its own
(for benchmarks, so the server's threads do not share the client's interpreter) and prints its
base URL on the first line of stdout.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from typing_extensions import Self


@dataclass(frozen=True)
class ChatReply:
    """What the server sends back: a status and a JSON body (or raw text), plus headers."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Reply = Callable[[dict[str, Any], int], ChatReply]
HOLD_LIMIT = 10.0
"""Seconds `ChatServer(hold_first=...)` holds its first requests at most."""


def completion(text: str, top: list[tuple[str, float]] | None = None) -> dict[str, Any]:
    """A chat.completion body with `text` as the message; with `top`, logprobs for its first token."""
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                              "finish_reason": "stop"}
    if top is not None:
        first = {"token": text[:1], "logprob": next((lp for t, lp in top if t == text[:1]), -0.5),
                 "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]}
        choice["logprobs"] = {"content": [first]}
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [choice], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class _Server(ThreadingHTTPServer):
    request_queue_size = 512  # a burst of concurrent connections must not be refused


class LoopbackServer:
    """An HTTP server on a free port of 127.0.0.1, served on a thread while used as a context manager."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = _Server(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL (`http://127.0.0.1:PORT/v1`)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class JsonHandler(BaseHTTPRequestHandler):
    """The request handler base of the loopback fakes: HTTP/1.1, quiet, JSON in and out."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the base class's name)
        """Keep test output quiet."""

    def read_body(self) -> bytes:
        """The request's body, as long as its `Content-Length` says (empty without one)."""
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def send_bytes(self, status: int, data: bytes, content_type: str = "application/json",
                   headers: dict[str, str] | None = None) -> None:
        """Answer with `data`, its length and `headers`."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        """Answer with `value` as JSON."""
        self.send_bytes(status, json.dumps(value).encode(), headers=headers)


class ChatServer(LoopbackServer):
    """The server; use as a context manager. `url` is the API root to give the judge as base_url."""

    def __init__(self, reply: Reply, latency: float = 0.0, hold_first: int = 0) -> None:
        """`hold_first`: the first that many requests are held until all of them are in flight (for at
        most `HOLD_LIMIT` seconds), so a client allowed that many at once is seen to send them."""
        self.reply = reply
        self.latency = latency
        self.hold_first = hold_first
        self._first = threading.Barrier(hold_first) if hold_first else None
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        super().__init__(self._handler())

    def _enter(self, body: dict[str, Any], headers: dict[str, str]) -> int:
        with self._lock:
            self.calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.bodies.append(body)
            self.headers.append(headers)
            return self.calls

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _hold(self, n: int) -> None:
        """Hold request number `n` while the first `hold_first` gather (a broken wait lets them go)."""
        if self._first is not None and n <= self.hold_first:
            with contextlib.suppress(threading.BrokenBarrierError):
                self._first.wait(HOLD_LIMIT)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(JsonHandler):
            wbufsize = 1 << 16  # headers and body leave in one write (no Nagle/delayed-ACK stall)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/stats"):
                    self._send(ChatReply(body={"calls": server.calls, "max_in_flight": server.max_in_flight}))
                else:
                    self._send(ChatReply(404, {"error": "not found"}))

            def do_POST(self) -> None:
                try:
                    body = json.loads(self.read_body() or b"{}")
                except json.JSONDecodeError:
                    body = {}
                n = server._enter(body, {k.lower(): v for k, v in self.headers.items()})
                try:
                    server._hold(n)
                    time.sleep(server.latency)
                    reply = server.reply(body, n) if self.path.endswith("/chat/completions") \
                        else ChatReply(404, {"error": "not found"})
                    self._send(reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a timeout test)
                finally:
                    server._leave()

            def _send(self, reply: ChatReply) -> None:
                data = reply.body if isinstance(reply.body, bytes) else \
                    (reply.body if isinstance(reply.body, str) else json.dumps(reply.body)).encode()
                self.send_bytes(reply.status, data, headers=reply.headers)

        return Handler


def rating_reply(body: dict[str, Any], n: int) -> ChatReply:
    """A confident "A" with token probabilities for ratings; a short answer for sampling requests."""
    if len(body.get("messages") or []) == 1:
        return ChatReply(body=completion("The answer is 4."))
    return ChatReply(body=completion("A", [("A", -0.22), ("B", -2.3), ("C", -2.3)]))


def main() -> None:
    """Serve `rating_reply` until stdin closes or the process is stopped."""
    import argparse
    import sys

    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    with ChatServer(rating_reply, latency=args.latency) as server:
        print(server.url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
