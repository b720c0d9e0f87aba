"""One web_search call run to its end, as the search tests read it: what it yielded (the
event, then the result) and the SearXNG failures it counted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from gateway.metrics import GatewayMetrics
from gateway.tools.base import ToolOutcome, ToolResult
from gateway.tools.events import Searched
from gateway.tools.ledger import PAGES, SEARCHES, BudgetCounter, Ledger
from gateway.tools.search.answer import FailureCause
from gateway.tools.search.run import web_search
from gateway.tools.search.searxng import SearxngClient


@dataclass(frozen=True)
class Searching:
    """What one call gave: its result's text and outcome, its event, its failures."""

    text: str
    outcome: ToolOutcome
    event: Searched | None = None
    #: The SearXNG-errors metric's counts, as causes in `FailureCause` order.
    failures: tuple[FailureCause, ...] = ()


async def search_once(
    arguments: Mapping[str, Any],
    *,
    client: SearxngClient,
    ledger: Ledger | None = None,
    budgets: BudgetCounter | None = None,
) -> Searching:
    metrics = GatewayMetrics(CollectorRegistry())
    items = [
        item
        async for item in web_search(
            arguments,
            client=client,
            ledger=ledger or Ledger(),
            budgets=budgets or BudgetCounter({SEARCHES: 16, PAGES: 12}),
            metrics=metrics,
        )
    ]
    *events, result = items
    assert isinstance(result, ToolResult)
    assert len(events) <= 1
    event = events[0] if events else None
    assert event is None or isinstance(event, Searched)
    return Searching(result.text, result.outcome, event, _failures(metrics))


def _failures(metrics: GatewayMetrics) -> tuple[FailureCause, ...]:
    def count(cause: FailureCause) -> int:
        value = metrics.registry.get_sample_value(
            "tigress_gateway_searxng_errors_total", {"cause": cause.value}
        )
        return int(value or 0)

    return tuple(cause for cause in FailureCause for _ in range(count(cause)))
