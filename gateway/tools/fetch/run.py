"""One fetch_page_content_recursive call, run through the fetcher's streaming RPC (SPEC 7).

The doing half of the fetch tool; the decisions are in ``gateway.tools.fetch.rules``.
:func:`fetch_page` yields a :class:`~gateway.tools.events.Read` event as soon as the
fetcher finishes each page (so the client sees ``read`` events while the crawl runs),
then one :class:`FetchDone` with the tool text. The fetcher being down, busy or past the
deadline ends in a :class:`FetchDone` too, never an exception; closing the iterator
early (the client went away) cancels the read on the fetcher's side. A read that reached
no page (no event) carries the event saying why in `FetchDone.unread`, for the caller
to send once it does not try another fetcher.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any, cast

from fetcher.client import FetcherClient, FetcherClientError, PageFailed, PageRead, Report
from gateway import prompts
from gateway.tools.events import Read
from gateway.tools.fetch.rules import (
    Outcome,
    ReadProblem,
    outcome,
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


@dataclass(frozen=True)
class FetchDone:
    """What one call gives back, after its ``read`` events.

    Attributes:
        text: The tool message (the loop adds the budget trailer).
        outcome: The tool-call metric label (``ok``, ``error``, ``refused``, ``timeout``).
        pages_read: Pages read, as charged to the budget.
        problem: Why the read ended without a report, if it did.
        unread: For a read that yielded no event: the ``read`` event saying why
            (`gateway.tools.fetch.rules.unread_event`), else None.
    """

    text: str
    outcome: Outcome
    pages_read: int = 0
    problem: ReadProblem | None = None
    unread: Read | None = None


async def fetch_page(
    arguments: Mapping[str, Any],
    *,
    client: FetcherClient,
    ledger: Ledger,
    budgets: BudgetCounter,
    user_text: str,
    request_id: str = "",
    deadline: float | None = None,
    scope: prompts.Scope = prompts.Scope.ANSWER,
) -> AsyncGenerator[Read | FetchDone, None]:
    """Run one call: one ``Read`` event per page as it is done, then ``FetchDone``.

    Use it under ``contextlib.aclosing`` so that leaving early closes the RPC at once.

    Args:
        arguments: The call's arguments (already known to be a JSON object).
        client: The fetcher client.
        ledger: The answer's ledger: its hosts are allowed, and every page read gets its
            number there.
        budgets: The answer's budgets: the pages left are the page limit; the budget is
            charged for the pages read.
        user_text: The user's messages (the hosts of their addresses are allowed).
        request_id: Ties the fetcher's log records to this request (``[A-Za-z0-9._:-]``).
        deadline: Seconds the read may take (the client's default when None).
        scope: What the ledger and budgets belong to (an answer, or an MCP session), for
            the words of the tool text.
    """
    url = read_url(arguments, scope)
    if isinstance(url, ArgumentProblem):
        yield FetchDone(url.message, "error")
        return
    plan = plan_fetch(url, ledger=ledger, budgets=budgets, user_text=user_text)
    if plan is None:
        yield FetchDone(
            prompts.PAGE_BUDGET_SPENT.format(limit=budgets.pages_limit),
            "refused",
            problem=ReadProblem.BUDGET,
            unread=unread_event(url, ReadProblem.BUDGET),
        )
        return
    pages: list[PageRead] = []
    failures: list[PageFailed] = []
    report: Report | None = None
    problem: ReadProblem | None = None
    detail = ""
    try:
        # read_stream is an async generator: closing it cancels the RPC at once.
        stream = cast(
            AsyncGenerator[PageRead | PageFailed | Report, None],
            client.read_stream(
                plan.url,
                allowed_hosts=plan.allowed_hosts,
                page_limit=plan.page_limit,
                request_id=request_id,
                deadline=deadline,
            ),
        )
        async with contextlib.aclosing(stream):
            async for item in stream:
                if isinstance(item, Report):
                    report = item
                    continue
                if isinstance(item, PageRead):
                    pages.append(item)
                else:
                    failures.append(item)
                yield read_event(item)
    except FetcherClientError as exc:
        problem, detail = problem_of(exc), exc.details or str(exc)
    finally:
        settle(budgets, plan, len(pages))
    if report is not None:
        # The report's order (breadth first, as found) numbers the sources, not the
        # order the pages happened to finish in.
        pages, failures = list(report.pages), list(report.failures)
    text = tool_text(plan.url, pages, failures, ledger, problem=problem, detail=detail, scope=scope)
    unread = None
    if problem is not None and not pages and not failures:
        unread = unread_event(plan.url, problem)
    yield FetchDone(text, outcome(pages, failures, problem), len(pages), problem, unread)
