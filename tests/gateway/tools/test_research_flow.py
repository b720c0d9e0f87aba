"""Search, then read what was found: the stand-in's results point at the local HTTPS site,
read through the fetcher's real gRPC service. Everything but the loop and the model."""

from __future__ import annotations

import contextlib

from fetcher.client import FetcherClient
from gateway.tools.base import ToolResult
from gateway.tools.events import Read
from gateway.tools.fetch.addresses import hosts_in_text
from gateway.tools.fetch.run import fetch_page
from gateway.tools.ledger import PAGES, SEARCHES, BudgetCounter, Ledger
from gateway.tools.search.searxng import SearxngClient
from testkit.origin import Origin, html
from testkit.searxng import SearxngStandIn, pointed_at, recorded
from tests.gateway.tools.search.searching import search_once

HOSTS = {"example.org": "origin.test", "example.com": "www.origin.test"}


async def read(
    client: FetcherClient, url: str, ledger: Ledger, budgets: BudgetCounter, user_text: str = ""
) -> tuple[list[Read], ToolResult]:
    events: list[Read] = []
    stream = fetch_page(
        {"url": url},
        fetchers=[client],
        ledger=ledger,
        budgets=budgets,
        user_hosts=tuple(hosts_in_text(user_text)),
    )
    async with contextlib.aclosing(stream):
        async for item in stream:
            if isinstance(item, ToolResult):
                return events, item
            assert isinstance(item, Read)
            events.append(item)
    raise AssertionError("no ToolResult")


async def test_a_search_result_can_be_read_and_keeps_its_number(
    origin: Origin,
    searxng: SearxngStandIn,
    searxng_client: SearxngClient,
    fetcher_client: FetcherClient,
) -> None:
    searxng.default = pointed_at(recorded("search_normal.json"), HOSTS, origin.port)
    origin.routes["/kettle/descale"] = html(
        "<html><head><title>Descaling</title></head><body><main><h1>Descaling</h1>"
        "<p>Use citric acid, then rinse twice.</p></main></body></html>"
    )
    ledger = Ledger()
    budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
    searched = await search_once(
        {"query": "kettle"}, client=searxng_client, ledger=ledger, budgets=budgets
    )
    first = origin.url("/kettle/descale")
    assert f"[1] Kettle descaling guide — {first}" in searched.text

    events, done = await read(fetcher_client, first, ledger, budgets)
    assert [(e.ok, e.title) for e in events] == [(True, "Descaling")]
    assert done.text.startswith(f"Untrusted text from {first}.")
    assert f".\n[1] Descaling — {first}\n" in done.text
    assert "Use citric acid, then rinse twice." in done.text
    assert (budgets.spent(SEARCHES), budgets.taken(PAGES)) == (1, 1)


async def test_a_host_no_result_named_is_refused_until_the_user_writes_it(
    origin: Origin,
    searxng: SearxngStandIn,
    searxng_client: SearxngClient,
    fetcher_client: FetcherClient,
) -> None:
    searxng.default = pointed_at(recorded("search_normal.json"), HOSTS, origin.port)
    origin.routes["/"] = html("<html><head><title>Other</title></head><body>x</body></html>")
    ledger = Ledger()
    budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
    await search_once({"query": "kettle"}, client=searxng_client, ledger=ledger, budgets=budgets)
    other = origin.url("/", host="other.test")

    events, done = await read(fetcher_client, other, ledger, budgets)
    assert [(e.ok, e.reason) for e in events] == [(False, "not_in_answer")]
    assert done.outcome == "refused"

    events, done = await read(
        fetcher_client, other, ledger, budgets, user_text=f"What is on {other}?"
    )
    assert [(e.ok, e.title) for e in events] == [(True, "Other")]
    assert done.outcome == "ok"
