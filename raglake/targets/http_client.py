"""Asking a live RAG service: one request per case under the run's concurrency limit, retries
(raglake.retrying: exponential backoff and jitter, honouring Retry-After) on 5xx, 429, connection
errors and timeouts (never on other 4xx), and every outcome, an unexpected exception included,
turned into a capture with a status."""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from pydantic import ValidationError

from raglake import progress
from raglake.errors import unexpected_error
from raglake.httpedge import ResponseTooLarge, capped_client, redirect_message
from raglake.redact import NOTHING, Redactor
from raglake.retrying import Backoff, Failure, retry_after_seconds, retry_async
from raglake.schemas import Capture, GoldenCase
from raglake.targets.http_config import HttpTargetConfig, render_body
from raglake.targets.jsonpath import MISSING, get_path


class MappingError(ValueError):
    """The response is JSON but does not fit the configured mapping."""


class MalformedBody(ValueError):
    """A response body that is not JSON: an HTML page, a cut-off document, bytes that are not UTF-8."""


def json_body(response: httpx.Response, redact: Redactor = NOTHING) -> Any:
    """The parsed body, the request's secrets redacted from it first, or MalformedBody saying why it is not JSON."""
    try:
        content = response.content  # decoded as json.loads decodes bytes (UTF-8, -16 or -32)
        return json.loads(redact(content.decode(json.detect_encoding(content), "surrogatepass")))
    except json.JSONDecodeError as e:
        raise MalformedBody(f"{e.msg} (line {e.lineno} column {e.colno})") from None
    except UnicodeDecodeError as e:
        raise MalformedBody(f"not UTF-8 ({e.reason} at byte {e.start})") from None
    except RecursionError:
        raise MalformedBody("nested too deeply") from None


class SharedLimit:
    """At most `limit` requests in flight across every capture batch of a run. Batches run on threads,
    each in its own event loop, so an asyncio.Semaphore (bound to one loop) cannot be shared: waiters
    queue here in FIFO order whatever their loop, and a release hands the slot to the first of them
    through its own loop."""

    def __init__(self, limit: int):
        self.limit, self._free = limit, limit
        self._waiters: collections.deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = collections.deque()
        self._lock = threading.Lock()

    async def __aenter__(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._free and not self._waiters:
                self._free -= 1
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            with self._lock:
                queued = (loop, waiter) in self._waiters
                if queued:
                    self._waiters.remove((loop, waiter))
            if not queued and waiter.done() and not waiter.cancelled():
                self._release()  # the slot arrived just as we were cancelled: pass it on
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        with self._lock:
            if not self._waiters:
                self._free += 1
                return
            loop, waiter = self._waiters.popleft()
        try:
            loop.call_soon_threadsafe(self._hand_over, waiter)
        except RuntimeError:  # that waiter's loop is closed: the slot goes to the next one
            self._release()

    def _hand_over(self, waiter: asyncio.Future[None]) -> None:
        if waiter.done():  # cancelled while the slot was on its way
            self._release()
        else:
            waiter.set_result(None)


def _get(data: Any, path: str | None, what: str, kinds: tuple[type, ...]) -> Any:
    if path is None:
        return None
    value = get_path(data, path)
    if value is MISSING or value is None:
        return None
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        expected = " or ".join(k.__name__ for k in kinds)
        raise MappingError(f"{what} at {path!r} is a {type(value).__name__}, expected {expected}")
    return value


def map_response(data: Any, config: HttpTargetConfig, case_id: str) -> dict[str, Any]:
    """Capture fields from a parsed response body, through the configured JSON paths."""
    m = config.response
    capture: dict[str, Any] = {"case_id": case_id, "method": config.name}
    capture["answer"] = _get(data, m.answer, "answer", (str,)) or ""
    capture["abstained"] = _get(data, m.abstained, "abstained", (bool,))
    refs = _get(data, m.references, "references", (list,)) or []
    capture["references"] = [
        {
            "rel_path": _get(r, m.reference.rel_path, "reference rel_path", (str,)) or "",
            "heading_path": _get(r, m.reference.heading_path, "reference heading_path", (str, list)),
        }
        for r in refs
    ]
    chunks = _get(data, m.retrieved, "retrieved chunks", (list,)) or []
    capture["retrieved"] = [
        {
            "rank": (_get(c, m.chunk.rank, "chunk rank", (int,)) if m.chunk.rank else None) or i,
            "rel_path": _get(c, m.chunk.rel_path, "chunk rel_path", (str,)) or "",
            "heading_path": _get(c, m.chunk.heading_path, "chunk heading_path", (str, list)),
            "text": _get(c, m.chunk.text, "chunk text", (str,)) or "",
            "score": _get(c, m.chunk.score, "chunk score", (int, float)),
            "chunk_id": _get(c, m.chunk.chunk_id, "chunk id", (str, int)) if m.chunk.chunk_id else None,
        }
        for i, c in enumerate(chunks, start=1)
    ]
    capture["folder_mode"] = _get(data, m.folder_mode, "folder_mode", (str,))
    capture["selected_folders"] = _get(data, m.selected_folders, "selected_folders", (list,)) or []
    capture["latency_ms"] = {
        stage: _get(data, path, f"latency {stage}", (int, float)) for stage, path in m.latency_ms.items()
    }
    if m.cost_usd is not None:
        capture["cost_usd"] = _get(data, m.cost_usd, "cost_usd", (int, float))
    return capture


def _values(case: GoldenCase, k: int) -> dict[str, Any]:
    return {
        "question": case.question,
        "case_id": case.id,
        "category": case.category,
        "difficulty": case.difficulty,
        "vault": case.vault,
        "tags": list(case.tags),
        "k": k,
    }


async def fetch_capture(
    client: httpx.AsyncClient,
    config: HttpTargetConfig,
    headers: dict[str, str],
    case: GoldenCase,
    k: int,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    redact: Redactor | None = None,
) -> Capture:
    """One case's capture. Each attempt, connect to the last byte of the body, runs under `timeout_s`; every
    text kept from the service (its body, an error) has the request's secrets redacted first."""
    redact = redact or Redactor.for_request(headers, config.secret_values())
    body = render_body(config.body, _values(case, k))
    request = {"json": body} if config.method != "GET" else {"params": body if isinstance(body, dict) else {}}
    start = time.perf_counter()
    count = 0

    async def attempt() -> Capture | Failure:
        nonlocal count
        count += 1
        try:
            async with asyncio.timeout(config.timeout_s):
                response = await client.request(
                    config.method, config.url, headers=headers, timeout=config.timeout_s, **request
                )
        except (httpx.TimeoutException, TimeoutError):
            return Failure(f"no response within {config.timeout_s:g} s", True, status="timeout")
        except ResponseTooLarge as e:
            return Failure(str(e), False)
        except httpx.DecodingError as e:
            return Failure(f"the response could not be decoded: {redact.error(str(e))}", False)
        except httpx.TransportError as e:
            return Failure(f"connection error: {type(e).__name__}: {redact.error(str(e))}", True)
        return _capture(response, config, case, start, count, redact)

    outcome, attempts = await retry_async(
        attempt, Backoff(config.retries, config.backoff_s, config.max_backoff_s), sleep=sleep
    )
    if isinstance(outcome, Capture):
        return outcome
    wall = round((time.perf_counter() - start) * 1000, 3)
    return Capture(
        case_id=case.id,
        status=outcome.status,
        error=redact.error(f"{outcome.error} (after {attempts} attempt(s))"),
        method=config.name,
        attempts=attempts,
        latency_ms={"wall": wall},
    )


def _capture(
    response: httpx.Response,
    config: HttpTargetConfig,
    case: GoldenCase,
    start: float,
    attempts: int,
    redact: Redactor = NOTHING,
) -> Capture | Failure:
    """The capture one response maps onto, or why it does not (5xx and 429 may be retried, nothing else)."""
    code = response.status_code
    if code == 429 or code >= 500:
        return Failure(f"HTTP {code}: {redact.error(response.text, 300)}", True, retry_after_seconds(response))
    if code >= 400:
        return Failure(f"HTTP {code}: {redact.error(response.text, 300)}", False)
    if 300 <= code < 400:
        return Failure(redact.error(redirect_message(code, response.headers.get("location"))), False)
    wall = (time.perf_counter() - start) * 1000
    try:
        fields = map_response(json_body(response, redact), config, case.id)
        fields["latency_ms"]["wall"] = round(wall, 3)
        fields["attempts"] = attempts
        return Capture.model_validate(fields)
    except MalformedBody as e:
        return Failure(f"malformed JSON response: {e}", False)
    except (MappingError, ValidationError) as e:
        return Failure(f"response does not map onto a capture: {redact.error(str(e))}", False)


async def capture_all(
    config: HttpTargetConfig,
    cases: list[GoldenCase],
    k: int,
    on_capture: Callable[[GoldenCase, Capture], None] | None = None,
    limit: SharedLimit | None = None,
) -> list[Capture]:
    """Every case once, results in case order; at most `concurrency` in flight under `limit` (the run's,
    shared by its batches) or, without one, in this call."""
    headers = config.resolved_headers()
    redact = Redactor.for_request(headers, config.secret_values())
    limit = limit or SharedLimit(config.concurrency)
    limits = httpx.Limits(max_connections=config.concurrency, max_keepalive_connections=config.concurrency)

    async with capped_client(config.max_response_bytes, limits, redact) as client:

        async def one(case: GoldenCase) -> Capture:
            async with limit:
                try:
                    capture = await fetch_capture(client, config, headers, case, k, redact=redact)
                except Exception as e:  # noqa: BLE001 - one case's surprise is that case's error, never the batch's
                    error = redact.error(unexpected_error(e))
                    capture = Capture(case_id=case.id, status="error", error=error, method=config.name)
            if on_capture is not None:
                on_capture(case, capture)
            progress.advance("captures")
            return capture

        return list(await asyncio.gather(*(one(c) for c in cases)))
