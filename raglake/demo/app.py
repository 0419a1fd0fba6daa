"""`raglake serve-demo`: the builtin reference RAG as an HTTP service in the shape of seed 001's debug
API, with optional fault injection (errors, latency, timeouts, empty answers, malformed JSON) so the
http target can be tested and demonstrated against something that misbehaves like real services."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from raglake.schemas import GoldenCase
from raglake.targets.builtin import BuiltinTarget


@dataclass(frozen=True)
class Faults:
    """Shares of questions that always fail a given way (sticky per question, so retries cannot hide
    them and the injected rates are exact), plus transient failures and added latency."""

    error_rate: float = 0.0  # HTTP 500
    timeout_rate: float = 0.0  # the response takes `hang_s` (longer than a client's timeout)
    empty_rate: float = 0.0  # HTTP 200 with an empty answer
    malformed_rate: float = 0.0  # HTTP 200 with a body that is not JSON
    flaky_rate: float = 0.0  # HTTP 503 with Retry-After on the first attempt only
    latency_ms: float = 0.0  # added to every response
    hang_s: float = 60.0
    seed: int = 0

    def __post_init__(self) -> None:
        shares = (self.error_rate, self.timeout_rate, self.empty_rate, self.malformed_rate)
        if any(not 0 <= s <= 1 for s in (*shares, self.flaky_rate)) or sum(shares) > 1:
            raise ValueError(f"fault rates must lie in [0, 1] and the sticky ones sum to at most 1: {self}")

    def draw(self, question: str, salt: str = "") -> float:
        digest = hashlib.sha256(f"{self.seed}:{salt}:{question}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def fault_for(self, question: str) -> str | None:
        u, edge = self.draw(question), 0.0
        for name, share in (
            ("error", self.error_rate),
            ("timeout", self.timeout_rate),
            ("empty", self.empty_rate),
            ("malformed", self.malformed_rate),
        ):
            edge += share
            if u < edge:
                return name
        return None


class Query(BaseModel):
    question: str
    case_id: str | None = None
    vault: str | None = None
    top_k: int | None = None


def debug_response(capture: Any) -> dict[str, Any]:
    """A capture in the debug API's shape."""
    lat = capture.latency_ms
    return {
        "answer": capture.answer,
        "abstained": capture.abstained,
        "references": [
            {"rel_path": r.rel_path, "heading_path": " > ".join(r.heading_path)} for r in capture.references
        ],
        "chunks": [
            {
                "rank": c.rank,
                "rel_path": c.rel_path,
                "heading_path": " > ".join(c.heading_path),
                "text": c.text,
                "score": c.score,
            }
            for c in capture.retrieved
        ],
        "debug": {
            "folder_mode": capture.folder_mode,
            "selected_folders": capture.selected_folders,
            "method": capture.method,
        },
        "timings": {
            "folder_selection_ms": lat.folder_selection,
            "retrieval_ms": lat.retrieval,
            "generation_ms": lat.generation,
            "total_ms": lat.total,
        },
    }


def create_app(target: BuiltinTarget, faults: Faults = Faults()) -> FastAPI:
    app = FastAPI(title="raglake demo RAG", version="1")
    seen: Counter[str] = Counter()
    lock = threading.Lock()
    app.state.requests = seen  # tests read how often each question was asked

    def answer(question: str, case_id: str) -> dict[str, Any]:
        case = GoldenCase(id=case_id, question=question)
        return debug_response(target.capture([case])[0])

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/debug/index")
    async def index() -> dict[str, Any]:
        return (await asyncio.to_thread(target.manifest)).to_json()

    @app.post("/debug/query")
    async def query(q: Query) -> Response:
        with lock:
            seen[q.question] += 1
            attempt = seen[q.question]
        if faults.latency_ms:
            await asyncio.sleep(faults.latency_ms / 1000)
        if faults.flaky_rate and attempt == 1 and faults.draw(q.question, "flaky") < faults.flaky_rate:
            return JSONResponse({"detail": "warming up"}, status_code=503, headers={"Retry-After": "0"})
        fault = faults.fault_for(q.question)
        if fault == "error":
            return JSONResponse({"detail": "injected failure"}, status_code=500)
        if fault == "timeout":
            await asyncio.sleep(faults.hang_s)
        if fault == "malformed":
            return Response('{"answer": "truncated', media_type="application/json")
        body = await asyncio.to_thread(answer, q.question, q.case_id or "demo")
        if fault == "empty":
            body["answer"], body["abstained"] = "", False
        return JSONResponse(body)

    return app
