"""One web_search call, run: read, charge, search concurrently, merge, write (SPEC 6).

The doing half of web_search; every decision is in ``gateway.tools.search.rules`` and
``gateway.tools.search.text``. A call's SearXNG requests (each query and each angle) run
concurrently; the result is a :class:`SearchDone` value, never an exception (except
``CancelledError`` when the caller is cancelled, which cancels every request).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gateway import prompts
from gateway.tools.events import Searched
from gateway.tools.ledger import BudgetCounter, Ledger
from gateway.tools.search.answer import FailureCause, SearchFailure
from gateway.tools.search.rules import ArgumentProblem, charge, plan, read_arguments
from gateway.tools.search.searxng import SearxngClient
from gateway.tools.search.text import merge, refused_event, searched_event, tool_text

#: A widened query shows up to this many times the configured results: the angles add as
#: many as the query's own words, so a round of widened queries still fits a small context.
WIDENED_RESULTS_FACTOR = 2

Outcome = Literal["ok", "error", "refused"]


@dataclass(frozen=True)
class SearchDone:
    """What one call gives back.

    Attributes:
        text: The tool message (the loop adds the budget trailer).
        event: The ``searched`` event, or None when the arguments could not be searched.
        outcome: The tool-call metric label: ``ok`` (SearXNG answered at least once),
            ``error`` (bad arguments, or no search got an answer), ``refused`` (budget).
        failures: The cause of each SearXNG request that failed (the SearXNG-errors
            metric counts them).
    """

    text: str
    event: Searched | None
    outcome: Outcome
    failures: tuple[FailureCause, ...] = ()


async def web_search(
    arguments: Mapping[str, Any],
    *,
    client: SearxngClient,
    ledger: Ledger,
    budgets: BudgetCounter,
) -> SearchDone:
    """Run one web_search call against SearXNG.

    Args:
        arguments: The call's arguments (already known to be a JSON object).
        client: The SearXNG client.
        ledger: The answer's ledger; every result shown gets its number there.
        budgets: The answer's budgets; each query searched takes one search.
    """
    call = read_arguments(arguments)
    if isinstance(call, ArgumentProblem):
        return SearchDone(call.message, None, "error")
    charged = charge(call, budgets)
    if not charged.searched:
        return SearchDone(
            prompts.SEARCH_BUDGET_SPENT.format(limit=budgets.searches_limit),
            refused_event(call),
            "refused",
        )
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
    failures = tuple(a.cause for a in answers if isinstance(a, SearchFailure))
    return SearchDone(
        text=text,
        event=searched_event(call, charged, results, shown),
        outcome="ok" if any(r.answered for r in results) else "error",
        failures=failures,
    )
