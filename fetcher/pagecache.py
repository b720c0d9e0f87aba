"""The page cache (SPEC 10): a page read once serves every read of it for a while.

What is kept is a page's outcome as the crawl uses it, and nothing about the request
that read it: for a page read, its final address, title, text, links, status and size
(:class:`KeptPage`); for a page that failed, its address, reason and detail
(:class:`KeptFailure`). The key is the normalised address (``fetcher.net.urls``: scheme and
host lower-cased, IDNA, default port and fragment dropped). Allowed hosts, page limits,
deadlines and request ids are never part of an entry or of its key, so a read can only
ever be given what any read of that address would have been given.

Reads of one address at the same time share one download and one render (single
flight): the first read leads (``miss``), the others wait for its outcome (``shared``);
later reads within ``cache_seconds`` get the kept outcome (``hit``). A leader that gives
up (its client left, its deadline passed) hands over: one of the waiting reads leads in
its place. Entries are bounded in bytes (least recently used go first) and in time;
failures are kept at most 30 s; a page sent with ``Cache-Control: no-store`` or
``private`` is never kept, and a failure that was the fetcher's own (``internal``) is
neither kept nor shared.
``cache_bytes = 0`` turns the cache off: every read leads, nothing is shared or kept.

Rule 1 and the operator's lists are checked by the caller before :meth:`PageCache.claim`
(``fetcher.crawl``), for every read, whatever is kept.

No I/O here: the cache is plain state, driven by the crawl.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import enum
import sys
import time
from collections.abc import Callable, Sequence

from fetcher.reasons import Reason

#: The most a failure is kept, whatever ``cache_seconds`` says (SPEC 10).
FAILURE_SECONDS = 30.0
#: What an entry costs besides its strings: the key's entry, the value, the bookkeeping.
ENTRY_OVERHEAD = 512
#: Cache-Control directives that forbid keeping a response (RFC 9111 5.2.2.5, 5.2.2.7).
_NOT_KEPT = frozenset({"no-store", "private"})


class CacheResult(enum.StrEnum):
    """How a read got a page: the fetch log's ``cache`` field and the metrics' label."""

    HIT = "hit"  # kept from an earlier read
    SHARED = "shared"  # another read of the same address was under way: its outcome
    MISS = "miss"  # downloaded and read for this read


@dataclasses.dataclass(frozen=True, slots=True)
class KeptPage:
    """A page read, as the cache keeps it (nothing of the request that read it).

    Attributes:
        final_url: The normalised address of the last hop.
        title: The page's title.
        text: Its text (already cut to the page limit).
        links: Its same-site links, in the reader's order.
        status: The final HTTP status.
        bytes: The body's size.
    """

    final_url: str
    title: str
    text: str
    links: tuple[str, ...]
    status: int
    bytes: int


@dataclasses.dataclass(frozen=True, slots=True)
class KeptFailure:
    """A page that could not be read, as the cache keeps it.

    Attributes:
        url: The address of the hop that failed.
        reason: The vocabulary word.
        detail: One line for people.
    """

    url: str
    reason: Reason
    detail: str


Kept = KeptPage | KeptFailure


def may_keep(cache_control: Sequence[str]) -> bool:
    """Whether a page whose hops sent these ``Cache-Control`` values may be kept.

    Args:
        cache_control: Every ``Cache-Control`` header value of every hop, in order.

    Returns:
        False when any directive is ``no-store`` or ``private`` (with or without field
        names: ``private="set-cookie"`` is treated as ``private``), in any case.
    """
    for value in cache_control:
        for directive in value.split(","):
            if directive.partition("=")[0].strip().lower() in _NOT_KEPT:
                return False
    return True


def size_of(kept: Kept, key: str) -> int:
    """The memory an entry holds, counted as Python holds its strings."""
    if isinstance(kept, KeptFailure):
        strings: tuple[str, ...] = (key, kept.url, kept.detail)
    else:
        strings = (key, kept.final_url, kept.title, kept.text, *kept.links)
    return ENTRY_OVERHEAD + sum(sys.getsizeof(text) for text in strings)


@dataclasses.dataclass(frozen=True, slots=True)
class Hit:
    """The address's outcome was kept: use it."""

    kept: Kept


@dataclasses.dataclass(frozen=True, slots=True)
class Wait:
    """Another read is loading the address: wait for :attr:`flight`."""

    flight: asyncio.Future[Kept | None]


@dataclasses.dataclass(frozen=True, slots=True)
class Lead:
    """This read loads the address; it must end with :meth:`PageCache.settle` or
    :meth:`PageCache.abandon` (``finally``), or the waiting reads wait for ever."""

    key: str
    flight: asyncio.Future[Kept | None] | None


Claim = Hit | Wait | Lead


@dataclasses.dataclass(slots=True)
class _Entry:
    kept: Kept
    size: int
    expires: float


class PageCache:
    """Kept page outcomes by normalised address, bounded in bytes and time; one per process.

    Attributes:
        max_bytes: The bound on what entries hold (``cache_bytes``); 0 is off.
        seconds: How long a page read is kept (``cache_seconds``).
        failure_seconds: How long a failure is kept (at most :data:`FAILURE_SECONDS`).
    """

    def __init__(
        self,
        *,
        max_bytes: int = 0,
        seconds: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Args:
        max_bytes: The bound on what entries hold; 0 turns the cache off.
        seconds: How long a page read is kept.
        clock: Monotonic seconds (tests pass their own).
        """
        self.max_bytes = max_bytes
        self.seconds = seconds
        self.failure_seconds = min(FAILURE_SECONDS, seconds)
        self._clock = clock
        self._entries: collections.OrderedDict[str, _Entry] = collections.OrderedDict()
        # Keys in the order their entries expire: each kind has one lifetime, so the order
        # they were stored in (one queue for pages, one for failures). Stale items (an
        # entry since dropped or replaced) are skipped as they come to the front, and the
        # queues are rebuilt when stale items outnumber the entries, so they stay bounded.
        self._expiry: dict[bool, collections.deque[tuple[str, float]]] = {
            False: collections.deque(),
            True: collections.deque(),
        }
        self._flights: dict[str, asyncio.Future[Kept | None]] = {}
        self._bytes = 0

    @property
    def enabled(self) -> bool:
        """False when ``cache_bytes`` is 0: nothing is kept or shared."""
        return self.max_bytes > 0

    @property
    def bytes(self) -> int:
        """What the entries hold now (the metrics read it)."""
        return self._bytes

    @property
    def entries(self) -> int:
        """How many entries are kept now (expired ones until they are next looked at)."""
        return len(self._entries)

    def claim(self, key: str) -> Claim:
        """What a read of ``key`` does: use a kept outcome, wait for another read, or lead.

        # Security
        SPEC 10: the key is the normalised address alone and an entry holds nothing
        about the read that made it, so a hit gives a read what any read of the address
        would get. The caller has already applied rule 1 and the operator's lists to
        this read (``fetcher.crawl``), so being kept never lets an address through for a
        read that may not open it. Proved by ``tests/fetcher/test_pagecache.py`` and,
        against the HTTPS origin, ``tests/fetcher/test_crawl_cache.py``.
        """
        if not self.enabled:
            return Lead(key, None)
        entry = self._entries.get(key)
        if entry is not None:
            if entry.expires > self._clock():
                self._entries.move_to_end(key)
                return Hit(entry.kept)
            self._drop(key)
        flight = self._flights.get(key)
        if flight is not None:
            return Wait(flight)
        flight = asyncio.get_running_loop().create_future()
        self._flights[key] = flight
        return Lead(key, flight)

    def settle(self, lead: Lead, kept: Kept, *, keep: bool) -> None:
        """Ends a lead with its outcome: the waiting reads get it, and it is kept if allowed.

        A failure that was the fetcher's own (``internal``: a bug, a crashed worker) is
        neither kept nor shared: it says nothing about the page, so the reads waiting go
        on as if the lead had given up (one of them leads next).

        Args:
            lead: What :meth:`claim` gave this read.
            kept: The outcome.
            keep: False when the page may not be kept (``no-store``, ``private``); the
                reads waiting still get it.
        """
        if lead.flight is None:
            return
        if isinstance(kept, KeptFailure) and kept.reason is Reason.INTERNAL:
            self._end_flight(lead, None)
            return
        self._end_flight(lead, kept)
        if keep:
            self._store(lead.key, kept)

    def abandon(self, lead: Lead) -> None:
        """Ends a lead without an outcome (cancelled, or a bug): a waiting read leads next.

        Safe to call after :meth:`settle` (it then does nothing).
        """
        if lead.flight is not None:
            self._end_flight(lead, None)

    def _end_flight(self, lead: Lead, kept: Kept | None) -> None:
        assert lead.flight is not None
        if self._flights.get(lead.key) is lead.flight:
            del self._flights[lead.key]
        if not lead.flight.done():
            lead.flight.set_result(kept)

    def _store(self, key: str, kept: Kept) -> None:
        size = size_of(kept, key)
        if size > self.max_bytes:
            return
        self._drop(key)
        failure = isinstance(kept, KeptFailure)
        now = self._clock()
        entry = _Entry(kept, size, now + (self.failure_seconds if failure else self.seconds))
        self._entries[key] = entry
        self._expiry[failure].append((key, entry.expires))
        self._bytes += size
        # Expired entries go first (each queue from its front: amortised constant time),
        # then the least recently used until the entries fit.
        for queue in self._expiry.values():
            while queue and (queue[0][1] <= now or not self._live(*queue[0])):
                old, expires = queue.popleft()
                if self._live(old, expires):
                    self._drop(old)
        while self._bytes > self.max_bytes:
            self._drop(next(iter(self._entries)))
        if sum(map(len, self._expiry.values())) > 2 * len(self._entries) + 64:
            for kind, queue in self._expiry.items():
                self._expiry[kind] = collections.deque(i for i in queue if self._live(*i))

    def _live(self, key: str, expires: float) -> bool:
        entry = self._entries.get(key)
        return entry is not None and entry.expires == expires

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry.size
