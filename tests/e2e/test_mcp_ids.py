"""A JSON-RPC id reused while the first request runs (issue 22, finding 4).

Raw JSON-RPC over HTTP against the real gateway (the SDK's client never reuses an id):
a second ``tools/call`` with the id of a slow read still running must not orphan the
first. The first POST gets its answer, the second a JSON-RPC error naming the id, and
``mcp_tool_calls_running`` counts the call that runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from testkit.origin import Reply, Request
from tests.e2e.conftest import AUTH, Gateway, World
from tests.e2e.mcp_client import RawSession, sse_messages
from tests.e2e.test_mcp import eventually, kettle_site
from tests.e2e.test_research import FETCH, SEARCH, page


def call(request_id: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def answer_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer in a POST's reply (SSE or a JSON body)."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        answers = [m for m in sse_messages(response.text) if "id" in m and "method" not in m]
        assert len(answers) == 1, response.text
        return answers[0]
    body = response.json()
    assert isinstance(body, dict)
    return body


async def test_a_reused_id_gets_an_error_and_the_first_call_its_answer(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    start = kettle_site(world)
    asked, release = asyncio.Event(), asyncio.Event()

    async def slow(_: Request) -> Reply:
        asked.set()
        await release.wait()
        return page("Descaling", "Use citric acid.")

    world.origin.routes["/kettle/descale"] = slow
    raw = RawSession(http, gateway.url, AUTH)
    assert (await raw.initialize()).status_code == 200
    searched = await raw.post(call(1, SEARCH, {"query": "kettle descale"}))
    assert searched.status_code == 200

    first = asyncio.create_task(raw.post(call(7, FETCH, {"url": start})))
    await asyncio.wait_for(asked.wait(), 10)
    assert gateway.metric("tigress_gateway_mcp_tool_calls_running") == 1
    # Same id, another call, while the first runs.
    second = await raw.post(call(7, SEARCH, {"query": "kettle limescale"}))
    assert second.status_code == 409
    refused = second.json()
    assert refused["id"] == 7
    assert refused["error"]["code"] == -32600
    assert "7" in refused["error"]["message"]
    assert "still running" in refused["error"]["message"]
    # The first call was not cancelled by the second POST, and is still counted.
    assert not first.done()
    assert gateway.metric("tigress_gateway_mcp_tool_calls_running") == 1

    release.set()
    response = await asyncio.wait_for(first, 10)
    answered = answer_of(response)
    assert answered["id"] == 7
    text = answered["result"]["content"][0]["text"]
    assert "Use citric acid." in text
    assert text.endswith("Searches used 1 of 16; pages read 1 of 12")
    await eventually(lambda: gateway.metric("tigress_gateway_mcp_tool_calls_running") == 0)
    # The refused request ran nothing.
    assert world.searxng.searches() == ["kettle descale"]

    # Once answered, the id may be used again.
    again = await raw.post(call(7, SEARCH, {"query": "kettle limescale"}))
    assert again.status_code == 200
    assert "result" in answer_of(again)


async def test_the_same_id_in_two_sessions_is_two_requests(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    kettle_site(world)
    one, two = RawSession(http, gateway.url, AUTH), RawSession(http, gateway.url, AUTH)
    assert (await one.initialize()).status_code == 200
    assert (await two.initialize()).status_code == 200
    first, second = await asyncio.gather(
        one.post(call(3, SEARCH, {"query": "kettle descale"})),
        two.post(call(3, SEARCH, {"query": "kettle limescale"})),
    )
    assert first.status_code == second.status_code == 200
    assert "result" in answer_of(first)
    assert "result" in answer_of(second)


async def test_a_calls_reads_carry_the_request_id_of_its_post(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    # SPEC 9: the id travels with every read, so an MCP call and its fetches can be joined.
    start = kettle_site(world)
    raw = RawSession(http, gateway.url, AUTH)
    assert (await raw.initialize()).status_code == 200
    searched = await raw.post(call(1, SEARCH, {"query": "kettle descale"}))
    read = await raw.post(call(2, FETCH, {"url": start}))
    assert answer_of(read)["result"]["isError"] is False
    posted = read.headers["x-request-id"]
    assert posted != searched.headers["x-request-id"]
    ids = {r["request_id"] for r in world.fetcher.records() if r.get("url") == start}
    assert ids == {posted}
