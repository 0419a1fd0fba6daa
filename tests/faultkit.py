"""A loopback HTTP/1.1 server that misbehaves on purpose, for the fault tests of the judge gateway and
the http target. Each request gets what `respond(request)` answers (after any scripted answers, served
first in order): a proper JSON reply, a malformed JSON envelope, an HTML page with status 200, bytes that
are not UTF-8, or a connection reset in the middle of the body (the headers promise the whole body, half
of it is sent, then the socket is closed with an RST). It keeps every request and the most requests it
was handling at once (`max_in_flight`). Also a service in the http target's default response shape
(`service_body`, `service_config`) for the tests that capture from it.

    with FaultServer(lambda request: json_answer({"answer": "a"})) as server:
        server.script(html_page(), reset_mid_body({"answer": "a"}))
        httpx.post(server.url("/query"), json={...})
"""

from __future__ import annotations

import collections
import json
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from raglake.schemas import GoldenCase


@dataclass(frozen=True)
class Answer:
    """What the server sends back for one request."""

    body: bytes = b"{}"
    status: int = 200
    content_type: str = "application/json"
    cut_at: int | None = None  # send the headers and this many bytes of the body, then reset the connection
    delay_s: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()  # more response headers (Location, Content-Encoding, ...)
    drip_s: float = 0.0  # send the body one byte at a time, this long apart (a slow-dripping service)
    repeat: int = 1  # send the body this many times over, as one body (a large one, without holding it)


def json_answer(payload: Any, **kw: Any) -> Answer:
    return Answer(json.dumps(payload).encode(), **kw)


def malformed(payload: Any, **kw: Any) -> Answer:
    """A JSON envelope cut in half (a complete HTTP message: the JSON itself is broken)."""
    text = json.dumps(payload).encode()
    return Answer(text[: len(text) // 2], **kw)


def html_page(content_type: str = "text/html; charset=utf-8", **kw: Any) -> Answer:
    """A proxy's error page, with status 200."""
    page = b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>"
    return Answer(page, content_type=content_type, **kw)


def not_utf8(**kw: Any) -> Answer:
    return Answer(b'{"answer": "caf\xe9 \xff\xfe"}', **kw)


def too_deep(depth: int = 100_000, **kw: Any) -> Answer:
    """Valid JSON nested deeper than a recursive parser can go."""
    return Answer(b"[" * depth + b"]" * depth, **kw)


def reset_mid_body(payload: Any, **kw: Any) -> Answer:
    body = json.dumps(payload).encode()
    return Answer(body, cut_at=len(body) // 2, **kw)


# ---- a service to capture from: what it answers, and an http target config pointed at it ----------


def service_body(case_id: str) -> dict[str, Any]:
    """A good answer in the default response mapping's shape."""
    return {
        "answer": f"answer to {case_id}",
        "abstained": False,
        "chunks": [{"rank": 1, "rel_path": "notes/a.md", "heading_path": "A", "text": "some text", "score": 0.9}],
    }


def service_config(folder: Path, port: int, **changes: Any) -> Path:
    """An http target config asking 127.0.0.1:`port`/query with the question and the case id."""
    config = {
        "name": "faulty",
        "url": f"http://127.0.0.1:{port}/query",
        "body": {"question": "{question}", "case_id": "{case_id}"},
        "concurrency": 4,
        "retries": 1,
        "backoff_s": 0.01,
        "timeout_s": 10,
        **changes,
    }
    path = folder / "service.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def golden_cases(ids: list[str] | tuple[str, ...]) -> list[GoldenCase]:
    return [GoldenCase(id=cid, question=f"What about {cid}?") for cid in ids]


# ---- the server ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() on arrival

    def json(self) -> Any:
        return json.loads(self.body or b"null")


class FaultServer:
    """The server, on a free 127.0.0.1 port, one thread per connection (`Connection: close` on every reply)."""

    def __init__(self, respond: Callable[[Request], Answer]):
        self.respond = respond
        self.requests: list[Request] = []
        self.max_in_flight = 0
        self.sent: list[int] = []  # body bytes sent per reply, in order (fewer than promised: the client hung up)
        self._in_flight = 0
        self._queue: collections.deque[Answer] = collections.deque()
        self._lock = threading.Lock()
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), self._handler(), bind_and_activate=False)
        self._server.daemon_threads = True
        self._server.allow_reuse_address = True
        self._server.request_queue_size = 256
        self._server.server_bind()
        self._server.server_activate()
        self.port = self._server.server_address[1]
        self._thread: threading.Thread | None = None

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def count(self) -> int:
        return len(self.requests)

    def script(self, *answers: Answer) -> FaultServer:
        with self._lock:
            self._queue.extend(answers)
        return self

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.max_in_flight = 0

    def _answer(self, request: Request) -> Answer:
        with self._lock:
            self.requests.append(request)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            scripted = self._queue.popleft() if self._queue else None
        return scripted or self.respond(request)

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _handler(self) -> type[socketserver.StreamRequestHandler]:
        server = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                request = _read_request(self.rfile)
                if request is None:
                    return
                try:
                    answer = server._answer(request)
                    if answer.delay_s:
                        time.sleep(answer.delay_s)
                finally:
                    # counted out before the reply leaves: a client may receive it and send its next request
                    # before this thread runs again, and that request must not look concurrent with this one
                    server._done()
                sent = _write(self.connection, answer)
                with server._lock:
                    server.sent.append(sent)

        return Handler

    def wait_sent(self, n: int = 1, timeout_s: float = 10.0) -> list[int]:
        """`sent` once n replies are recorded: a client that hung up moves on before the server's thread has
        finished writing (and recording) its reply."""
        deadline = time.monotonic() + timeout_s
        while len(self.sent) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        return list(self.sent)

    def start(self) -> FaultServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fault-server-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _read_request(rfile: Any) -> Request | None:
    line = rfile.readline(65536).decode("latin-1").strip()
    if not line:
        return None
    method, target, _ = line.split(" ", 2)
    headers: dict[str, str] = {}
    while raw := rfile.readline(65536).decode("latin-1").strip():
        name, _, value = raw.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = rfile.read(int(headers.get("content-length", "0") or 0))
    return Request(method, target, headers, body, time.monotonic())


def _write(connection: socket.socket, answer: Answer) -> int:
    """Send the answer; the number of body bytes sent."""
    reason = {200: "OK", 500: "Internal Server Error", 503: "Service Unavailable"}.get(answer.status, "Status")
    extra = "".join(f"{name}: {value}\r\n" for name, value in answer.headers)
    head = (
        f"HTTP/1.1 {answer.status} {reason}\r\nContent-Type: {answer.content_type}\r\n"
        f"Content-Length: {len(answer.body) * answer.repeat}\r\n{extra}Connection: close\r\n\r\n"
    ).encode("latin-1")
    if answer.drip_s:
        return _drip(connection, head, answer.body, answer.drip_s)
    if answer.repeat > 1:
        return _repeat(connection, head, answer.body, answer.repeat)
    if answer.cut_at is None:
        connection.sendall(head + answer.body)
        return len(answer.body)
    connection.sendall(head + answer.body[: answer.cut_at])
    time.sleep(0.05)  # let the partial body reach the client before the reset
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close() sends an RST
    connection.close()
    return answer.cut_at


def _drip(connection: socket.socket, head: bytes, body: bytes, every_s: float) -> int:
    """The headers at once, then the body a byte at a time until it is sent or the client hangs up."""
    sent = 0
    try:
        connection.sendall(head)
        for i in range(len(body)):
            time.sleep(every_s)
            connection.sendall(body[i : i + 1])
            sent += 1
    except OSError:  # the client gave up: what a deadline is for
        pass
    return sent


def _repeat(connection: socket.socket, head: bytes, body: bytes, times: int) -> int:
    """The body `times` over, until it is sent or the client hangs up (a cap is for that)."""
    sent = 0
    try:
        connection.sendall(head)
        for _ in range(times):
            connection.sendall(body)
            sent += len(body)
    except OSError:
        pass
    return sent
