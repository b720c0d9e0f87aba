"""The page cache as plain state (SPEC 10): claims, sharing, hand-over, bounds, lifetimes."""

from __future__ import annotations

import asyncio

import pytest

from fetcher.pagecache import (
    ENTRY_OVERHEAD,
    FAILURE_SECONDS,
    Hit,
    KeptFailure,
    KeptPage,
    Lead,
    PageCache,
    Wait,
    may_keep,
    size_of,
)
from fetcher.reasons import Reason

KEY = "https://example.org/page"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def page(text: str = "text", url: str = KEY) -> KeptPage:
    return KeptPage(final_url=url, title="T", text=text, links=(), status=200, bytes=len(text))


def lead(cache: PageCache, key: str = KEY) -> Lead:
    claim = cache.claim(key)
    assert isinstance(claim, Lead), claim
    return claim


@pytest.mark.parametrize(
    ("values", "kept"),
    [
        ((), True),
        (("max-age=60",), True),
        (("public, max-age=600",), True),
        (("no-cache",), True),  # revalidate before reuse: a read within the minute is fine
        (("no-store",), False),
        (("No-Store",), False),
        (("max-age=60, no-store",), False),
        (("private",), False),
        (('private="set-cookie"',), False),
        (("public", "private"), False),
        (("max-age=60", " no-store "), False),
        (("no-storage",), True),
        (("privately",), True),
    ],
)
def test_no_store_and_private_are_never_kept(values: tuple[str, ...], kept: bool) -> None:
    assert may_keep(values) is kept


async def test_a_miss_leads_then_a_hit_until_it_expires() -> None:
    clock = Clock()
    cache = PageCache(max_bytes=1 << 20, seconds=600, clock=clock)
    first = lead(cache)
    cache.settle(first, page(), keep=True)
    assert cache.claim(KEY) == Hit(page())
    clock.now += 599.9
    assert isinstance(cache.claim(KEY), Hit)
    clock.now += 0.2
    assert isinstance(cache.claim(KEY), Lead)
    assert cache.entries == 0


async def test_reads_at_the_same_time_wait_for_the_one_that_leads() -> None:
    cache = PageCache(max_bytes=1 << 20, clock=Clock())
    first = lead(cache)
    waits = [cache.claim(KEY) for _ in range(3)]
    assert all(isinstance(w, Wait) for w in waits)
    flights = {id(w.flight) for w in waits if isinstance(w, Wait)}
    assert flights == {id(first.flight)}
    cache.settle(first, page(), keep=True)
    for wait in waits:
        assert isinstance(wait, Wait)
        assert await wait.flight == page()


async def test_a_page_that_may_not_be_kept_is_shared_in_flight_but_not_kept() -> None:
    cache = PageCache(max_bytes=1 << 20, clock=Clock())
    first = lead(cache)
    wait = cache.claim(KEY)
    cache.settle(first, page(), keep=False)
    assert isinstance(wait, Wait)
    assert await wait.flight == page()
    assert isinstance(cache.claim(KEY), Lead)


async def test_a_lead_that_gives_up_hands_over_to_a_waiting_read() -> None:
    cache = PageCache(max_bytes=1 << 20, clock=Clock())
    first = lead(cache)
    wait = cache.claim(KEY)
    cache.abandon(first)
    assert isinstance(wait, Wait)
    assert await wait.flight is None
    second = lead(cache)
    cache.settle(second, page("second"), keep=True)
    cache.abandon(second)  # after settle: nothing happens
    assert cache.claim(KEY) == Hit(page("second"))


async def test_failures_are_kept_at_most_30_seconds_and_internal_ones_never() -> None:
    clock = Clock()
    cache = PageCache(max_bytes=1 << 20, seconds=600, clock=clock)
    failure = KeptFailure(KEY, Reason.HTTP_STATUS, "the server answered 503")
    cache.settle(lead(cache), failure, keep=True)
    clock.now += FAILURE_SECONDS - 0.1
    assert cache.claim(KEY) == Hit(failure)
    clock.now += 0.2
    assert isinstance(cache.claim(KEY), Lead)
    other = "https://example.org/bug"
    first = lead(cache, other)
    waiting = cache.claim(other)
    cache.settle(first, KeptFailure(other, Reason.INTERNAL, "bug"), keep=True)
    # Not kept, and not shared either: the read waiting leads a try of its own.
    assert isinstance(waiting, Wait)
    assert await waiting.flight is None
    assert isinstance(cache.claim(other), Lead)


async def test_a_short_lifetime_shortens_the_failures_too() -> None:
    clock = Clock()
    cache = PageCache(max_bytes=1 << 20, seconds=5, clock=clock)
    assert cache.failure_seconds == 5
    cache.settle(lead(cache), KeptFailure(KEY, Reason.DNS, "no such name"), keep=True)
    clock.now += 5
    assert isinstance(cache.claim(KEY), Lead)


async def test_the_bytes_are_bounded_least_recently_used_first() -> None:
    one = size_of(page("x" * 1000, "https://example.org/0"), "https://example.org/0")
    cache = PageCache(max_bytes=3 * one + 10, clock=Clock())
    keys = [f"https://example.org/{n}" for n in range(4)]
    for key in keys[:3]:
        cache.settle(lead(cache, key), page("x" * 1000, key), keep=True)
    assert cache.entries == 3
    assert isinstance(cache.claim(keys[0]), Hit)  # now the most recently used
    cache.settle(lead(cache, keys[3]), page("x" * 1000, keys[3]), keep=True)
    assert cache.bytes <= cache.max_bytes
    assert [isinstance(cache.claim(k), Hit) for k in keys] == [True, False, True, True]


async def test_an_entry_bigger_than_the_cache_is_not_kept() -> None:
    cache = PageCache(max_bytes=ENTRY_OVERHEAD + 100, clock=Clock())
    cache.settle(lead(cache), page("x" * 10_000), keep=True)
    assert (cache.entries, cache.bytes) == (0, 0)


async def test_size_counts_every_string_kept() -> None:
    small = page("a")
    large = KeptPage(KEY, "T", "a" * 5000, ("https://example.org/x" * 10,), 200, 5000)
    assert size_of(large, KEY) - size_of(small, KEY) >= 5000 + 200


async def test_off_leads_every_read_and_keeps_nothing() -> None:
    cache = PageCache(max_bytes=0)
    assert not cache.enabled
    first, second = cache.claim(KEY), cache.claim(KEY)
    assert first == Lead(KEY, None)
    assert second == Lead(KEY, None)
    cache.settle(first, page(), keep=True)
    cache.abandon(second)
    assert (cache.entries, cache.bytes) == (0, 0)


async def test_expired_entries_go_and_the_expiry_queues_stay_bounded() -> None:
    clock = Clock()
    cache = PageCache(max_bytes=1 << 30, seconds=1, clock=clock)
    for round_ in range(2000):
        key = f"https://example.org/{round_ % 5}"
        cache.settle(lead(cache, key), page(str(round_), key), keep=True)
        clock.now += 0.3
    assert cache.entries <= 5
    assert sum(map(len, cache._expiry.values())) <= 2 * 5 + 64 + 1
    clock.now += 2
    cache.settle(lead(cache, "https://example.org/new"), page(), keep=True)
    assert cache.entries == 1
    assert cache.bytes == size_of(page(), "https://example.org/new")


async def test_a_waiting_read_that_leaves_does_not_end_the_flight() -> None:
    cache = PageCache(max_bytes=1 << 20, clock=Clock())
    first = lead(cache)
    wait = cache.claim(KEY)
    assert isinstance(wait, Wait)

    async def wait_for_it() -> object:
        return await asyncio.shield(wait.flight)

    waiter = asyncio.create_task(wait_for_it())
    await asyncio.sleep(0)
    waiter.cancel()
    assert not wait.flight.cancelled()
    cache.settle(first, page(), keep=True)
    assert await wait.flight == page()


async def test_the_expiry_queues_stay_bounded_when_entries_are_pushed_out() -> None:
    # A long lifetime and room for two: every store pushes one out by size, long before it
    # would expire, so only the rebuild keeps the queues from growing with each store.
    one = size_of(page("x" * 100, "https://example.org/000000"), "https://example.org/000000")
    cache = PageCache(max_bytes=2 * one, seconds=600, clock=Clock())
    for n in range(5000):
        key = f"https://example.org/{n:06d}"
        cache.settle(lead(cache, key), page("x" * 100, key), keep=True)
        assert sum(map(len, cache._expiry.values())) <= 2 * cache.entries + 64 + 1
    assert cache.entries == 2
