"""The fetch tool against the fetcher's real gRPC service reading a local HTTPS site."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable
from typing import Any

from fetcher.client import FetcherClient
from fetcher.net.policy import Policy
from gateway import prompts
from gateway.tools.base import ToolOutcome, ToolResult
from gateway.tools.events import Read
from gateway.tools.fetch.addresses import hosts_in_text
from gateway.tools.fetch.run import fetch_page
from gateway.tools.ledger import PAGES, SEARCHES, BudgetCounter, Found, Ledger
from testkit.origin import Origin, Reply, Request, html
from tests.support.fetcher_service import FetcherService, running_fetcher, socket_folder


def page(title: str, *links: str, body: str = "") -> Reply:
    anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    return html(
        f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1>"
        f"<p>{body or 'Text of ' + title}.</p><ul>{anchors}</ul></main></body></html>"
    )


def small_site(origin: Origin) -> None:
    origin.routes["/"] = page("Start", "/a", "/b", body="The start page of a small test site")
    origin.routes["/a"] = page("Page A")
    origin.routes["/b"] = page("Page B")


def gated(gate: asyncio.Event, reply: Reply) -> Callable[[Request], Any]:
    async def handler(_: Request) -> Reply:
        await gate.wait()
        return reply

    return handler


async def run(
    client: FetcherClient,
    url: str,
    *,
    ledger: Ledger,
    budgets: BudgetCounter,
    user_hosts: tuple[str, ...] = (),
    deadline: float | None = None,
    on_event: Callable[[Read], None] | None = None,
) -> tuple[list[Read], ToolResult]:
    events: list[Read] = []
    done: ToolResult | None = None
    stream = fetch_page(
        {"url": url},
        fetchers=[client],
        ledger=ledger,
        budgets=budgets,
        user_hosts=user_hosts,
        request_id="test-1",
        deadline=deadline,
    )
    async with contextlib.aclosing(stream):
        async for item in stream:
            assert done is None  # the result is the last item
            if isinstance(item, Read):
                events.append(item)
                if on_event is not None:
                    on_event(item)
            else:
                assert isinstance(item, ToolResult)
                done = item
    assert done is not None
    return events, done


async def eventually(condition: Callable[[], bool], within: float = 5.0) -> None:
    for _ in range(int(within / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


async def test_a_page_from_the_search_results_is_read_numbered_and_labelled(
    origin: Origin, fetcher_client: FetcherClient
) -> None:
    small_site(origin)
    ledger = Ledger()
    assert ledger.add(origin.url("/"), "Start (search result)", found=Found.SEARCH) == 1
    budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
    events, done = await run(fetcher_client, origin.url("/"), ledger=ledger, budgets=budgets)
    assert done.outcome == "ok"
    assert len([e for e in events if e.ok]) == 3
    assert budgets.taken(PAGES) == 3
    assert sorted(e.title for e in events) == ["Page A", "Page B", "Start"]
    assert all(e.ok for e in events)
    blocks = done.text.split("\n\n")
    assert blocks[0].splitlines()[:2] == [
        prompts.PAGE_LABEL.format(address=origin.url("/")),
        f"[1] Start — {origin.url('/')}",
    ]
    assert "The start page of a small test site" in blocks[0]
    numbers = {s.url: s.n for s in ledger.sources()}
    assert numbers[origin.url("/a")] == 2  # the report's order, not the finishing order
    assert f"[2] Page A — {origin.url('/a')}" in done.text


async def test_read_events_arrive_while_the_crawl_is_still_running(
    origin: Origin, fetcher_client: FetcherClient
) -> None:
    small_site(origin)
    gate = asyncio.Event()
    # Page B answers only once the first read event has reached the caller: if events
    # were sent at the end of the crawl, B would never be read.
    origin.routes["/b"] = gated(gate, page("Page B"))
    ledger = Ledger()
    ledger.add(origin.url("/"), found=Found.SEARCH)
    events, _ = await run(
        fetcher_client,
        origin.url("/"),
        ledger=ledger,
        budgets=BudgetCounter({SEARCHES: 16, PAGES: 12}),
        on_event=lambda _: gate.set(),
    )
    assert events[0].title == "Start"
    assert "Page B" in [e.title for e in events]
    assert len([e for e in events if e.ok]) == 3


async def test_host_outside_the_answer_is_refused(
    origin: Origin, fetcher_service: FetcherService, fetcher_client: FetcherClient
) -> None:
    small_site(origin)
    ledger = Ledger()
    ledger.add("https://somewhere-else.example/found", found=Found.SEARCH)
    budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
    events, done = await run(fetcher_client, origin.url("/"), ledger=ledger, budgets=budgets)
    assert [(e.ok, e.reason) for e in events] == [(False, "not_in_answer")]
    assert done.text == prompts.FIRST_PAGE_NOT_READ.format(
        url=origin.url("/"), reason="not in this answer's search results"
    )
    assert done.outcome == "refused"
    assert budgets.taken(PAGES) == 0
    assert origin.requests == []
    assert [(r["outcome"], r["reason"]) for r in fetcher_service.records()] == [
        ("refused", "not_in_answer")
    ]


async def test_an_address_the_user_wrote_may_be_read(
    origin: Origin, fetcher_client: FetcherClient
) -> None:
    small_site(origin)
    events, done = await run(
        fetcher_client,
        origin.url("/a"),
        ledger=Ledger(),
        budgets=BudgetCounter({SEARCHES: 16, PAGES: 12}),
        user_hosts=tuple(hosts_in_text(f"Please summarise {origin.url('/a')}.")),
    )
    assert done.outcome == "ok"
    assert events[0].title == "Page A"


async def test_a_page_that_fails_is_one_line_with_its_reason(
    origin: Origin, fetcher_client: FetcherClient
) -> None:
    origin.routes["/"] = page("Start", "/missing", "/a")
    origin.routes["/a"] = page("Page A")
    ledger = Ledger()
    ledger.add(origin.url("/"), found=Found.SEARCH)
    events, done = await run(
        fetcher_client,
        origin.url("/"),
        ledger=ledger,
        budgets=BudgetCounter({SEARCHES: 16, PAGES: 12}),
    )
    assert done.outcome == "ok"
    assert (False, "http_status") in [(e.ok, e.reason) for e in events]
    assert done.text.endswith(
        f"Not read: {origin.url('/missing')} — the server answered with an error status."
    )
    assert origin.url("/missing") not in [s.url for s in ledger.sources()]


async def test_a_host_that_is_not_public_is_refused_even_when_allowed(
    origin: Origin, fetcher_client: FetcherClient
) -> None:
    address = f"https://private.test:{origin.port}/"
    ledger = Ledger()
    ledger.add(address, found=Found.SEARCH)
    _, done = await run(
        fetcher_client, address, ledger=ledger, budgets=BudgetCounter({SEARCHES: 16, PAGES: 12})
    )
    assert done.outcome == "refused"
    assert done.text == prompts.FIRST_PAGE_NOT_READ.format(
        url=address, reason="the address is not on the public internet"
    )


async def test_the_page_budget_limits_the_crawl_and_then_refuses(
    origin: Origin, fetcher_client: FetcherClient
) -> None:
    small_site(origin)
    ledger = Ledger()
    ledger.add(origin.url("/"), found=Found.SEARCH)
    budgets = BudgetCounter({SEARCHES: 16, PAGES: 2})
    events, done = await run(fetcher_client, origin.url("/"), ledger=ledger, budgets=budgets)
    assert len([e for e in events if e.ok]) == 2
    assert budgets.taken(PAGES) == 2
    events, done = await run(fetcher_client, origin.url("/a"), ledger=ledger, budgets=budgets)
    # No page was read: the one event says why.
    assert events == [Read(origin.url("/a"), origin.url("/a"), "", ok=False, reason="budget")]
    assert done == ToolResult(prompts.PAGE_BUDGET_SPENT.format(limit=2), ToolOutcome.REFUSED)


async def test_a_missing_socket_is_a_clear_result_at_once() -> None:
    with socket_folder() as folder:
        async with FetcherClient(f"unix:{folder / 'absent.sock'}", timeout=5) as client:
            budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
            ledger = Ledger()
            ledger.add("https://a.example/", found=Found.SEARCH)
            events, done = await run(client, "https://a.example/", ledger=ledger, budgets=budgets)
    assert events == [
        Read("https://a.example/", "https://a.example/", "", ok=False, reason="unavailable")
    ]
    assert done.text == prompts.FETCH_UNAVAILABLE.format(url="https://a.example/")
    assert done.outcome == "error"
    assert budgets.taken(PAGES) == 0


async def test_the_fetcher_killed_mid_read_is_a_clear_result(
    origin: Origin, fetcher_service: FetcherService, fetcher_client: FetcherClient
) -> None:
    origin.routes["/"] = gated(asyncio.Event(), page("Never"))
    ledger = Ledger()
    ledger.add(origin.url("/"), found=Found.SEARCH)
    budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
    task = asyncio.create_task(run(fetcher_client, origin.url("/"), ledger=ledger, budgets=budgets))
    await eventually(lambda: len(origin.requests) == 1)
    await fetcher_service.kill()
    events, done = await task
    assert [(e.ok, e.reason) for e in events] == [(False, "unavailable")]
    assert done.outcome == "error"
    assert origin.url("/") in done.text
    assert budgets.taken(PAGES) == 0


async def test_a_read_past_its_deadline_ends_with_a_clear_result(
    origin: Origin, fetcher_client: FetcherClient
) -> None:
    origin.routes["/"] = gated(asyncio.Event(), page("Never"))
    ledger = Ledger()
    ledger.add(origin.url("/"), found=Found.SEARCH)
    events, done = await run(
        fetcher_client,
        origin.url("/"),
        ledger=ledger,
        budgets=BudgetCounter({SEARCHES: 16, PAGES: 12}),
        deadline=0.5,
    )
    # The fetcher fits the crawl into the deadline, so the page usually fails with
    # "timeout"; on a loaded machine the call's own deadline may pass first.
    assert done.outcome == "timeout"
    # Either the page's own event or, when the fetcher sent none, one saying why.
    assert [(e.url, e.ok, e.reason) for e in events] == [(origin.url("/"), False, "timeout")]
    assert done.text in (
        prompts.FIRST_PAGE_NOT_READ.format(url=origin.url("/"), reason="the page took too long"),
        prompts.FETCH_TIMEOUT.format(url=origin.url("/")),
    )


async def test_a_call_past_its_own_deadline_ends_with_the_timeout_line(
    origin: Origin, fetcher_client: FetcherClient
) -> None:
    origin.routes["/"] = page("Start")
    ledger = Ledger()
    ledger.add(origin.url("/"), found=Found.SEARCH)
    budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
    # Shorter than the fetcher's margin: it answers DEADLINE_EXCEEDED without reading.
    events, done = await run(
        fetcher_client, origin.url("/"), ledger=ledger, budgets=budgets, deadline=0.01
    )
    assert events == [Read(origin.url("/"), origin.url("/"), "", ok=False, reason="timeout")]
    assert done.outcome == "timeout"
    assert done.text == prompts.FETCH_TIMEOUT.format(url=origin.url("/"))
    assert budgets.taken(PAGES) == 0


async def test_a_busy_fetcher_is_a_clear_result(
    origin: Origin, test_policy: Policy, client_ssl_context: ssl.SSLContext
) -> None:
    gate = asyncio.Event()
    origin.routes["/"] = gated(gate, page("Start"))
    ledger = Ledger()
    ledger.add(origin.url("/"), found=Found.SEARCH)
    with socket_folder() as folder:
        async with (
            running_fetcher(
                folder, policy=test_policy, ssl_context=client_ssl_context, max_concurrent_reads=1
            ) as service,
            service.client(timeout=10) as client,
        ):
            held = asyncio.create_task(
                run(
                    client,
                    origin.url("/"),
                    ledger=ledger,
                    budgets=BudgetCounter({SEARCHES: 16, PAGES: 12}),
                )
            )
            await eventually(lambda: len(origin.requests) == 1)
            budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
            events, done = await run(client, origin.url("/"), ledger=ledger, budgets=budgets)
            gate.set()
            _, first = await held
    assert [(e.ok, e.reason) for e in events] == [(False, "busy")]
    assert done.text == prompts.FETCH_BUSY.format(url=origin.url("/"), scope="answer")
    assert budgets.taken(PAGES) == 0
    assert first.outcome == "ok"


async def test_leaving_early_cancels_the_read_on_the_fetcher(
    origin: Origin, fetcher_service: FetcherService, fetcher_client: FetcherClient
) -> None:
    origin.routes["/"] = page("Start", "/slow")
    origin.routes["/slow"] = gated(asyncio.Event(), page("Slow"))
    ledger = Ledger()
    ledger.add(origin.url("/"), found=Found.SEARCH)
    budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
    stream = fetch_page(
        {"url": origin.url("/")},
        fetchers=[fetcher_client],
        ledger=ledger,
        budgets=budgets,
        user_hosts=(),
    )
    async with contextlib.aclosing(stream):
        first = await anext(stream)
        assert isinstance(first, Read)
        assert first.title == "Start"
    await eventually(
        lambda: (
            fetcher_service.metric(
                "tigress_fetcher_grpc_handled", {"method": "ReadStream", "code": "CANCELLED"}
            )
            == 1
        )
    )
    assert fetcher_service.server.servicer.in_flight == 0
    assert budgets.taken(PAGES) == 1  # the page read before leaving is charged
