"""raglake.retrying, the one retry helper of the IO edges: attempts counted, exponential backoff with
jitter and a cap, Retry-After honoured, a failure that cannot help stops at once, exceptions propagate."""

from __future__ import annotations

import asyncio

import pytest

from raglake.retrying import Backoff, Failure, retry_async


def _run(outcomes: list, backoff: Backoff) -> tuple[object, int, list[float], list[Failure]]:
    """Each attempt returns (or raises) the next of `outcomes`; returns (outcome, attempts, sleeps, retried)."""
    sleeps: list[float] = []
    retried: list[Failure] = []
    todo = iter(outcomes)

    async def attempt() -> object:
        item = next(todo)
        if isinstance(item, BaseException):
            raise item
        return item

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    outcome, attempts = asyncio.run(retry_async(attempt, backoff, sleep=sleep, on_retry=retried.append))
    return outcome, attempts, sleeps, retried


def test_success_after_retries_counts_every_attempt() -> None:
    boom = Failure("HTTP 502", True)
    outcome, attempts, sleeps, retried = _run([boom, boom, "reply"], Backoff(3, 0.1, 10.0))
    assert outcome == "reply" and attempts == 3 and retried == [boom, boom]
    assert 0.05 <= sleeps[0] <= 0.15 and 0.1 <= sleeps[1] <= 0.3  # base * 2^(n-1), ±50 %


def test_out_of_retries_returns_the_last_failure() -> None:
    failures = [Failure("a", True), Failure("b", True), Failure("c", True)]
    outcome, attempts, sleeps, _ = _run(failures, Backoff(2, 1.0, 1.5))
    assert outcome == Failure("c", True) and attempts == 3 and len(sleeps) == 2
    assert all(s <= 1.5 * 1.5 for s in sleeps)  # capped before the jitter


def test_a_failure_that_cannot_help_is_not_retried() -> None:
    outcome, attempts, sleeps, _ = _run([Failure("HTTP 404", False), "never"], Backoff(5, 0.1, 1.0))
    assert outcome == Failure("HTTP 404", False) and attempts == 1 and sleeps == []


def test_retry_after_wins_over_a_shorter_backoff() -> None:
    _, _, sleeps, _ = _run([Failure("HTTP 429", True, retry_after=3.0), "ok"], Backoff(2, 0.01, 1.0))
    assert sleeps == [3.0]


def test_exceptions_propagate_unretried() -> None:
    with pytest.raises(KeyError):
        _run([KeyError("surprise"), "never"], Backoff(3, 0.1, 1.0))
