"""Phase A's stand-ins for the research tools: same names and events, no network.

They number their sources in the answer's ledger and emit the ``searched`` and ``read``
events of SPEC 4 with every field the page shows, so the page is tested on the real loop
and the real stream. The real tools replace them through `tests.page.stack.Research`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from gateway.tools import Tool, ToolContext, ToolResult
from tests.gateway.conftest import search_schema

#: What the stand-in search finds for any query: (address, title).
RESULTS = (
    ("https://docs.tigress.test/intro", "Tigress introduction"),
    ("https://blog.tigress.test/2026/why", "Why a gateway and a fetcher"),
)
#: The page the stand-in reader fails on, after reading the one it was asked for.
FAILED_PAGE = "https://docs.tigress.test/slow"


class StandInSearch:
    """``web_search``: two results per query, one engine that did not answer."""

    name = "web_search"
    schema = search_schema("web_search")

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        query = str(arguments["query"])
        context.budgets.take_searches(1)
        lines = []
        for url, title in RESULTS:
            n = context.ledger.add(url, title)
            lines.append(f"[{n}] {title} — {url}")
        event = {
            "type": "searched",
            "queries": [query],
            "time_range": arguments.get("time_range"),
            "kind": arguments.get("kind"),
            "results": len(RESULTS),
            "unresponsive_engines": [["brave", "timeout"]],
        }
        return ToolResult("\n".join(lines), events=[event])


class StandInRead:
    """``fetch_page_content_recursive``: reads the asked page, fails on a linked one."""

    name = "fetch_page_content_recursive"
    schema = {  # noqa: RUF012 (a class-level constant, like the real tool's)
        "type": "function",
        "function": {
            "name": "fetch_page_content_recursive",
            "description": "Read a web page as plain text.",
            "parameters": {
                "type": "object",
                "properties": {"url": {"type": "string"}},
                "required": ["url"],
            },
        },
    }

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        url = str(arguments["url"])
        title = dict(RESULTS).get(url, "A page")
        context.ledger.add(url, title)
        events = [
            {"type": "read", "url": url, "final_url": url, "title": title, "ok": True},
            {
                "type": "read",
                "url": FAILED_PAGE,
                "final_url": FAILED_PAGE,
                "title": "",
                "ok": False,
                "reason": "timeout",
            },
        ]
        return ToolResult(f"{title}\n\nTigress reads pages for the model.", events=events)


@asynccontextmanager
async def stand_in_research() -> AsyncIterator[Sequence[Tool]]:
    """The phase A research: the two stand-in tools."""
    yield (StandInSearch(), StandInRead())
