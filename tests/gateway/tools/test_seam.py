"""The tool seam (gateway/tools/base.py): a tool's events reach the client while it runs, and
keep-alives flow while it is quiet."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from dataclasses import replace
from typing import Any

import httpx

from gateway.tools.base import ToolContext, ToolItem, ToolOutcome, ToolResult
from gateway.tools.events import Read
from gateway.tools.ledger import PAGES, BudgetKind, Found
from testkit.engine import FakeEngine, text_reply, tool_reply
from tests.gateway.conftest import AUTH, TEST_TIMEOUTS, GatewayFactory, make_settings
from tests.gateway.http.test_app import chat, events_of


class Crawl:
    """A fetch-like tool: one ``read`` event per page, each page waiting for a gate."""

    name = "fetch_page_content_recursive"
    subject = "url"
    folded: frozenset[str] = frozenset()
    budget: BudgetKind | None = PAGES
    schema: Mapping[str, Any] = {
        "type": "function",
        "function": {
            "name": "fetch_page_content_recursive",
            "description": "Read a page.",
            "parameters": {
                "type": "object",
                "properties": {"url": {"type": "string"}},
                "required": ["url"],
            },
        },
    }

    def __init__(self) -> None:
        self.gates = [asyncio.Event(), asyncio.Event()]

    async def run(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> AsyncGenerator[ToolItem, None]:
        for i, gate in enumerate(self.gates):
            await gate.wait()
            url = f"{arguments['url']}p{i}"
            n = context.ledger.add(url, f"Page {i}", found=Found.PAGE)
            context.budgets.take(PAGES, 1)
            yield Read(url=url, final_url=url, title=f"Page {i}", ok=True)
            assert n
        yield ToolResult("two pages", ToolOutcome.OK)


async def test_read_events_reach_the_client_while_the_tool_runs(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    crawl = Crawl()
    settings = make_settings(engine, timeouts=replace(TEST_TIMEOUTS, keepalive=0.05))
    engine.script(
        tool_reply(("fetch_page_content_recursive", '{"url": "https://a.example/"}')),
        text_reply("Read [1] and [2]."),
    )
    crawl.gates[0].set()
    async with (
        gateway_at(settings=settings, tools=[crawl]) as url,
        http.stream(
            "POST",
            f"{url}/v1/chat/completions",
            json=chat(thor_web_search=True, stream=True),
            headers=AUTH,
        ) as response,
    ):
        seen = ""
        async for text in response.aiter_text():
            seen += text
            # The first page's event arrived while the tool still waits for the second,
            # and keep-alives flow meanwhile.
            if '"type":"read"' in seen and seen.count(": keep-alive") >= 2:
                crawl.gates[1].set()
    reads = [
        e["thor_event"]
        for e in events_of(seen)
        if isinstance(e, dict) and e.get("thor_event", {}).get("type") == "read"
    ]
    assert [r["title"] for r in reads] == ["Page 0", "Page 1"]
    assert reads[0] == {
        "type": "read",
        "url": "https://a.example/p0",
        "final_url": "https://a.example/p0",
        "title": "Page 0",
        "ok": True,
        "reason": None,
    }
    result = engine.chats[1]["messages"][-1]
    assert result["role"] == "tool"
    assert result["content"] == "two pages\nSearches used 0 of 16; pages read 2 of 12"
