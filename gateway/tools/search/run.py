"""One web_search call, run: read, charge, search concurrently, merge, write (SPEC 6).

The doing half of web_search; every decision is in ``gateway.tools.search.rules`` and
``gateway.tools.search.text``. A call's SearXNG requests (each query and each angle) run
concurrently; :func:`web_search` yields the ``searched`` event, then the call's
`~gateway.tools.base.ToolResult`, never an exception (except ``CancelledError`` when the
caller is cancelled, which cancels every request).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from gateway import prompts
from gateway.metrics import GatewayMetrics
from gateway.tools.base import ToolItem, ToolOutcome, ToolResult
from gateway.tools.ledger import BudgetCounter, Ledger
from gateway.tools.search.answer import SearchFailure
from gateway.tools.search.rules import BUDGET, ArgumentProblem, charge, plan, read_arguments
from gateway.tools.search.searxng import SearxngClient
from gateway.tools.search.text import merge, refused_event, searched_event, tool_text

#: A widened query shows up to this many times the configured results: the angles add as
#: many as the query's own words, so a round of widened queries still fits a small context.
WIDENED_RESULTS_FACTOR = 2


async def web_search(
    arguments: Mapping[str, Any],
    *,
    client: SearxngClient,
    ledger: Ledger,
    budgets: BudgetCounter,
    metrics: GatewayMetrics,
) -> AsyncGenerator[ToolItem, None]:
    """Run one web_search call against SearXNG: one ``searched`` event (unless the
    arguments could not be searched), then the result.

    The outcome is ``ok`` when SearXNG answered at least once, ``error`` for bad
    arguments or no search answered, ``refused`` when the budget was spent.

    Args:
        arguments: The call's arguments (already known to be a JSON object).
        client: The SearXNG client.
        ledger: The answer's ledger; every result shown gets its number there.
        budgets: The answer's budgets; each query searched takes one search.
        metrics: Where each SearXNG request that failed is counted by its cause.
    """
    call = read_arguments(arguments)
    if isinstance(call, ArgumentProblem):
        yield ToolResult(call.message, ToolOutcome.ERROR)
        return
    charged = charge(call, budgets)
    if not charged.searched:
        yield refused_event(call)
        yield ToolResult(
            prompts.SEARCH_BUDGET_SPENT.format(limit=budgets.limit(BUDGET)), ToolOutcome.REFUSED
        )
        return
    planned = plan(charged.searched, call.kind)
    time_range = None if call.time_range is None else call.time_range.value
    answers = await asyncio.gather(
        *(client.search(search.text, time_range=time_range) for search in planned)
    )
    cap = client.results_per_query * (WIDENED_RESULTS_FACTOR if call.kind else 1)
    results = [
        merge(
            query,
            [(p, a) for p, a in zip(planned, answers, strict=True) if p.query == query],
            cap=cap,
        )
        for query in charged.searched
    ]
    text, shown = tool_text(call, charged, results, ledger)
    for answer in answers:
        if isinstance(answer, SearchFailure):
            metrics.searxng_errors.labels(answer.cause.value).inc()
    yield searched_event(call, charged, results, shown)
    answered = any(r.answered for r in results)
    yield ToolResult(text, ToolOutcome.OK if answered else ToolOutcome.ERROR)
