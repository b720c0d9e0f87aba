"""A fetcher process killed in the middle of a read (issue 22, finding 8).

The fetcher runs as a process of its own (``tests/support/fetcher_process.py``) and is
ended with SIGKILL, as the kernel's OOM killer or a crash would end it, while the read
waits for a page. The tool says in words that the page reader became unavailable, never
that the read timed out, and keeps the pages read before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import trustme

from fetcher.client import FetcherClient
from gateway import prompts
from gateway.tools.base import ToolContext, ToolOutcome, ToolResult
from gateway.tools.events import Read
from gateway.tools.fetch.addresses import hosts_in_text
from gateway.tools.ledger import PAGES, SEARCHES, BudgetCounter, Ledger
from gateway.tools.research import FetchPages
from testkit.origin import Origin, Reply, Request, html
from tests.support.fetcher_process import spawn
from tests.support.fetcher_service import socket_folder


@pytest.fixture
async def process_folder(ca: trustme.CA) -> AsyncIterator[Path]:
    with socket_folder() as folder:
        ca.cert_pem.write_to_path(str(folder / "ca.pem"))
        yield folder


async def read_while_killed(
    origin: Origin, folder: Path, url: str, asked: asyncio.Event
) -> tuple[list[Read], ToolResult]:
    process = await spawn(folder, origin.port)
    try:
        async with FetcherClient(f"unix:{folder / 'f.sock'}", timeout=30) as client:
            tool = FetchPages([client], deadline=30)
            context = ToolContext(
                ledger=Ledger(),
                budgets=BudgetCounter({SEARCHES: 16, PAGES: 12}),
                user_hosts=tuple(hosts_in_text(f"Read {url}")),
            )

            async def run() -> tuple[list[Read], ToolResult]:
                events: list[Read] = []
                async with contextlib.aclosing(tool.run({"url": url}, context)) as items:
                    async for item in items:
                        if isinstance(item, ToolResult):
                            return events, item
                        assert isinstance(item, Read)
                        events.append(item)
                raise AssertionError("no result")

            task = asyncio.create_task(run())
            await asyncio.wait_for(asked.wait(), 30)
            process.kill()
            await process.wait()
            return await asyncio.wait_for(task, 10)  # well before the 30 s deadline
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def hang(asked: asyncio.Event) -> Callable[[Request], Awaitable[Reply]]:
    async def handler(_: Request) -> Reply:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("never answered")

    return handler


async def test_killed_before_any_page_is_unavailable_in_words(
    origin: Origin, process_folder: Path
) -> None:
    asked = asyncio.Event()
    origin.routes["/"] = hang(asked)
    url = origin.url("/")
    events, result = await read_while_killed(origin, process_folder, url, asked)
    assert events == [Read(url, url, "", ok=False, reason="unavailable")]
    assert result.text == prompts.FETCH_UNAVAILABLE.format(url=url)
    assert result.outcome is ToolOutcome.ERROR
    assert "timeout" not in result.text
    assert "too long" not in result.text


async def test_killed_after_a_page_keeps_it_and_says_the_rest_is_missing(
    origin: Origin, process_folder: Path
) -> None:
    asked = asyncio.Event()
    origin.routes["/"] = html(
        "<html><head><title>Start</title></head><body><main><p>The first page.</p>"
        '<a href="/next">next</a></main></body></html>'
    )
    origin.routes["/next"] = hang(asked)
    url = origin.url("/")
    events, result = await read_while_killed(origin, process_folder, url, asked)
    assert [(e.url, e.ok) for e in events] == [(url, True)]
    assert "The first page." in result.text
    assert result.text.endswith(prompts.FETCH_UNAVAILABLE_MIDWAY.format(url=url))
    assert f"so {url} was not read" not in result.text
    assert "too long" not in result.text
    assert result.outcome is ToolOutcome.OK
