"""web_search run against the SearXNG stand-in over HTTP: queries, widening, budget, failures."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from gateway import prompts
from gateway.tools.base import ToolOutcome
from gateway.tools.events import Searched
from gateway.tools.ledger import PAGES, SEARCHES, BudgetCounter, Ledger
from gateway.tools.search.answer import FailureCause
from gateway.tools.search.searxng import SearxngClient
from testkit.searxng import SearxngStandIn, index, recorded, refusing_url, search_files
from tests.gateway.tools.search.searching import Searching, search_once


async def search(
    client: SearxngClient,
    ledger: Ledger | None = None,
    budgets: BudgetCounter | None = None,
    **arguments: Any,
) -> Searching:
    return await search_once(arguments, client=client, ledger=ledger, budgets=budgets)


async def test_one_query_is_searched_numbered_and_evented(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    ledger = Ledger()
    budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
    done = await search(searxng_client, ledger, budgets, query="kettle")
    assert searxng.searches() == ["kettle"]
    assert done.outcome == "ok"
    assert done.failures == ()
    assert done.text.startswith('Results for "kettle":\n[1] Kettle descaling guide')
    assert len(ledger.sources()) == 6
    assert budgets.spent(SEARCHES) == 1
    assert done.event is not None
    assert done.event.payload()["results"] == 6
    assert done.event.payload()["queries"] == ["kettle"]


async def test_sub_queries_are_searched_at_the_same_time_and_each_costs_one_search(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    searxng.hold_until = 4  # nothing is answered until all four have arrived
    searxng.answers["descale"] = recorded("search_pageno_2.json")
    budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
    done = await search(
        searxng_client, budgets=budgets, query="kettle", queries=["descale", "boil", "recall"]
    )
    assert sorted(searxng.searches()) == ["boil", "descale", "kettle", "recall"]
    assert budgets.spent(SEARCHES) == 4
    headings = [block.splitlines()[0] for block in done.text.split("\n\n")]
    assert headings == [f'Results for "{q}":' for q in ("kettle", "descale", "boil", "recall")]
    # "boil" and "recall" got the same six results as "kettle": shown once, under "kettle".
    assert done.text.count("https://example.org/kettle/descale\n") == 1
    assert done.event is not None
    distinct = set(_urls("search_normal.json")) | set(_urls("search_pageno_2.json"))
    assert done.event.results == len(distinct)
    boil = done.text.split("\n\n")[2].splitlines()
    assert boil[1] == "Also found, listed above: [1], [2], [3], [4], [5], [6]."


async def test_kind_widens_with_free_angles_the_query_first(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    searxng.answers["acme careers"] = recorded("search_pageno_2.json")
    budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
    ledger = Ledger()
    done = await search(searxng_client, ledger, budgets, query="acme", kind="jobs")
    assert sorted(searxng.searches()) == [
        "acme",
        "acme careers",
        "acme job posting",
        "acme linkedin jobs",
    ]
    assert budgets.spent(SEARCHES) == 1
    urls = [source.url for source in ledger.sources()]
    assert urls[:6] == _urls("search_normal.json")
    assert "https://wiki.example.org/wiki/Limescale" in urls[6:]
    assert len(urls) == len(set(urls))
    assert done.event is not None
    assert done.event.payload()["kind"] == "jobs"


def _urls(file: str) -> list[str]:
    return [r["url"] for r in json.loads(recorded(file).body)["results"]]


async def test_a_time_range_alias_is_sent_as_searxngs_value(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    done = await search(searxng_client, query="kettle", time_range="7d")
    assert [a.params.get("time_range") for a in searxng.asked] == ["week"]
    assert done.event is not None
    assert done.event.time_range == "week"


async def test_an_unknown_time_range_is_never_sent(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    done = await search(searxng_client, query="kettle", time_range="fortnight")
    assert "time_range" not in searxng.asked[0].params
    assert done.outcome == "ok"
    assert done.text.endswith(prompts.SEARCH_UNKNOWN_TIME_RANGE.format(value='"fortnight"'))


async def test_queries_past_the_budget_are_named_and_not_searched(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    budgets = BudgetCounter({SEARCHES: 2, PAGES: 12})
    done = await search(searxng_client, budgets=budgets, query="a", queries=["b", "c"])
    assert sorted(searxng.searches()) == ["a", "b"]
    assert done.text.endswith(prompts.SEARCH_NOT_SEARCHED.format(queries='"c"'))
    assert done.event is not None
    assert done.event.queries == ("a", "b")


async def test_a_call_past_the_budget_is_answered_and_not_run(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    budgets = BudgetCounter({SEARCHES: 1, PAGES: 12})
    budgets.take(SEARCHES, 1)
    done = await search(searxng_client, budgets=budgets, query="kettle")
    refused = Searched(queries=("kettle",), error="budget")
    assert done == Searching(
        prompts.SEARCH_BUDGET_SPENT.format(limit=1), ToolOutcome.REFUSED, refused
    )
    assert searxng.asked == []


async def test_arguments_that_cannot_be_searched_spend_nothing(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    budgets = BudgetCounter({SEARCHES: 16, PAGES: 12})
    done = await search(searxng_client, budgets=budgets, query="  ")
    assert done == Searching(prompts.SEARCH_NO_QUERY, ToolOutcome.ERROR)
    assert budgets.spent(SEARCHES) == 0
    assert searxng.asked == []


async def test_searxng_down_is_a_clear_result_and_counted(searxng_http: httpx.AsyncClient) -> None:
    with refusing_url() as url:
        client = SearxngClient(searxng_http, url)
        done = await search(client, query="kettle", queries=["descale"])
    assert done.outcome == "error"
    assert done.failures == (FailureCause.UNREACHABLE, FailureCause.UNREACHABLE)
    assert "TIGRESS_SEARXNG_URL" in done.text
    assert done.event is not None
    assert done.event.payload()["error"] == "unreachable"


async def test_json_not_enabled_is_a_clear_result(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    searxng.default = recorded("json_disabled_403.html")
    done = await search(searxng_client, query="kettle")
    assert done.outcome == "error"
    assert done.failures == (FailureCause.JSON_DISABLED,)
    assert "search.formats" in done.text


async def test_the_limiter_is_a_clear_result(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    searxng.default = recorded("limiter_429_json_request_5.txt")
    done = await search(searxng_client, query="kettle")
    assert done.failures == (FailureCause.RATE_LIMITED,)
    assert "pass_ip" in done.text


async def test_a_failing_angle_does_not_hide_the_querys_results(
    searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    searxng.answers["acme careers"] = recorded("limiter_429_json_request_5.txt")
    done = await search(searxng_client, query="acme", kind="jobs")
    assert done.outcome == "ok"
    assert done.failures == (FailureCause.RATE_LIMITED,)
    assert "[1] Kettle descaling guide" in done.text
    assert "One of the searches for this query failed:" in done.text
    assert done.event is not None
    assert done.event.error is None


@pytest.mark.parametrize("file", search_files())
async def test_the_tool_text_of_every_recorded_answer(
    file: str, searxng: SearxngStandIn, searxng_client: SearxngClient
) -> None:
    searxng.default = recorded(file)
    entry = index()[file]
    done = await search(searxng_client, query="kettle")
    lines = done.text.splitlines()
    assert lines[0] == 'Results for "kettle":'
    numbered = [line for line in lines if line.startswith("[")]
    if entry["status"] != 200:
        assert done.outcome == "error"
        assert len(lines) == 2
        assert lines[1].startswith("The search failed: ")
        assert "The operator should" in lines[1]
        return
    document = json.loads(recorded(file).body)
    assert done.outcome == "ok"
    assert len(numbered) == min(6, len(document["results"]))
    assert [line.split("]")[0] for line in numbered] == [
        f"[{n}" for n in range(1, len(numbered) + 1)
    ]
    for name, reason in document["unresponsive_engines"]:
        assert f"{name} ({reason})" in done.text
    if not document["results"]:
        assert lines[1].startswith("No results")
