"""The http target's `concurrency` holds per run, not per capture batch (issue 10): the flow captures
batches on several threads, each running its own event loop, and a service's rate limit counts every
request of the run. The limit itself (raglake.targets.http_client.SharedLimit) is FIFO across loops and
loses no slot when a waiter is cancelled."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from raglake.targets.http import HttpTarget
from raglake.targets.http_client import SharedLimit
from tests.faultkit import Answer, FaultServer, Request, golden_cases, json_answer, service_body, service_config

DELAY_S = 0.1  # each request holds the server this long, so batches overlap


def slow(request: Request) -> Answer:
    return json_answer(service_body(request.json()["case_id"]), delay_s=DELAY_S)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_concurrency_holds_across_batches_captured_on_threads(tmp_path: Path, concurrency: int):
    with FaultServer(slow) as server:
        target = HttpTarget(str(service_config(tmp_path, server.port, concurrency=concurrency)))
        batches = [golden_cases([f"b{b}-c{i}" for i in range(3 * concurrency)]) for b in range(4)]
        with ThreadPoolExecutor(max_workers=4) as pool:  # as the flow's task runner does
            results = list(pool.map(target.capture, batches))
    assert [[c.case_id for c in r] for r in results] == [[c.id for c in b] for b in batches]
    assert all(c.status == "ok" for r in results for c in r)
    assert server.count == 4 * 3 * concurrency
    assert server.max_in_flight == concurrency, (
        f"{server.max_in_flight} requests in flight with concurrency {concurrency}"
    )


def test_the_limit_is_fifo_across_event_loops():
    """Waiters from two loops get the slot in the order they asked for it."""
    limit = SharedLimit(1)
    order: list[str] = []

    async def queued(n: int) -> None:
        while len(limit._waiters) < n:
            await asyncio.sleep(0.005)

    async def holder(started: asyncio.Event) -> None:
        async with limit:
            started.set()
            await queued(3)  # holds the slot until a, b and c all wait

    async def waiter(name: str, ahead: int) -> None:
        await queued(ahead)  # asks once `ahead` others wait
        async with limit:
            order.append(name)

    async def first_loop() -> None:
        started = asyncio.Event()
        task = asyncio.create_task(holder(started))
        await started.wait()
        await asyncio.gather(task, waiter("a", 0), waiter("c", 2))

    with ThreadPoolExecutor(max_workers=2) as pool:
        one = pool.submit(asyncio.run, first_loop())
        two = pool.submit(asyncio.run, waiter("b", 1))
        one.result(timeout=30), two.result(timeout=30)
    assert order == ["a", "b", "c"]
    assert limit._free == 1 and not limit._waiters


def test_a_cancelled_waiter_gives_its_slot_back():
    """Cancelled while queued, or just as the slot was handed to it: either way the slot comes back."""
    limit = SharedLimit(1)

    async def main() -> None:
        async def wait_for_slot() -> None:
            async with limit:
                pass

        for handed_over_first in (False, True):
            await limit.__aenter__()  # hold the only slot
            task = asyncio.create_task(wait_for_slot())
            await asyncio.sleep(0)  # the task queues behind the holder
            assert len(limit._waiters) == 1
            await limit.__aexit__(None, None, None)  # the slot is on its way to the task
            if handed_over_first:
                await asyncio.sleep(0)  # the hand-over runs; the task has not resumed yet
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert limit._free == 1 and not limit._waiters, handed_over_first
        queued = [asyncio.create_task(wait_for_slot()) for _ in range(3)]
        await limit.__aenter__()
        await asyncio.sleep(0)
        for t in queued:
            t.cancel()
        await asyncio.gather(*queued, return_exceptions=True)
        await limit.__aexit__(None, None, None)
        assert limit._free == 1 and not limit._waiters

    asyncio.run(main())
