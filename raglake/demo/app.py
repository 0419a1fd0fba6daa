"""`raglake serve-demo`: the builtin reference RAG as an HTTP service in the shape of seed 001's debug
API, with optional fault injection (errors, latency, timeouts, empty answers, malformed JSON) so the
http target can be tested and demonstrated against something that misbehaves like real services. A
fault rate is an exact share of the questions the demo expects (Faults)."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import Counter
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from raglake.golden import load_golden
from raglake.schemas import GoldenCase
from raglake.targets.builtin import BuiltinTarget

STICKY = ("error", "timeout", "empty", "malformed")  # in this order along the seeded order of the questions


def share(rate: float, n: int) -> int:
    """How many of n questions a rate takes: round(rate × n), halves up, in decimal (0.35 × 10 = 4)."""
    return int((Decimal(repr(rate)) * n).to_integral_value(ROUND_HALF_UP))


@dataclass(frozen=True)
class Faults:
    """What the demo injects. Over the questions it expects (`questions`: the golden set's, read from
    `serve-demo --questions`), a rate is an exact share: round(rate × N) of the N distinct questions (halves
    up) fail that way on every attempt, so retries cannot hide them, and round(flaky_rate × N) of them get
    a 503 on their first attempt only; which ones, `seed` decides. A question it does not expect gets each
    fault with its rate as a probability (a seeded draw per question, as sticky)."""

    error_rate: float = 0.0  # HTTP 500
    timeout_rate: float = 0.0  # the response takes `hang_s` (longer than a client's timeout)
    empty_rate: float = 0.0  # HTTP 200 with an empty answer
    malformed_rate: float = 0.0  # HTTP 200 with a body that is not JSON
    flaky_rate: float = 0.0  # HTTP 503 with Retry-After on the first attempt only
    latency_ms: float = 0.0  # added to every response
    hang_s: float = 60.0
    seed: int = 0
    questions: tuple[str, ...] = field(default=(), repr=False)
    _fault: dict[str, str | None] = field(init=False, repr=False, compare=False)
    _flaky: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        shares = (self.error_rate, self.timeout_rate, self.empty_rate, self.malformed_rate)
        if any(not 0 <= s <= 1 for s in (*shares, self.flaky_rate)) or sum(shares) > 1:
            raise ValueError(f"fault rates must lie in [0, 1] and the sticky ones sum to at most 1: {self}")
        distinct = list(dict.fromkeys(self.questions))
        counts = [share(rate, len(distinct)) for rate in shares]
        if sum(counts) > len(distinct):  # 0.5 and 0.5 of 3 questions: 2 + 2
            raise ValueError(f"the fault rates ask for {sum(counts)} of the {len(distinct)} questions")
        ordered = sorted(distinct, key=self.draw)
        fault: dict[str, str | None] = dict.fromkeys(distinct)
        edges = [sum(counts[:i]) for i in range(len(counts) + 1)]
        for name, lo, hi in zip(STICKY, edges, edges[1:]):
            fault.update(dict.fromkeys(ordered[lo:hi], name))
        flaky = sorted(distinct, key=lambda q: self.draw(q, "flaky"))[: share(self.flaky_rate, len(distinct))]
        object.__setattr__(self, "_fault", fault)
        object.__setattr__(self, "_flaky", frozenset(flaky))

    def draw(self, question: str, salt: str = "") -> float:
        digest = hashlib.sha256(f"{self.seed}:{salt}:{question}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def fault_for(self, question: str) -> str | None:
        """The fault every attempt at `question` gets (None: answered)."""
        if question in self._fault:
            return self._fault[question]
        u, edge = self.draw(question), 0.0
        for name, rate in zip(STICKY, (self.error_rate, self.timeout_rate, self.empty_rate, self.malformed_rate)):
            edge += rate
            if u < edge:
                return name
        return None

    def is_flaky(self, question: str) -> bool:
        """Whether the first attempt at `question` gets a 503."""
        if question in self._fault:
            return question in self._flaky
        return self.draw(question, "flaky") < self.flaky_rate

    def summary(self, source: str) -> str | None:
        """What is injected, in words (None when nothing is)."""
        rates = (self.error_rate, self.timeout_rate, self.empty_rate, self.malformed_rate, self.flaky_rate)
        if not any(rates):
            return None
        if not self._fault:
            words = ("HTTP 500", f"hang {self.hang_s:g} s", "an empty answer", "broken JSON")
            parts = [f"{w} {r:.0%}" for w, r in zip(words, rates) if r]
            flaky = f", a 503 on the first attempt {self.flaky_rate:.0%}" if self.flaky_rate else ""
            return f"faults (no --questions: each question by chance, seed {self.seed}): {', '.join(parts)}{flaky}"
        n = len(self._fault)
        got = Counter(self._fault.values())
        words = ("get HTTP 500", f"hang {self.hang_s:g} s", "answer empty", "send broken JSON")
        parts = [f"{got[k]} {w}" for k, w in zip(STICKY, words) if got[k]]
        flaky = f"; {len(self._flaky)} get a 503 on their first attempt only" if self._flaky else ""
        return (
            f"faults over the {n} questions of {source} (seed {self.seed}), on every attempt: {', '.join(parts)}"
            f"{flaky}; any other question gets each fault with its rate as a probability"
        )


def questions_of(path: str) -> tuple[str, ...]:
    """The questions of a golden set, in file order (what `serve-demo --questions` reads)."""
    return tuple(case.question for case in load_golden(path).cases)


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
        if attempt == 1 and faults.is_flaky(q.question):
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
