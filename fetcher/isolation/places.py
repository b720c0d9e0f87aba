"""A fixed number of places, taken in order, counted for health and metrics.

The render pool (``fetcher.isolation.workers``) and the PDF reader (``fetcher.pdf.reader``) each let at
most a few worker processes run at once; more work waits, in order, for a free place.
:class:`Places` is that rule once, with the two numbers both report: places taken
(:attr:`Places.busy`) and work waiting (:attr:`Places.waiting`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

__all__ = ["Places"]


class Places:
    """At most ``size`` holders at once; the others wait in the order they came."""

    def __init__(self, size: int) -> None:
        """Args:
        size: How many may hold a place at once.
        """
        self.size = size
        self._free = asyncio.Semaphore(size)
        self._busy = 0
        self._waiting = 0

    @property
    def busy(self) -> int:
        """Places held now."""
        return self._busy

    @property
    def waiting(self) -> int:
        """Holders waiting for a place."""
        return self._waiting

    @contextlib.asynccontextmanager
    async def taken(self) -> AsyncIterator[None]:
        """Hold one place for the block, once one is free; a cancelled waiter leaves the
        line without taking one."""
        self._waiting += 1
        try:
            await self._free.acquire()
        finally:
            self._waiting -= 1
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1
            self._free.release()
