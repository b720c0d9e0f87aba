"""Repeats over MCP (issue 22, finding 10), with the official SDK's client against the real
gateway, SearXNG stand-in and fetcher: only calls that ran count as run, and the repeat
notice says what an agent can do, never "its result is above"."""

from __future__ import annotations

from fetcher.client import Reason
from gateway import prompts
from tests.e2e.conftest import Gateway, World
from tests.e2e.mcp_client import connect, text_of
from tests.e2e.test_mcp import kettle_site
from tests.e2e.test_research import FETCH, SEARCH


async def test_a_read_refused_before_any_search_can_be_run_once_the_search_found_it(
    world: World, gateway: Gateway
) -> None:
    start = kettle_site(world)
    async with connect(gateway.url) as client:
        before = await client.call_tool(FETCH, {"url": start})
        await client.call_tool(SEARCH, {"query": "kettle descale"})
        after = await client.call_tool(FETCH, {"url": start})
        again = await client.call_tool(FETCH, {"url": start})

    reason = prompts.reason_words(Reason.NOT_IN_ANSWER, prompts.Scope.SESSION)
    assert text_of(before).startswith(prompts.FIRST_PAGE_NOT_READ.format(url=start, reason=reason))
    # The refused call did not run: the same call is read once a search found its host.
    assert text_of(after).startswith(f"Untrusted text from {start}.")
    assert "Use citric acid." in text_of(after)
    assert [r.target for r in world.origin.requests] == ["/kettle/descale"]
    # A call that ran is a repeat, said in the words of a session.
    assert text_of(again) == (
        f"{prompts.DUPLICATE_CALL_SESSION}\nSearches used 1 of 16; pages read 1 of 12"
    )
    assert "above" not in text_of(again)
    assert not again.is_error


async def test_a_repeated_search_gets_a_notice_an_agent_can_act_on(
    world: World, gateway: Gateway
) -> None:
    kettle_site(world)
    async with connect(gateway.url) as client:
        first = await client.call_tool(SEARCH, {"query": "kettle descale"})
        repeat = await client.call_tool(SEARCH, {"query": "kettle descale"})
    assert not first.is_error
    notice = text_of(repeat)
    assert notice.startswith("This exact call was already run in this MCP session")
    assert "other words for a search" in notice
    assert "its result is above" not in notice
    assert world.searxng.searches() == ["kettle descale"]
