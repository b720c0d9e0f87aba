"""The model never reads SearXNG's internal address (issue 22, finding 8).

A search that fails (a timeout, SearXNG not running, a bad answer) tells the model what
happened and what the operator should change, without where SearXNG listens: over MCP
that text reaches an agent outside. /healthz, which the operator reads, still names it.
"""

from __future__ import annotations

import httpx

from gateway.tools.ledger import PAGES, SEARCHES, BudgetCounter, Ledger
from gateway.tools.search.answer import FailureCause
from gateway.tools.search.searxng import SearxngClient
from testkit.searxng import SearxngStandIn, Served, refusing_url
from tests.gateway.tools.search.searching import search_once


async def test_a_timeout_does_not_name_searxngs_address(
    searxng: SearxngStandIn, searxng_http: httpx.AsyncClient
) -> None:
    searxng.default = Served(200, "application/json", b"{}", hang=True)
    searxng.health = searxng.default
    client = SearxngClient(searxng_http, searxng.url, timeout=0.3)
    done = await search_once(
        {"query": "kettle"},
        client=client,
        ledger=Ledger(),
        budgets=BudgetCounter({SEARCHES: 16, PAGES: 12}),
    )
    assert done.failures == (FailureCause.TIMEOUT,)
    assert "did not answer within 0.3 seconds" in done.text
    assert searxng.url not in done.text
    assert "127.0.0.1" not in done.text
    assert str(searxng.port) not in done.text
    health = await client.probe(deadline=0.3)
    assert health.problem is not None
    assert searxng.url in health.problem


async def test_searxng_not_running_does_not_name_its_address(
    searxng_http: httpx.AsyncClient,
) -> None:
    with refusing_url() as nowhere:
        client = SearxngClient(searxng_http, nowhere, timeout=2.0)
        done = await search_once(
            {"query": "kettle"},
            client=client,
            ledger=Ledger(),
            budgets=BudgetCounter({SEARCHES: 16, PAGES: 12}),
        )
        health = await client.probe(deadline=1.0)
    assert done.failures == (FailureCause.UNREACHABLE,)
    assert "cannot be reached" in done.text
    assert nowhere not in done.text
    assert "127.0.0.1" not in done.text
    assert health.problem is not None
    assert nowhere in health.problem
