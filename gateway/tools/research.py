"""The two research tools on the tool seam (`gateway.tools.base`): web_search and the page reader.

`WebSearch` runs one ``web_search`` call through SearXNG (`gateway.tools.search.run`) and
`FetchPages` one ``fetch_page_content_recursive`` call through the fetcher's streaming RPC
(`gateway.tools.fetch.run`). Both take their clients in the constructor and keep nothing of
one answer: everything an answer owns (ledger, budgets, the user's words) comes in the
`gateway.tools.base.ToolContext` of each call, so one instance serves every chat of the
process (and every MCP session). The composition root (`gateway.app`) builds the clients
and closes them.

Deadlines: a tool's own deadlines are fitted inside the loop's tool timeout
(`fit_inside`), so a slow SearXNG or fetcher ends in a clear tool result of its own
("did not answer within", "took too long") rather than the loop's generic timeout.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from fetcher.client import FetcherClient
from gateway.metrics import GatewayMetrics
from gateway.tools.base import ToolContext, ToolItem
from gateway.tools.fetch import rules as fetch_rules
from gateway.tools.fetch.run import fetch_page
from gateway.tools.ledger import BudgetKind
from gateway.tools.search import rules as search_rules
from gateway.tools.search.run import web_search
from gateway.tools.search.searxng import SearxngClient

#: Seconds kept back from the loop's tool timeout for the tool to write its result.
TOOL_MARGIN = 1.0


def fit_inside(wanted: float, tool_timeout: float) -> float:
    """A tool's own deadline, at most ``wanted``, ending before the loop's tool timeout.

    Args:
        wanted: The deadline the tool would use on its own (seconds).
        tool_timeout: The loop's ``[timeouts] tool`` (seconds).

    Returns:
        ``wanted``, or less: :data:`TOOL_MARGIN` before the tool timeout (half of it when
        the timeout is shorter than twice the margin).
    """
    room = max(tool_timeout - TOOL_MARGIN, tool_timeout / 2)
    return min(wanted, room)


class WebSearch:
    """``web_search`` (SPEC 6) against one SearXNG instance."""

    name = search_rules.NAME
    schema: Mapping[str, Any] = search_rules.SCHEMA
    subject = "query"
    folded = frozenset({"query", "queries"})
    budget: BudgetKind = search_rules.BUDGET

    def __init__(self, client: SearxngClient, *, metrics: GatewayMetrics) -> None:
        """Args:
        client: The SearXNG client (its timeout already fitted inside the tool timeout).
        metrics: Where SearXNG failures are counted by cause.
        """
        self._client = client
        self._metrics = metrics

    def run(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> AsyncGenerator[ToolItem, None]:
        """Search: one ``searched`` event (unless the arguments could not be searched), then
        the result."""
        return web_search(
            arguments,
            client=self._client,
            ledger=context.ledger,
            budgets=context.budgets,
            metrics=self._metrics,
        )


class FetchPages:
    """``fetch_page_content_recursive`` (SPEC 7) through one or more fetchers.

    With several fetchers (``TIGRESS_FETCHER=a,b``), reads take them in turn; a read that
    finds its fetcher unavailable or busy before any page is tried on the next one,
    each at most once.
    """

    name = fetch_rules.NAME
    schema: Mapping[str, Any] = fetch_rules.SCHEMA
    subject = "url"
    folded: frozenset[str] = frozenset()
    budget: BudgetKind = fetch_rules.BUDGET

    def __init__(self, fetchers: Sequence[FetcherClient], *, deadline: float) -> None:
        """Args:
        fetchers: One client per fetcher target (at least one).
        deadline: Seconds one read may take, all tries together (fitted inside the
            loop's tool timeout).
        """
        if not fetchers:
            raise ValueError("FetchPages needs at least one fetcher client")
        self._fetchers = tuple(fetchers)
        self._turn = itertools.cycle(range(len(self._fetchers)))
        self._deadline = deadline

    def _order(self) -> list[FetcherClient]:
        first = next(self._turn)
        return [*self._fetchers[first:], *self._fetchers[:first]]

    def run(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> AsyncGenerator[ToolItem, None]:
        """Read: one ``read`` event per page as the fetcher finishes it, then the result.

        Closing this generator early (the client went away, the loop's timeout) closes
        the fetcher's stream, which cancels the read on the fetcher's side.
        """
        return fetch_page(
            arguments,
            fetchers=self._order(),
            ledger=context.ledger,
            budgets=context.budgets,
            user_hosts=context.user_hosts,
            request_id=context.request_id,
            deadline=self._deadline,
            scope=context.scope,
        )
