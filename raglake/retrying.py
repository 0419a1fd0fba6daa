"""The one retry helper of the IO edges (the judge gateway, the http target): exponential backoff with
±50 % jitter, capped, never shorter than the server's Retry-After, attempts counted. Built on tenacity.

An attempt returns its result, or a `Failure` saying whether another attempt may help; exceptions are
never retried (they propagate): an edge turns the errors it knows into Failures itself."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_result, stop_after_attempt

T = TypeVar("T")


@dataclass(frozen=True)
class Failure:
    """One attempt that did not succeed: why, whether to try again, and the server's wait if it named one."""

    error: str
    retryable: bool
    retry_after: float | None = None
    status: str = "error"  # what an edge records when this was the last attempt (the http target: error | timeout)


@dataclass(frozen=True)
class Backoff:
    """`retries` more attempts after the first, waiting base_s·2^(n-1) (±50 % jitter, at most max_s) before the n-th."""

    retries: int
    base_s: float
    max_s: float

    def delay(self, retry: int) -> float:
        """The jittered wait before retry number `retry` (1 for the first retry)."""
        return min(self.max_s, self.base_s * 2 ** (retry - 1)) * (0.5 + random.random())


def retry_after_seconds(response: Any) -> float | None:
    """The Retry-After of an HTTP response (seconds or an HTTP date; anything whose `headers` has .get),
    never negative; None when it names none or cannot be read."""
    value = response.headers.get("retry-after") if response is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def _failed(result: object) -> bool:
    return isinstance(result, Failure) and result.retryable


async def retry_async(
    attempt: Callable[[], Awaitable[T | Failure]],
    backoff: Backoff,
    *,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    on_retry: Callable[[Failure], None] | None = None,
) -> tuple[T | Failure, int]:
    """Run `attempt` until it succeeds, fails for good or runs out of retries; returns (the last
    outcome, the number of attempts made). `on_retry` sees each Failure that is retried."""
    count = 0

    async def once() -> T | Failure:
        nonlocal count
        count += 1
        return await attempt()

    def wait(state: RetryCallState) -> float:
        failure = state.outcome.result() if state.outcome is not None else None
        hint = failure.retry_after if isinstance(failure, Failure) else None
        return max(backoff.delay(state.attempt_number), hint or 0.0)

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            on_retry(state.outcome.result())

    retrying = AsyncRetrying(
        stop=stop_after_attempt(backoff.retries + 1),
        wait=wait,
        retry=retry_if_result(_failed),
        sleep=sleep or asyncio.sleep,
        before_sleep=before_sleep,
        retry_error_callback=lambda state: state.outcome.result() if state.outcome is not None else None,
    )
    outcome = await retrying(once)
    return outcome, count
