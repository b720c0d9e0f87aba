"""One fetch_page_content_recursive call, run through the fetcher's streaming RPC (SPEC 7).

The doing half of the fetch tool; the decisions are in ``gateway.tools.fetch.rules``.
:func:`fetch_page` yields a :class:`~gateway.tools.events.Read` event as soon as the
fetcher finishes each page (so the client sees ``read`` events while the crawl runs),
then the call's `~gateway.tools.base.ToolResult`. The fetcher being down, busy or past
the deadline ends in a result too, never an exception; closing the generator early (the
client went away) cancels the read on the fetcher's side.

With several fetchers, a read that finds its fetcher unavailable or busy before any page
is tried on the next one, each at most once; a read that reached no page at all ends with
one ``read`` event saying why (`gateway.tools.fetch.rules.unread_event`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fetcher.client import FetcherClient, FetcherClientError, PageFailed, PageRead, Report
from gateway import prompts
from gateway.tools.base import ToolItem, ToolOutcome, ToolResult
from gateway.tools.events import Read
from gateway.tools.fetch.rules import (
    FetchPlan,
    ReadProblem,
    outcome,
    page_refusal,
    page_refusal_problem,
    plan_fetch,
    problem_of,
    read_event,
    read_url,
    settle,
    tool_text,
    unread_event,
)
from gateway.tools.ledger import BudgetCounter, Ledger
from gateway.tools.search.rules import ArgumentProblem

#: Problems after which a read is tried on the next fetcher (nothing was read yet).
TRY_NEXT = frozenset({ReadProblem.UNAVAILABLE, ReadProblem.BUSY})


@dataclass
class _Crawl:
    """What one fetcher's stream gave, gathered while its events are passed on."""

    pages: list[PageRead] = field(default_factory=list)
    failures: list[PageFailed] = field(default_factory=list)
    report: Report | None = None
    problem: ReadProblem | None = None
    detail: str = ""


async def fetch_page(
    arguments: Mapping[str, Any],
    *,
    fetchers: Sequence[FetcherClient],
    ledger: Ledger,
    budgets: BudgetCounter,
    user_hosts: tuple[str, ...],
    request_id: str = "",
    deadline: float | None = None,
    scope: prompts.Scope = prompts.Scope.ANSWER,
) -> AsyncGenerator[ToolItem, None]:
    """Run one call: one ``Read`` event per page as it is done, then the result.

    Use it under ``contextlib.aclosing`` so that leaving early closes the RPC at once.

    Args:
        arguments: The call's arguments (already known to be a JSON object).
        fetchers: The fetcher clients to try, in order (at least one).
        ledger: The answer's ledger: its hosts are allowed, and every page read gets its
            number there.
        budgets: The answer's budgets: the pages left are the page limit; the budget is
            charged for the pages read.
        user_hosts: The hosts of the addresses in the user's messages (allowed).
        request_id: Ties the fetcher's log records to this request (``[A-Za-z0-9._:-]``).
        deadline: Seconds the read may take, every try together (the client's default
            for each try when None).
        scope: What the ledger and budgets belong to (an answer, or an MCP session), for
            the words of the tool text.
    """
    url = read_url(arguments, scope)
    if isinstance(url, ArgumentProblem):
        yield ToolResult(url.message, ToolOutcome.ERROR)
        return
    plan = plan_fetch(url, ledger=ledger, budgets=budgets, user_hosts=user_hosts)
    if plan is None:
        yield unread_event(url, page_refusal_problem(budgets))
        yield ToolResult(page_refusal(budgets), ToolOutcome.REFUSED)
        return
    clock = asyncio.get_running_loop().time
    ends = None if deadline is None else clock() + deadline
    crawl = _Crawl()
    try:
        for tries, client in enumerate(fetchers, start=1):
            left = None if ends is None else ends - clock()
            if tries > 1 and left is not None and left <= 0:
                break  # no time for another fetcher: the last one's answer stands
            crawl = _Crawl()
            async with contextlib.aclosing(_read(client, plan, crawl, request_id, left)) as reads:
                async for event in reads:
                    yield event
            if crawl.pages or crawl.failures or crawl.problem not in TRY_NEXT:
                break
    finally:
        settle(budgets, plan, len(crawl.pages))
    pages, failures, problem = crawl.pages, crawl.failures, crawl.problem
    if crawl.report is not None:
        # The report's order (breadth first, as found) numbers the sources, not the
        # order the pages happened to finish in.
        pages, failures = list(crawl.report.pages), list(crawl.report.failures)
    text = tool_text(
        plan.url, pages, failures, ledger, problem=problem, detail=crawl.detail, scope=scope
    )
    if problem is not None and not pages and not failures:
        yield unread_event(plan.url, problem)  # no page was read: say why
    yield ToolResult(text, outcome(pages, failures, problem))


async def _read(
    client: FetcherClient, plan: FetchPlan, crawl: _Crawl, request_id: str, left: float | None
) -> AsyncGenerator[Read, None]:
    """One try on one fetcher: its events, with what it gave gathered in ``crawl``."""
    stream = client.read_stream(
        plan.url,
        allowed_hosts=plan.allowed_hosts,
        page_limit=plan.page_limit,
        request_id=request_id,
        deadline=None if left is None else max(left, 0.001),
    )
    try:
        # read_stream is an async generator: closing it cancels the RPC at once.
        async with contextlib.aclosing(stream):
            async for item in stream:
                if isinstance(item, Report):
                    crawl.report = item
                    continue
                if isinstance(item, PageRead):
                    crawl.pages.append(item)
                else:
                    crawl.failures.append(item)
                yield read_event(item)
    except FetcherClientError as exc:
        crawl.problem, crawl.detail = problem_of(exc), exc.details or str(exc)
