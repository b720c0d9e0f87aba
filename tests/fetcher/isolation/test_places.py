"""Places: at most N holders, the others waiting in order, both counted."""

from __future__ import annotations

import asyncio

import pytest

from fetcher.isolation.places import Places


async def test_holders_past_the_size_wait_in_order_and_are_counted() -> None:
    places = Places(1)
    order: list[int] = []
    release = asyncio.Event()

    async def hold(n: int) -> None:
        async with places.taken():
            order.append(n)
            await release.wait()

    tasks = [asyncio.create_task(hold(n)) for n in range(3)]
    while places.waiting < 2:
        await asyncio.sleep(0)
    assert (places.busy, places.waiting, order) == (1, 2, [0])
    release.set()
    await asyncio.gather(*tasks)
    assert (places.busy, places.waiting, order) == (0, 0, [0, 1, 2])


async def test_a_cancelled_waiter_leaves_the_line_without_a_place() -> None:
    places = Places(1)
    taken_by_waiter = []

    async def wait_for_a_place() -> None:
        async with places.taken():
            taken_by_waiter.append(True)

    async with places.taken():
        waiter = asyncio.create_task(wait_for_a_place())
        while places.waiting < 1:
            await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert (places.busy, places.waiting) == (1, 0)
    assert taken_by_waiter == []
    async with places.taken():
        assert places.busy == 1
