"""What the Case and Judge call pages show: the case as each run saw it (sql/case_detail.sql), the chunks
retrieved with their gold matches (case_chunks.sql), every metric's value, status, reason and version
(case_metrics.sql), the judge calls behind them (case_judge_calls.sql, judge_call.sql) and the per-sentence
hallucination scores (case_sentences.sql)."""

from __future__ import annotations

import json
import re
from typing import Any

from raglake.analysis import LakeQueries
from raglake.errors import ConfigError
from raglake.lake.query import run_query


class NotFound(ConfigError):
    """A page asked for something the lake does not hold (a case of a run, a judge call): HTTP 404."""


CALL_KEY = re.compile(r"[0-9a-f]{64}")  # the ledger's key: sha256 hex
# the parts of a judge's parsed output that list what it found: claims, statements, verdicts, facts
CLAIM_KEYS = re.compile(r"claims|statements|verdicts|facts|attributions|questions|chunks", re.IGNORECASE)


def case_page(q: LakeQueries, run_id: str, case_id: str, against: str | None = None) -> dict[str, Any]:
    """One case of one run (and, with `against`, of that run too: both answers side by side)."""
    run_ids = [run_id] + ([against] if against and against != run_id else [])
    seen = {r["run_id"]: r for r in run_query(q.con, "case_detail", run_ids=run_ids, case_id=case_id).to_pylist()}
    if run_id not in seen:
        raise NotFound(f"run {run_id} has no case {case_id!r}")
    for r in seen.values():
        r["metadata"] = _json(r["metadata"])
    sides = [seen[r] for r in run_ids if r in seen]
    for side in sides:
        side["chunks"] = run_query(q.con, "case_chunks", run_id=side["run_id"], case_id=case_id).to_pylist()
    return {
        "case": seen[run_id],
        "sides": sides,
        "against": against if against in seen else None,
        "metrics": run_query(q.con, "case_metrics", run_id=run_id, case_id=case_id).to_pylist(),
        "calls": run_query(q.con, "case_judge_calls", run_id=run_id, case_id=case_id).to_pylist(),
        "sentences": run_query(q.con, "case_sentences", run_id=run_id, case_id=case_id).to_pylist(),
        "gold": _gold(seen[run_id], sides),
    }


def _gold(case: dict[str, Any], sides: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The case's gold supports, each with the best rank at which each side retrieved it in its top k."""
    out = []
    for i, support in enumerate(case["gold_support_list"] or []):
        ranks = {}
        for side in sides:
            hits = [c["rank"] for c in side["chunks"] if i in c["matched_supports"] and c["in_top_k"]]
            ranks[side["run_id"]] = min(hits) if hits else None
        out.append({**support, "index": i, "ranks": ranks})
    return out


def _json(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def messages(request: str | None) -> list[dict[str, str]]:
    """The prompt a call sent: its request's messages (role, content); the raw request when it holds none."""
    body = _json(request)
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        return [
            {"role": str(m.get("role", "")), "content": str(m.get("content", ""))}
            for m in body["messages"]
            if isinstance(m, dict)
        ]
    return [{"role": "request", "content": request}] if request else []


def reply_text(response: str | None) -> str | None:
    """What the judge answered: the first choice's message content of a chat completion, else the raw body."""
    body = _json(response)
    if isinstance(body, dict):
        choices = body.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            message = choices[0].get("message")
            if isinstance(message, dict) and message.get("content") is not None:
                return str(message["content"])
    return response


def claims(output: Any) -> dict[str, Any]:
    """The lists of a parsed output that hold what the judge found (claims, statements, verdicts, …)."""
    if not isinstance(output, dict):
        return {}
    return {k: v for k, v in output.items() if CLAIM_KEYS.search(k) and isinstance(v, list)}


def call_page(q: LakeQueries, call_key: str) -> dict[str, Any]:
    """One judge call (its ledger key): the newest stored row in full, and how many rows hold the key."""
    if not CALL_KEY.fullmatch(call_key):
        raise NotFound(f"{call_key[:80]!r} is not a judge call's key (64 hex digits)")
    rows = run_query(q.con, "judge_call", call_key=call_key).to_pylist()
    if not rows:
        raise NotFound(f"the lake holds no judge call {call_key}")
    call = rows[0]
    output = _json(call["output"])
    return {
        "call": call,
        "n_rows": len(rows),
        "messages": messages(call["request"]),
        "reply": reply_text(call["response"]),
        "output": output,
        "claims": claims(output),
        "reasoning": output.get("reasoning") if isinstance(output, dict) else None,
    }
