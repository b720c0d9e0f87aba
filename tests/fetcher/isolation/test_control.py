"""The fetcher's end of a zygote: what it makes of the zygote's messages."""

from __future__ import annotations

import asyncio

import pytest

from fetcher.errors import IsolationError
from fetcher.isolation.control import Zygote


async def test_a_fork_reply_without_its_pidfd_fails_that_fork_only() -> None:
    """The kernel drops the descriptors of a message the fetcher has no room for (at its
    descriptor limit): that fork fails, and the zygote's later messages are still read
    (the reader took the reply for an end, failed on its missing status and stopped,
    after which every fork waited forever)."""
    zygote = Zygote(())
    loop = asyncio.get_running_loop()
    started: asyncio.Future[tuple[int, int]] = loop.create_future()
    ended: asyncio.Future[int] = loop.create_future()
    zygote._started[0], zygote._ended[0] = started, ended
    zygote._take({"id": 0, "pid": 4321}, [])
    with pytest.raises(IsolationError):
        started.result()
    zygote._take({"id": 0, "status": -9}, [])
    assert ended.result() == -9
