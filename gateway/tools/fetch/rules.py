"""fetch_page_content_recursive's rules (SPEC 7, gateway side). Pure: decides, never does I/O.

The schema and description are SPEC 7's, exactly. A call is read (:func:`read_url`),
planned (:func:`plan_fetch`: rule 1's allowed hosts, and the page limit reserved from the
page budget), and, once the fetcher has answered, written for the model
(:func:`tool_text`) from ``fetcher.client``'s report values; :func:`settle` gives back
the reserved pages that were not read, so the budget is charged for pages read only.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fetcher.client import (
    FetcherBusy,
    FetcherClientError,
    FetcherTimeout,
    FetcherUnavailable,
    PageFailed,
    PageRead,
    Reason,
)
from gateway import prompts
from gateway.tools.base import ToolOutcome
from gateway.tools.events import Read
from gateway.tools.fetch.addresses import allowed_hosts
from gateway.tools.ledger import PAGES, BudgetCounter, BudgetKind, Found, Ledger
from gateway.tools.search.answer import TITLE_CHARS, one_line
from gateway.tools.search.rules import ArgumentProblem

NAME = "fetch_page_content_recursive"
#: What a read spends: every page it reads (SPEC 8).
BUDGET: BudgetKind = PAGES
#: SPEC 7 step 9: one read reads at most 6 pages, whatever the budget left.
PAGES_PER_READ = 6
#: ``ReadRequest.url``'s bound in the gRPC contract (``fetcher.proto``).
MAX_URL_BYTES = 4096

#: The ``tools`` entry, exactly as SPEC 7 writes it.
SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": NAME,
        "description": prompts.FETCH_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": prompts.FETCH_URL_DESCRIPTION},
            },
            "required": ["url"],
        },
    },
}
#: The entry listed over MCP, where no user messages reach the gateway: rule 1 allows only
#: the hosts of the session's own search results, and the descriptions say so.
MCP_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": NAME,
        "description": prompts.FETCH_DESCRIPTION_MCP,
        "parameters": {
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": prompts.FETCH_URL_DESCRIPTION_MCP},
            },
            "required": ["url"],
        },
    },
}

#: Reasons that are refusals by a rule (the tool-call outcome ``refused``), not failures.
REFUSALS = frozenset(
    {
        Reason.SCHEME,
        Reason.PORT,
        Reason.USERINFO,
        Reason.MALFORMED,
        Reason.NOT_IN_ANSWER,
        Reason.NOT_PUBLIC,
        Reason.DENIED,
    }
)


class ReadProblem(enum.StrEnum):
    """Why a read gave no report: the fetcher client's errors, or a read not asked for
    because no page of the budget is left (spent, or held by other reads). The words are
    the ``reason`` of the ``read`` event of a read that reached no page (`unread_event`)."""

    UNAVAILABLE = "unavailable"  # not running, unreachable, shutting down
    BUSY = "busy"  # RESOURCE_EXHAUSTED: it runs its maximum of reads
    TIMEOUT = "timeout"  # the call's deadline passed
    FAILED = "failed"  # anything else (a bug on one side)
    BUDGET = "budget"  # the page budget was spent: the fetcher was not asked
    BUDGET_HELD = "budget_held"  # the rest is held by reads running at the same time


def read_url(
    arguments: Mapping[str, Any], scope: prompts.Scope = prompts.Scope.ANSWER
) -> str | ArgumentProblem:
    """The ``url`` argument, trimmed; a problem when there is none or it is too long."""
    url = arguments.get("url")
    if not isinstance(url, str) or not url.strip():
        return ArgumentProblem(prompts.FETCH_NO_URL.format(scope=scope))
    url = url.strip()
    if len(url.encode()) > MAX_URL_BYTES:
        return ArgumentProblem(prompts.FETCH_URL_TOO_LONG.format(most=MAX_URL_BYTES))
    return url


@dataclass(frozen=True)
class FetchPlan:
    """One read to ask the fetcher for.

    Attributes:
        url: The address the model asked for.
        allowed_hosts: Rule 1's hosts for this answer, sent with the request.
        page_limit: Pages reserved from the budget (at least 1), sent as the page limit.
    """

    url: str
    allowed_hosts: tuple[str, ...]
    page_limit: int


def plan_fetch(
    url: str, *, ledger: Ledger, budgets: BudgetCounter, user_hosts: tuple[str, ...]
) -> FetchPlan | None:
    """Reserve the pages of one read and name its allowed hosts.

    Returns:
        The plan, or None when no page is left (answer :func:`page_refusal` and read
        nothing). Reads running at the same time each reserve their own pages, so
        together they never pass the budget; :func:`settle` returns what was not read.

    # Security
    Rule 1 (SPEC 7): the allowed hosts are the hosts of this answer's search results
    (`Ledger.searched_urls`: not the pages read, nor where their redirects landed) and
    of the addresses in the user's messages, never anything the model wrote in its
    arguments. The fetcher enforces them. Proved by
    ``tests/gateway/tools/fetch/test_run.py::test_host_outside_the_answer_is_refused``
    and ``tests/e2e/test_research.py::test_a_redirect_elsewhere_does_not_widen_rule_1``.
    """
    reserved = budgets.reserve(BUDGET, min(PAGES_PER_READ, budgets.left(BUDGET)))
    if reserved == 0:
        return None
    hosts = allowed_hosts(ledger.searched_urls(), user_hosts)
    return FetchPlan(url=url, allowed_hosts=hosts, page_limit=reserved)


def settle(budgets: BudgetCounter, plan: FetchPlan, pages_read: int) -> None:
    """Charge the budget for the pages read: give back the rest of the reservation."""
    budgets.settle(BUDGET, plan.page_limit, pages_read)


def page_refusal_problem(budgets: BudgetCounter) -> ReadProblem:
    """The ``read`` event's word for a read refused because no page is left: spent only
    once the pages were read, as `page_refusal` says it to the model."""
    return ReadProblem.BUDGET_HELD if budgets.held(BUDGET) else ReadProblem.BUDGET


def page_refusal(budgets: BudgetCounter) -> str:
    """The tool text of a read refused because no page is left.

    Spent means read: while reads running at the same time hold the rest, the text says
    so instead, so it never disagrees with the trailer, which counts pages read.
    """
    if budgets.held(BUDGET):
        return prompts.PAGE_BUDGET_HELD.format(limit=budgets.limit(BUDGET))
    return prompts.PAGE_BUDGET_SPENT.format(limit=budgets.limit(BUDGET))


def problem_of(error: FetcherClientError) -> ReadProblem:
    """The word for a fetcher client error."""
    if isinstance(error, FetcherUnavailable):
        return ReadProblem.UNAVAILABLE
    if isinstance(error, FetcherBusy):
        return ReadProblem.BUSY
    if isinstance(error, FetcherTimeout):
        return ReadProblem.TIMEOUT
    return ReadProblem.FAILED


def read_event(page: PageRead | PageFailed) -> Read:
    """The ``read`` event of a page read or failed (SPEC 4), sent as soon as it is done."""
    if isinstance(page, PageRead):
        return Read(
            url=page.requested_url,
            final_url=page.final_url,
            title=one_line(page.title, TITLE_CHARS),
            ok=True,
        )
    return Read(url=page.url, final_url=page.url, title="", ok=False, reason=page.reason.value)


def unread_event(url: str, problem: ReadProblem) -> Read:
    """The ``read`` event of a read that reached no page: the fetcher was not asked, or
    gave no page and no report. Without it a client would see nothing of the call."""
    return Read(url=url, final_url=url, title="", ok=False, reason=problem.value)


def tool_text(
    url: str,
    pages: Sequence[PageRead],
    failures: Sequence[PageFailed],
    ledger: Ledger,
    *,
    problem: ReadProblem | None = None,
    detail: str = "",
    scope: prompts.Scope = prompts.Scope.ANSWER,
) -> str:
    """The tool message (without the budget trailer, which the loop adds).

    Each page read gets its ledger number (by final address) and is shown as SPEC 5's
    untrusted label, then its heading (number, title, final address), then its text; each
    failed page is one line with
    its reason in words. If the first page failed, that is all the text says.

    Args:
        url: The address the model asked for.
        pages: Pages read, in the report's order.
        failures: Pages not read, in the report's order.
        ledger: The answer's ledger.
        problem: Why the read ended without a report, if it did.
        detail: The fetcher client's explanation of ``problem``.
        scope: What the ledger belongs to (an answer, or an MCP session), for the words.

    # Security
    SPEC 5: every page's text is preceded by the label saying it is untrusted data, and
    a page's title is folded to one line, so a page cannot write a heading of its own
    that looks like another source. Proved by
    ``tests/gateway/tools/fetch/test_text.py``.
    """
    if problem is not None and not pages:
        return _problem_line(problem, url, detail, scope)
    if not pages and failures:
        first = failures[0]
        return prompts.FIRST_PAGE_NOT_READ.format(
            url=first.url, reason=prompts.reason_words(first.reason, scope)
        )
    blocks: list[str] = []
    for page in pages:
        n = ledger.add(page.final_url, one_line(page.title, TITLE_CHARS), found=Found.PAGE)
        heading = prompts.PAGE_HEADING.format(
            n=n,
            title=one_line(page.title, TITLE_CHARS) or prompts.SEARCH_NO_TITLE,
            url=page.final_url,
        )
        label = prompts.PAGE_LABEL.format(address=page.final_url)
        # The label comes first (SPEC 5): the heading holds the page's own title, which is
        # as untrusted as its text.
        blocks.append(f"{label}\n{heading}\n{page.text.strip()}")
    lines = [
        prompts.PAGE_NOT_READ.format(
            url=failure.url, reason=prompts.reason_words(failure.reason, scope)
        )
        for failure in failures
    ]
    if problem is ReadProblem.UNAVAILABLE:
        # Pages were read: "was not read" would be false, and it is not a timeout.
        lines.append(prompts.FETCH_UNAVAILABLE_MIDWAY.format(url=url))
    elif problem is not None:
        lines.append(_problem_line(problem, url, detail, scope))
    if lines:
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _problem_line(problem: ReadProblem, url: str, detail: str, scope: prompts.Scope) -> str:
    if problem is ReadProblem.UNAVAILABLE:
        return prompts.FETCH_UNAVAILABLE.format(url=url)
    if problem is ReadProblem.BUSY:
        return prompts.FETCH_BUSY.format(url=url, scope=scope)
    if problem is ReadProblem.TIMEOUT:
        return prompts.FETCH_TIMEOUT.format(url=url)
    return prompts.FETCH_FAILED.format(url=url, detail=one_line(detail, 200) or "no detail")


def outcome(
    pages: Sequence[PageRead], failures: Sequence[PageFailed], problem: ReadProblem | None
) -> ToolOutcome:
    """The tool-call metric label of a read."""
    if pages:
        return ToolOutcome.OK
    if problem is ReadProblem.TIMEOUT:
        return ToolOutcome.TIMEOUT
    if problem is None and failures and failures[0].reason in REFUSALS:
        return ToolOutcome.REFUSED
    if problem is None and failures and failures[0].reason is Reason.TIMEOUT:
        return ToolOutcome.TIMEOUT
    return ToolOutcome.ERROR
