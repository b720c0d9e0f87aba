"""The page budget's refusals agree with the trailer (issue 22, finding 5).

Reads running at the same time reserve their pages before they run, so with five reads in
one round two hold the whole budget of 12 and three are refused. Those three must not say
"The page budget is spent (12 pages read)" while the trailer of the same round counts the
pages read, which is far fewer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from fetcher.client import FetcherClient
from gateway import prompts
from gateway.api.messages import parse_message
from gateway.engine.client import EngineClient
from gateway.loop.turn import ChatTurn, LoopOptions, RequiredMemory
from gateway.settings import Budgets, EngineSettings
from gateway.stream.events import ToolEvent
from gateway.tools.base import ToolBox
from gateway.tools.events import Read
from gateway.tools.fetch.addresses import hosts_in_text
from gateway.tools.fetch.rules import page_refusal, plan_fetch, settle
from gateway.tools.ledger import PAGES, SEARCHES, BudgetCounter, Ledger
from gateway.tools.research import FetchPages
from testkit.engine import FakeEngine, text_reply, tool_reply
from testkit.origin import Origin, html

SITE_PAGES = 5


@pytest.fixture
async def engine() -> AsyncIterator[FakeEngine]:
    async with FakeEngine() as fake:
        yield fake


@pytest.fixture
async def engine_client() -> AsyncIterator[EngineClient]:
    async with httpx.AsyncClient(trust_env=False) as http:
        client = EngineClient(http)
        yield client
        client.close()


def tool_messages(chat: dict[str, Any]) -> list[str]:
    return [m["content"] for m in chat["messages"] if m["role"] == "tool"]


async def test_five_reads_in_one_round_past_the_budget_agree_with_the_trailer(
    origin: Origin,
    fetcher_client: FetcherClient,
    engine: FakeEngine,
    engine_client: EngineClient,
) -> None:
    urls = [origin.url(f"/p{i}") for i in range(SITE_PAGES)]
    for i in range(SITE_PAGES):
        origin.routes[f"/p{i}"] = html(
            f"<html><head><title>P{i}</title></head><body><p>Page {i}.</p></body></html>"
        )
    question = {"role": "user", "content": "Read " + " ".join(urls)}
    engine.script(
        tool_reply(*[("fetch_page_content_recursive", json.dumps({"url": u})) for u in urls]),
        text_reply("Done."),
    )
    turn = ChatTurn(
        client=engine_client,
        engine=EngineSettings(engine.url),
        messages=[parse_message(question, 0)],
        fields={"model": "test-model", "messages": [question]},
        tools=ToolBox([FetchPages([fetcher_client], deadline=10.0)]),
        memory=RequiredMemory(),
        options=LoopOptions(budgets=Budgets(searches=16, pages=12), tool_timeout=10.0),
    )
    events = [event async for event in turn.events()]
    results = tool_messages(engine.chats[1])
    assert len(results) == SITE_PAGES
    # The page's read events say held too, never spent, for the three refused reads.
    reads = [e.event for e in events if isinstance(e, ToolEvent) and isinstance(e.event, Read)]
    unread = [read.reason for read in reads if not read.ok]
    assert unread == ["budget_held"] * 3
    read = [r for r in results if "Page " in r]
    refused = [r for r in results if r not in read]
    assert len(read) == 2
    assert len(refused) == 3
    trailer = "Searches used 0 of 16; pages read 2 of 12"
    assert all(r.endswith(f"\n{trailer}") for r in results)
    for text in refused:
        assert text == f"{prompts.PAGE_BUDGET_HELD.format(limit=12)}\n{trailer}"
        assert "spent" not in text


def test_a_refusal_says_spent_only_when_the_pages_were_read() -> None:
    ledger, budgets = Ledger(), BudgetCounter({SEARCHES: 16, PAGES: 12})
    user = tuple(hosts_in_text("https://a.example/ https://b.example/ https://c.example/"))
    first = plan_fetch("https://a.example/", ledger=ledger, budgets=budgets, user_hosts=user)
    second = plan_fetch("https://b.example/", ledger=ledger, budgets=budgets, user_hosts=user)
    assert first is not None
    assert second is not None
    assert (
        plan_fetch(
            "https://c.example/",
            ledger=ledger,
            budgets=budgets,
            user_hosts=user,
        )
        is None
    )
    # Held by reads still running: not spent, and the trailer counts no page yet.
    assert page_refusal(budgets) == prompts.PAGE_BUDGET_HELD.format(limit=12)
    assert budgets.trailer().endswith("pages read 0 of 12")
    settle(budgets, first, 6)
    assert page_refusal(budgets) == prompts.PAGE_BUDGET_HELD.format(limit=12)
    assert budgets.trailer().endswith("pages read 6 of 12")
    settle(budgets, second, 6)
    # Every page read: now the refusal and the trailer both say 12.
    assert page_refusal(
        budgets
    ) == "The page budget is spent (12 pages read); nothing was read." + (
        " Answer from what you have."
    )
    assert budgets.trailer().endswith("pages read 12 of 12")


def test_a_read_that_read_fewer_gives_the_rest_back() -> None:
    ledger, budgets = Ledger(), BudgetCounter({SEARCHES: 16, PAGES: 12})
    plan = plan_fetch(
        "https://a.example/", ledger=ledger, budgets=budgets, user_hosts=("a.example",)
    )
    assert plan is not None
    assert budgets.held(PAGES) == 6
    settle(budgets, plan, 2)
    assert (budgets.taken(PAGES), budgets.held(PAGES), budgets.spent(PAGES)) == (2, 0, 2)
    assert budgets.left(PAGES) == 10
