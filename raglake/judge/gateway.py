"""The judge gateway: the one object that makes LLM calls. OpenAI-compatible endpoint, async with a
concurrency limit and request/token rate limits, retries with exponential backoff and jitter on 429,
5xx, connection errors and timeouts (honouring Retry-After), temperature 0 and a seed, structured
output (JSON schema, else JSON mode, else plain) validated against the prompt's schema and as a real
answer (raglake.judge.honesty: no placeholder or echo) with one repair attempt, a reply cut off by
max_tokens retried once with a larger budget, every call in the ledger with what the reply says served
it (`reply_model`, `system_fingerprint`) and its latency, and a budget. Failures are data: a result with
status judge_error / parse_error / skipped."""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from raglake.httpedge import ResponseTooLarge, capped_client, redirect_message
from raglake.judge.budget import Budget, RateLimiter
from raglake.judge.config import JudgeConfig
from raglake.judge.ledger import JudgeLedger, call_key
from raglake.judge.prompts import Prompt
from raglake.metrics.operational import percentile
from raglake.redact import Redactor
from raglake.retrying import Backoff, Failure, retry_after_seconds, retry_async

_FENCED_JSON = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)
# structured-output forms, tried in this order until the server takes one
_CONNECTIONS = {"max_connections": 1000, "max_keepalive_connections": 100}  # the SDK's own defaults
_FORMAT_FALLBACK = {"json_schema": "json_object_schema", "json_object_schema": "json_object", "json_object": "none"}


@dataclass
class JudgeResult:
    status: str  # ok | parse_error | judge_error | skipped
    output: dict[str, Any] | None = None
    reason: str | None = None
    call_key: str | None = None
    model: str | None = None
    prompt_id: str | None = None
    prompt_version: int | None = None
    from_ledger: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class _Attempt:
    text: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    requests: int = 0
    error: str | None = None
    reply_model: str | None = None  # the model the server says answered (the reply's `model`)
    system_fingerprint: str | None = None  # the server's configuration fingerprint, when it gives one


@dataclass
class GatewayStats:
    calls: int = 0  # requests that reached the server (retries included)
    ledger_hits: int = 0
    skipped_budget: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    priced_calls: int = 0  # calls made to a model the price table lists
    unpriced_calls: int = 0  # calls made to a model the price table does not list (costed at 0)
    statuses: dict[str, int] = field(default_factory=dict)
    # judge stage -> {"p50", "p95", "n"} of the calls' latency in ms, once `summarise()` ran: stage
    # `judge:<prompt id>`, or `spot_check:<prompt id>` for the spot-check judge's calls
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._latencies: dict[str, list[float]] = {}  # kept out of the fields: only the summary travels

    def timed(self, stage: str, ms: float) -> None:
        self._latencies.setdefault(stage, []).append(ms)

    def summarise(self) -> GatewayStats:
        """Put the p50 / p95 of every stage's call latencies in `latency_ms` (linear interpolation)."""
        self.latency_ms = {
            stage: {"p50": percentile(v, 50), "p95": percentile(v, 95), "n": float(len(v))}
            for stage, v in sorted(self._latencies.items())
        }
        return self

    def add(self, other: GatewayStats, stage_prefix: str | None = None) -> None:
        """Fold another gateway's figures (the spot-check judge's) into these; its latencies go under
        `stage_prefix` (e.g. spot_check) instead of judge."""
        for name in (
            "calls",
            "ledger_hits",
            "skipped_budget",
            "retries",
            "prompt_tokens",
            "completion_tokens",
            "cost_usd",
            "priced_calls",
            "unpriced_calls",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for status, n in other.statuses.items():
            self.statuses[status] = self.statuses.get(status, 0) + n
        for stage, values in other._latencies.items():
            renamed = f"{stage_prefix}:{stage.split(':', 1)[1]}" if stage_prefix else stage
            self._latencies.setdefault(renamed, []).extend(values)


def parse_json(text: str | None) -> tuple[Any, str | None]:
    """(object, None) or (None, why): the reply itself, a fenced block, or the outermost {...}."""
    if text is None or not text.strip():
        return None, "empty reply"
    candidates = [text.strip(), *(m.strip() for m in _FENCED_JSON.findall(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    error = "no JSON object found"
    for candidate in candidates:
        try:  # strict=False: a raw newline inside a string is accepted (small models emit them)
            return json.loads(candidate, strict=False), None
        except json.JSONDecodeError as e:
            error = f"invalid JSON: {e.msg} (line {e.lineno} column {e.colno})"
        except RecursionError:
            error = "invalid JSON: nested too deeply"
    return None, error


REPAIR_REQUEST = "Reply with the corrected JSON object only."


class JudgeGateway:
    def __init__(self, config: JudgeConfig, ledger: JudgeLedger, budget: Budget | None = None):
        import httpx2  # what the openai SDK is built on (through legacy httpx it spent twice the CPU per call)
        from openai import AsyncOpenAI

        self.config, self.ledger = config, ledger
        self.budget = budget or Budget(config.max_calls, config.max_cost_usd)
        # the key (and any `Bearer …`) out of every reply, error and request this gateway keeps or returns
        self.redact = Redactor.for_request({}, [config.secret()])
        self.client = AsyncOpenAI(
            base_url=config.base_url,
            api_key=config.api_key,
            max_retries=0,
            timeout=config.timeout_s,
            # bodies capped after decompression and redacted, redirects not followed (the SDK's client follows them)
            http_client=capped_client(config.max_response_bytes, httpx2.Limits(**_CONNECTIONS), self.redact, httpx2),
        )
        self._decoding_error = httpx2.DecodingError
        self.limiter = RateLimiter(config.requests_per_minute, config.tokens_per_minute)
        self._slots = asyncio.Semaphore(config.concurrency)
        self.format_mode = "json_schema"  # falls back to json_object, then none, if the server refuses
        self.stats = GatewayStats()

    def _params(self, prompt: Prompt) -> dict[str, Any]:
        return {"temperature": 0, "seed": self.config.seed, "max_tokens": prompt.max_tokens}

    async def call(self, prompt: Prompt, values: dict[str, Any]) -> JudgeResult:
        messages = prompt.render(values)
        params = self._params(prompt)
        key = call_key(self.config.model, prompt.key, prompt.version, params, messages)
        meta = dict(call_key=key, model=self.config.model, prompt_id=prompt.key, prompt_version=prompt.version)
        hit = self.ledger.lookup(key)
        if hit is not None:  # never paid twice: the stored reply is parsed again
            self.stats.ledger_hits += 1
            return self._judge(prompt, hit.response, meta, from_ledger=True)
        if self.budget.exhausted():
            self.stats.skipped_budget += 1
            return JudgeResult("skipped", reason="budget", **meta)
        return await self._call_server(prompt, messages, params, meta)

    def _judge(
        self, prompt: Prompt, text: str | None, meta: dict[str, Any], *, from_ledger: bool = False
    ) -> JudgeResult:
        data, why = parse_json(text)
        if why is None:
            why = prompt.validate_output(data)
        if why is not None:
            return JudgeResult("parse_error", reason=f"parse_error: {why}", from_ledger=from_ledger, **meta)
        return JudgeResult("ok", output=data, from_ledger=from_ledger, **meta)

    async def _call_server(
        self, prompt: Prompt, messages: list[dict[str, str]], params: dict[str, Any], meta: dict[str, Any]
    ) -> JudgeResult:
        usage = _Attempt()
        max_tokens, truncated_retry, repaired = params["max_tokens"], False, False
        conversation = list(messages)
        async with self._slots:
            if not self.budget.admit():  # checked again here: the budget may have run out while we waited
                self.stats.skipped_budget += 1
                return JudgeResult("skipped", reason="budget", **meta)
            t0 = time.perf_counter()  # the call's own time, not its wait for a slot
            reply = await self._request(prompt, conversation, max_tokens, usage)
            if reply.error is None and reply.finish_reason == "length":  # cut off: once more, with room
                truncated_retry, max_tokens = True, max_tokens * 2
                reply = await self._request(prompt, conversation, max_tokens, usage)
            result = None
            if reply.error is None:
                result = self._judge(prompt, reply.text, meta)
                if result.status == "parse_error":  # one repair attempt, the complaint in the conversation
                    repaired = True
                    reply, result = await self._repair(prompt, conversation, reply, result, max_tokens, usage, meta)
            latency_ms = (time.perf_counter() - t0) * 1000
        if result is None:
            result = JudgeResult("judge_error", reason=f"judge_error: {reply.error}", **meta)
        cost, price_known = self._cost(usage)
        self.budget.spend(cost)
        self.stats.statuses[result.status] = self.stats.statuses.get(result.status, 0) + 1
        self.stats.timed(f"judge:{prompt.key}", latency_ms)
        self.ledger.record(
            {
                **meta,
                "base_url": self.config.base_url,
                "sampling_params": params,
                "request": self.redact(
                    json.dumps({"messages": conversation, **params, "model": self.config.model}, ensure_ascii=False)
                ),
                "response": reply.text,
                "reply_model": reply.reply_model,
                "system_fingerprint": reply.system_fingerprint,
                "output": json.dumps(result.output) if result.output is not None else None,
                "status": result.status,
                "error": result.reason,
                "attempts": usage.retries + 1 + int(truncated_retry) + int(repaired),
                "retries": usage.retries,
                "repaired": repaired,
                "truncated_retry": truncated_retry,
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "latency_ms": latency_ms,
                "cost_usd": cost,
                "price_known": price_known,
            }
        )
        return result

    async def _repair(
        self,
        prompt: Prompt,
        conversation: list[dict[str, str]],
        reply: _Attempt,
        result: JudgeResult,
        max_tokens: int,
        usage: _Attempt,
        meta: dict[str, Any],
    ) -> tuple[_Attempt, JudgeResult]:
        """Ask once more with the parse complaint added to `conversation` (in place); the new reply and
        result, or the old ones when the repair request itself failed."""
        complaint = f"Your reply does not fit the required JSON ({result.reason}). {REPAIR_REQUEST}"
        conversation += [{"role": "assistant", "content": reply.text or ""}, {"role": "user", "content": complaint}]
        fixed = await self._request(prompt, conversation, max_tokens, usage)
        return (fixed, self._judge(prompt, fixed.text, meta)) if fixed.error is None else (reply, result)

    def _cost(self, usage: _Attempt) -> tuple[float, bool]:
        price = self.config.price()
        self.stats.prompt_tokens += usage.prompt_tokens
        self.stats.completion_tokens += usage.completion_tokens
        if price is None:
            self.stats.unpriced_calls += 1
            return 0.0, False
        self.stats.priced_calls += 1
        cost = (usage.prompt_tokens * price[0] + usage.completion_tokens * price[1]) / 1e6
        self.stats.cost_usd += cost
        return cost, True

    async def _request(
        self, prompt: Prompt, messages: list[dict[str, str]], max_tokens: int, usage: _Attempt
    ) -> _Attempt:
        """One logical request, retried (raglake.retrying) on 429 / 5xx / timeouts / connection errors."""

        def retried(_: Failure) -> None:
            usage.retries += 1
            self.stats.retries += 1

        backoff = Backoff(self.config.max_retries, self.config.backoff_s, self.config.max_backoff_s)
        outcome, attempts = await retry_async(
            lambda: self._attempt(prompt, messages, max_tokens, usage), backoff, on_retry=retried
        )
        if isinstance(outcome, Failure):
            return _Attempt(error=self.redact.error(f"{outcome.error} (after {attempts} attempt(s))"))
        return outcome

    async def _attempt(
        self, prompt: Prompt, messages: list[dict[str, str]], max_tokens: int, usage: _Attempt
    ) -> _Attempt | Failure:
        """One attempt: the reply, or why there is none (a structured-output form the server refuses is
        stepped down within the attempt)."""
        import openai

        fixed = {"model": self.config.model, "messages": messages, "temperature": 0, "seed": self.config.seed}
        while True:
            await self.limiter.wait(sum(len(m["content"]) for m in messages) // 4 + max_tokens)
            if usage.requests:  # the first request was counted when the call was admitted
                self.budget.count_call()
            usage.requests += 1
            self.stats.calls += 1
            try:
                async with asyncio.timeout(self.config.timeout_s):  # the whole attempt, body included
                    # the client's low-level post: its errors, timeouts and auth, without the SDK's per-call
                    # transform of the request and its pydantic model of the reply (most of its CPU per call)
                    body = {**fixed, "max_tokens": max_tokens, **self._format(prompt)}
                    response = await self.client.post("/chat/completions", cast_to=dict, body=body)
                return _reply(response, usage)
            except openai.APIStatusError as e:
                if 300 <= e.status_code < 400:
                    return Failure(redirect_message(e.status_code, e.response.headers.get("location")), False)
                if self.format_mode != "none" and "response_format" in str(e).lower():
                    # the server refuses this structured-output form (some answer 400, llama.cpp 500): step down
                    self.format_mode = _FORMAT_FALLBACK[self.format_mode]
                    continue
                code, why = e.status_code, self.redact.error(str(e), 300)
                return Failure(f"HTTP {code}: {why}", code == 429 or code >= 500, retry_after_seconds(e.response))
            except (openai.APITimeoutError, TimeoutError):
                return Failure(f"no reply within {self.config.timeout_s:g} s", True)
            except ResponseTooLarge as e:  # the same request would get the same body
                return Failure(str(e), False)
            except openai.APIConnectionError as e:
                if isinstance(e.__cause__, self._decoding_error):  # raised by raglake.httpedge: not retried
                    return Failure(f"the reply could not be decoded: {e.__cause__}", False)
                return Failure(f"connection error: {e}", True)
            except (ValueError, RecursionError) as e:  # a 200 that is no chat completion: retried like a 5xx
                return Failure(f"malformed reply: {_malformed(e)}", True)

    def _format(self, prompt: Prompt) -> dict[str, Any]:
        if self.format_mode == "json_schema":
            return {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": prompt.id, "schema": prompt.output_schema, "strict": False},
                }
            }
        if self.format_mode == "json_object_schema":  # llama.cpp's form: JSON constrained by the schema
            return {"response_format": {"type": "json_object", "schema": prompt.output_schema}}
        if self.format_mode == "json_object":
            return {"response_format": {"type": "json_object"}}
        return {}


class MalformedReply(ValueError):
    """An HTTP 200 whose body is not a usable chat completion (a proxy's page, a cut-off envelope, no choices)."""


def _reply(response: Any, usage: _Attempt) -> _Attempt:
    """The text and finish reason of a chat completion (a JSON object), its token usage added to `usage`;
    MalformedReply when the envelope does not hold them."""
    if not isinstance(response, dict):  # the client hands over the text of a body that is not JSON
        raise MalformedReply(f"the reply is not a JSON object: {str(response)[:200]}")
    counts = response.get("usage")
    if isinstance(counts, dict):
        usage.prompt_tokens += _count(counts.get("prompt_tokens"))
        usage.completion_tokens += _count(counts.get("completion_tokens"))
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedReply("the reply has no choices")
    message, finish = choices[0].get("message"), choices[0].get("finish_reason")
    if not isinstance(message, dict):
        raise MalformedReply("the reply has no message")
    text = message.get("content")
    if text is not None and not isinstance(text, str):
        raise MalformedReply(f"the message content is a {type(text).__name__}, not text")
    if text is None and finish != "length":  # cut off before any text: the truncation retry handles it
        refusal = message.get("refusal")
        raise MalformedReply("the message has no content" + (f" (refusal: {str(refusal)[:200]})" if refusal else ""))
    return _Attempt(
        text=text,
        finish_reason=finish,
        reply_model=_text(response.get("model")),
        system_fingerprint=_text(response.get("system_fingerprint")),
    )


def _text(value: Any) -> str | None:
    """A short identifier from the reply's envelope; None for anything that is not text."""
    return value[:200] if isinstance(value, str) and value else None


def _count(value: Any) -> int:
    """A token count from the reply's usage; 0 for anything that is not a count."""
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e12 else 0


def _malformed(e: ValueError | RecursionError) -> str:
    """Why a reply body is no chat completion, naming the decoder's exception where it was one."""
    if isinstance(e, MalformedReply):
        return str(e)
    if isinstance(e, json.JSONDecodeError):
        return f"JSONDecodeError: {e.msg} (line {e.lineno} column {e.colno})"
    if isinstance(e, RecursionError):
        return "RecursionError: the JSON is nested too deeply"
    return f"{type(e).__name__}: {str(e)[:300]}"
