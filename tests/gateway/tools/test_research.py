"""The two research tools on the tool seam: what they yield, what they count, where they read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from fetcher.client import FetcherClient
from gateway import prompts
from gateway.metrics import GatewayMetrics
from gateway.tools.base import Tool, ToolContext, ToolItem, ToolOutcome, ToolResult
from gateway.tools.events import Read, Searched
from gateway.tools.fetch.addresses import hosts_in_text
from gateway.tools.ledger import PAGES, SEARCHES, BudgetCounter, Found, Ledger
from gateway.tools.research import TOOL_MARGIN, FetchPages, WebSearch, fit_inside
from gateway.tools.search.searxng import SearxngClient
from testkit.origin import Origin, html
from testkit.searxng import SearxngStandIn, recorded, refusing_url
from tests.support.fetcher_service import FetcherService, socket_folder


def context(ledger: Ledger | None = None, user_text: str = "") -> ToolContext:
    return ToolContext(
        ledger or Ledger(),
        BudgetCounter({SEARCHES: 16, PAGES: 12}),
        tuple(hosts_in_text(user_text)),
    )


async def run(tool: Tool, arguments: Mapping[str, Any], ctx: ToolContext) -> list[ToolItem]:
    return [item async for item in tool.run(arguments, ctx)]


def searxng_errors(metrics: GatewayMetrics, cause: str) -> float:
    value = metrics.registry.get_sample_value(
        "tigress_gateway_searxng_errors_total", {"cause": cause}
    )
    return value or 0.0


@pytest.mark.parametrize(
    ("wanted", "tool_timeout", "expected"),
    [
        (15.0, 120.0, 15.0),
        (32.0, 20.0, 20.0 - TOOL_MARGIN),
        (32.0, 1.5, 0.75),
        (5.0, 5.0 + TOOL_MARGIN, 5.0),
    ],
    ids=["fits", "cut-by-margin", "short-timeout-halved", "exactly-fits"],
)
def test_a_tools_deadline_ends_before_the_loops_timeout(
    wanted: float, tool_timeout: float, expected: float
) -> None:
    assert fit_inside(wanted, tool_timeout) == pytest.approx(expected)
    assert fit_inside(wanted, tool_timeout) < tool_timeout


async def test_web_search_yields_its_event_then_its_result(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    metrics = GatewayMetrics(CollectorRegistry())
    ctx = context()
    items = await run(WebSearch(searxng_client, metrics=metrics), {"query": "kettle"}, ctx)
    event, result = items
    assert isinstance(event, Searched)
    assert (event.queries, event.results, event.error) == (("kettle",), 6, None)
    assert isinstance(result, ToolResult)
    assert result.outcome is ToolOutcome.OK
    assert result.text.startswith('Results for "kettle":\n[1] Kettle descaling guide')
    assert [s.searched for s in ctx.ledger.sources()] == [True] * 6


@pytest.mark.parametrize(
    ("file", "cause"),
    [
        ("json_disabled_403.html", "json_disabled"),
        ("limiter_429_json_request_5.txt", "rate_limited"),
    ],
    ids=["403-json-off", "429-limiter"],
)
async def test_searxng_failures_are_counted_by_cause(
    searxng: SearxngStandIn, searxng_client: SearxngClient, file: str, cause: str
) -> None:
    searxng.default = recorded(file)
    metrics = GatewayMetrics(CollectorRegistry())
    items = await run(
        WebSearch(searxng_client, metrics=metrics),
        {"query": "kettle", "queries": ["descale"]},
        context(),
    )
    result = items[-1]
    assert isinstance(result, ToolResult)
    assert result.outcome is ToolOutcome.ERROR
    assert searxng_errors(metrics, cause) == 2
    assert searxng_errors(metrics, "unreachable") == 0


async def test_searxng_down_is_counted_as_unreachable(searxng_http: httpx.AsyncClient) -> None:
    metrics = GatewayMetrics(CollectorRegistry())
    with refusing_url() as url:
        tool = WebSearch(SearxngClient(searxng_http, url), metrics=metrics)
        items = await run(tool, {"query": "kettle"}, context())
    event = items[0]
    assert isinstance(event, Searched)
    assert event.error == "unreachable"
    assert searxng_errors(metrics, "unreachable") == 1


async def test_fetch_pages_yields_read_events_then_its_result(
    origin: Origin, fetcher_client: FetcherClient
) -> None:
    origin.routes["/"] = html("<html><head><title>Start</title></head><body>Hello.</body></html>")
    ledger = Ledger()
    ledger.add(origin.url("/"), "Start", found=Found.SEARCH)
    items = await run(
        FetchPages([fetcher_client], deadline=5.0), {"url": origin.url("/")}, context(ledger)
    )
    read, result = items
    assert isinstance(read, Read)
    assert (read.title, read.ok) == ("Start", True)
    assert isinstance(result, ToolResult)
    assert result.outcome is ToolOutcome.OK
    assert f"Untrusted text from {origin.url('/')}." in result.text


async def test_a_fetcher_that_is_down_is_passed_over_for_the_next(
    origin: Origin, fetcher_service: FetcherService
) -> None:
    origin.routes["/"] = html("<html><head><title>Start</title></head><body>Hello.</body></html>")
    ledger = Ledger()
    ledger.add(origin.url("/"), "Start", found=Found.SEARCH)
    with socket_folder() as folder:
        async with (
            FetcherClient(f"unix:{folder / 'absent.sock'}") as down,
            fetcher_service.client() as up,
        ):
            tool = FetchPages([down, up], deadline=5.0)
            first = await run(tool, {"url": origin.url("/")}, context(ledger))
            second = await run(tool, {"url": origin.url("/")}, context(ledger))
    # The first read starts at the missing fetcher and moves on; the second starts at
    # the running one: both read the page.
    for items in (first, second):
        assert [type(i) for i in items] == [Read, ToolResult]
        result = items[-1]
        assert isinstance(result, ToolResult)
        assert result.outcome is ToolOutcome.OK
    assert len(origin.requests) == 2


async def test_every_fetcher_down_is_one_clear_result(origin: Origin) -> None:
    ledger = Ledger()
    ledger.add(origin.url("/"), found=Found.SEARCH)
    ctx = context(ledger)
    with socket_folder() as folder:
        async with (
            FetcherClient(f"unix:{folder / 'a.sock'}") as a,
            FetcherClient(f"unix:{folder / 'b.sock'}") as b,
        ):
            items = await run(FetchPages([a, b], deadline=5.0), {"url": origin.url("/")}, ctx)
    # One event says why nothing was read (after the last fetcher was tried), then the
    # result.
    assert items == [
        Read(origin.url("/"), origin.url("/"), "", ok=False, reason="unavailable"),
        ToolResult(prompts.FETCH_UNAVAILABLE.format(url=origin.url("/")), ToolOutcome.ERROR),
    ]
    assert ctx.budgets.taken(PAGES) == 0


def test_fetch_pages_needs_a_fetcher() -> None:
    with pytest.raises(ValueError, match="at least one"):
        FetchPages([], deadline=1.0)
