"""A run's judge budget (calls and cost) and the requests/tokens-per-minute limiter."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque


class Budget:
    """Stops judging once `max_calls` requests reached the server or `max_cost` dollars were spent;
    what is left gets status `skipped` with reason `budget`. Ledger hits cost nothing."""

    def __init__(self, max_calls: int | None = None, max_cost: float | None = None):
        self.max_calls, self.max_cost = max_calls, max_cost
        self.calls, self.cost = 0, 0.0
        self._lock = threading.Lock()

    def exhausted(self) -> bool:
        with self._lock:
            return (self.max_calls is not None and self.calls >= self.max_calls) or (
                self.max_cost is not None and self.cost >= self.max_cost
            )

    def admit(self) -> bool:
        """Admit one more logical call (counting its first request) unless the budget is spent.

        Checked and counted under one lock, once the call holds its concurrency slot, so calls that
        waited for a slot cannot slip past a budget that ran out meanwhile."""
        with self._lock:
            if (self.max_calls is not None and self.calls >= self.max_calls) or (
                self.max_cost is not None and self.cost >= self.max_cost
            ):
                return False
            self.calls += 1
            return True

    def count_call(self) -> None:
        """A further request of an admitted call (retry, repair, truncation retry): counted, never refused."""
        with self._lock:
            self.calls += 1

    def spend(self, dollars: float) -> None:
        with self._lock:
            self.cost += dollars


class RateLimiter:
    """Sliding one-minute windows over request starts and estimated tokens."""

    def __init__(self, requests_per_minute: int | None, tokens_per_minute: int | None):
        self.rpm, self.tpm = requests_per_minute, tokens_per_minute
        self._starts: deque[float] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._lock = asyncio.Lock()

    async def wait(self, tokens: int) -> None:
        if not self.rpm and not self.tpm:
            return
        async with self._lock:
            while True:
                now = time.monotonic()
                while self._starts and now - self._starts[0] >= 60:
                    self._starts.popleft()
                while self._tokens and now - self._tokens[0][0] >= 60:
                    self._tokens.popleft()
                used = sum(t for _, t in self._tokens)
                waits = []
                if self.rpm and len(self._starts) >= self.rpm:
                    waits.append(60 - (now - self._starts[0]))
                if self.tpm and self._tokens and used + tokens > self.tpm:
                    waits.append(60 - (now - self._tokens[0][0]))
                if not waits:
                    self._starts.append(now)
                    self._tokens.append((now, tokens))
                    return
                await asyncio.sleep(max(0.01, min(waits)))
