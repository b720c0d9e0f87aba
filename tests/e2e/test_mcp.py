"""The research tools over MCP, end to end: the official SDK's client over Streamable HTTP
against the real gateway on uvicorn, searching through the SearXNG stand-in and reading the
local HTTPS site through the fetcher's real gRPC service (the test policy)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from prometheus_client import CollectorRegistry

from fetcher.client import Reason
from gateway import prompts
from gateway.app import create_app
from gateway.http.serving import uvicorn_config
from gateway.metrics import GatewayMetrics
from gateway.settings import Budgets, Limits, McpSettings
from gateway.stream.drain import Drain
from gateway.tools.search import rules as search_rules
from testkit.engine import text_reply, tool_reply
from testkit.origin import Reply, Request
from testkit.searxng import Served
from tests.e2e.client import body, stream_answer
from tests.e2e.conftest import AUTH, KEY, Gateway, GatewayFactory, World
from tests.e2e.mcp_client import (
    PROTOCOL_VERSION,
    Notes,
    RawSession,
    connect,
    mcp_errors,
    sse_messages,
    text_of,
)
from tests.e2e.test_research import FETCH, SEARCH, fetch, page, search
from tests.gateway.servers import serve

OTHER_KEY = "e2e-other-key-0123456789"
TRAILER_START = "Searches used 0 of 16; pages read 0 of 12"


async def eventually(condition: Callable[[], bool], within: float = 10.0) -> None:
    """Wait until ``condition`` holds (a condition, not a duration, is what is tested)."""
    for _ in range(int(within / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


def kettle_site(world: World) -> str:
    """Search results on the origin; the first result is a page without links."""
    world.results_on_origin()
    start = world.url("/kettle/descale")
    world.origin.routes["/kettle/descale"] = page("Descaling", "Use citric acid.")
    return start


async def test_search_then_read_a_result_with_numbers_trailer_and_events(
    world: World, gateway: Gateway
) -> None:
    start = kettle_site(world)
    notes = Notes()
    async with connect(gateway.url, notes=notes) as client:
        assert client.protocol_version == PROTOCOL_VERSION
        assert client.server_info is not None
        assert client.server_info.name == "tigress"
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert list(listed) == [SEARCH, FETCH]
        assert gateway.metric("tigress_gateway_mcp_sessions") == 1

        searched = await client.call_tool(
            SEARCH, {"query": "kettle descale"}, progress_callback=notes.on_progress
        )
        read = await client.call_tool(FETCH, {"url": start}, progress_callback=notes.on_progress)

    search_text = text_of(searched)
    assert not searched.is_error
    assert f"[1] Kettle descaling guide — {start}" in search_text
    assert search_text.endswith("\nSearches used 1 of 16; pages read 0 of 12")
    read_text = text_of(read)
    assert not read.is_error
    assert read_text.startswith(f"Untrusted text from {start}.")
    assert f".\n[1] Descaling — {start}\n" in read_text
    assert "Use citric acid." in read_text
    assert read_text.endswith("\nSearches used 1 of 16; pages read 1 of 12")

    # Every tool event reached the client while the calls ran: as progress, and as a log
    # entry holding the same object the chat API streams as thor_event.
    assert notes.progress == [
        (1.0, 'searched: "kettle descale" (6 results)'),
        (1.0, f"read: Descaling — {start}"),
    ]
    events = notes.events()
    assert [e["type"] for e in events] == ["searched", "read"]
    assert events[0]["queries"] == ["kettle descale"]
    assert events[0]["results"] == 6
    assert events[1] == {
        "type": "read",
        "url": start,
        "final_url": start,
        "title": "Descaling",
        "ok": True,
        "reason": None,
    }
    for tool in (SEARCH, FETCH):
        labels = {"interface": "mcp", "tool": tool, "outcome": "ok"}
        assert gateway.metric("tigress_gateway_tool_calls", labels) == 1
    assert gateway.metric("tigress_gateway_mcp_session_events", {"event": "opened"}) == 1
    assert gateway.metric("tigress_gateway_mcp_session_events", {"event": "closed"}) == 1
    assert gateway.metric("tigress_gateway_mcp_sessions") == 0


async def test_tools_have_the_chat_loops_schemas_and_the_fetch_tool_says_rule_1_for_mcp(
    world: World, gateway: Gateway
) -> None:
    async with connect(gateway.url) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    search_function = search_rules.SCHEMA["function"]
    assert listed[SEARCH].description == search_function["description"]
    assert listed[SEARCH].input_schema == search_function["parameters"]
    # The chat loop keeps SPEC 7's words; over MCP nobody's messages reach the gateway.
    assert listed[FETCH].description == prompts.FETCH_DESCRIPTION_MCP
    assert "this session's web_search results" in prompts.FETCH_DESCRIPTION_MCP
    assert listed[FETCH].input_schema == {
        "type": "object",
        "properties": {
            "url": {
                "type": "string",
                "description": "An https address from this session's web_search results",
            }
        },
        "required": ["url"],
    }
    for tool in listed.values():
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is True


async def test_tool_texts_are_the_ones_the_chat_loops_model_reads(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    start = kettle_site(world)
    world.engine.script(
        tool_reply(search("kettle descale")), tool_reply(fetch(start)), text_reply("Done [1].")
    )
    await stream_answer(http, gateway.api, body())
    chat_texts = [world.engine.chats[n]["messages"][-1]["content"] for n in (1, 2)]

    async with connect(gateway.url) as client:
        searched = await client.call_tool(SEARCH, {"query": "kettle descale"})
        read = await client.call_tool(FETCH, {"url": start})
    assert [text_of(searched), text_of(read)] == chat_texts


async def test_a_result_holding_a_lone_surrogate_is_answered_in_both_interfaces(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    # A lone surrogate, escaped in SearXNG's JSON, cannot be written as UTF-8: the MCP
    # answer holding it was never sent ("SSE stream ended without a response").
    world.searxng.default = Served(
        200,
        "application/json",
        b'{"results": [{"url": "https://origin.test/a", "title": "Bad \\ud800 title", '
        b'"content": "snip \\udfff"}], "unresponsive_engines": []}',
    )
    async with connect(gateway.url) as client:
        found = await client.call_tool(SEARCH, {"query": "kettle"})
    assert not found.is_error
    assert "[1] Bad \ufffd title — https://origin.test/a" in text_of(found)
    world.engine.script(tool_reply(search("kettle")), text_reply("Done [1]."))
    answer = await stream_answer(http, gateway.api, body())
    assert answer.text == "Done [1]."
    sent = world.engine.chats[1]["messages"][-1]["content"]
    assert "Bad \ufffd title" in sent


async def test_a_host_outside_the_sessions_results_is_refused_not_in_answer(
    world: World, gateway: Gateway
) -> None:
    kettle_site(world)
    other, elsewhere = world.url("/", host="other.test"), world.url("/x", host="other.test")
    world.origin.routes["/"] = page("Other", "Not a search result.")
    notes = Notes()
    async with connect(gateway.url, notes=notes) as client:
        before = await client.call_tool(FETCH, {"url": other})
        await client.call_tool(SEARCH, {"query": "kettle descale"})
        # A search does not allow hosts it did not find.
        after = await client.call_tool(FETCH, {"url": elsewhere})

    def refusal(url: str) -> str:
        reason = prompts.reason_words(Reason.NOT_IN_ANSWER, prompts.Scope.SESSION)
        return prompts.FIRST_PAGE_NOT_READ.format(url=url, reason=reason)

    # A refusal is an answer for the model, not a failed call.
    assert not before.is_error
    assert text_of(before) == f"{refusal(other)}\n{TRAILER_START}"
    assert not after.is_error
    assert text_of(after) == f"{refusal(elsewhere)}\nSearches used 1 of 16; pages read 0 of 12"
    reads = [e for e in notes.events() if e["type"] == "read"]
    assert [(e["ok"], e["reason"]) for e in reads] == [(False, "not_in_answer")] * 2
    assert world.origin.requests == []
    labels = {"interface": "mcp", "tool": FETCH, "outcome": "refused"}
    assert gateway.metric("tigress_gateway_tool_calls", labels) == 2


async def test_a_sessions_budgets_run_out(world: World, gateway_for: GatewayFactory) -> None:
    start = kettle_site(world)
    world.origin.routes["/kettle/other"] = page("Other page", "More text.")
    async with (
        gateway_for(budgets=Budgets(searches=1, pages=1)) as gateway,
        connect(gateway.url) as client,
    ):
        first = await client.call_tool(SEARCH, {"query": "kettle descale"})
        second = await client.call_tool(SEARCH, {"query": "kettle limescale"})
        read = await client.call_tool(FETCH, {"url": start})
        unread = await client.call_tool(FETCH, {"url": world.url("/kettle/other")})

    assert not first.is_error
    assert not second.is_error
    assert text_of(second) == (
        f"{prompts.SEARCH_BUDGET_SPENT.format(limit=1)}\nSearches used 1 of 1; pages read 0 of 1"
    )
    assert not read.is_error
    assert not unread.is_error
    assert text_of(unread) == (
        f"{prompts.PAGE_BUDGET_SPENT.format(limit=1)}\nSearches used 1 of 1; pages read 1 of 1"
    )
    assert world.searxng.searches() == ["kettle descale"]


async def test_two_sessions_share_neither_ledger_nor_budgets(
    world: World, gateway: Gateway
) -> None:
    start = kettle_site(world)
    async with connect(gateway.url) as first, connect(gateway.url) as second:
        await first.call_tool(SEARCH, {"query": "kettle descale"})
        # The second session found nothing yet: the first one's results allow it nothing.
        refused = await second.call_tool(FETCH, {"url": start})
        own = await second.call_tool(SEARCH, {"query": "kettle limescale"})
        read = await first.call_tool(FETCH, {"url": start})

    assert text_of(refused).endswith(f"\n{TRAILER_START}")
    assert "not in this session's search results" in text_of(refused)
    # Its own search numbers from 1 and spends its own budget.
    assert f"[1] Kettle descaling guide — {start}" in text_of(own)
    assert text_of(own).endswith("\nSearches used 1 of 16; pages read 0 of 12")
    assert text_of(read).endswith("\nSearches used 1 of 16; pages read 1 of 12")


async def test_a_repeated_call_is_not_run_again_in_the_session(
    world: World, gateway: Gateway
) -> None:
    kettle_site(world)
    async with connect(gateway.url) as client:
        await client.call_tool(SEARCH, {"query": "kettle descale"})
        again = await client.call_tool(SEARCH, {"query": "  Kettle   DESCALE "})
    assert not again.is_error
    assert text_of(again) == (
        f"{prompts.DUPLICATE_CALL.format(scope='session')}\n"
        "Searches used 1 of 16; pages read 0 of 12"
    )
    assert text_of(again).startswith("This exact call was already run in this session,")
    assert world.searxng.searches() == ["kettle descale"]


@pytest.mark.parametrize(
    "key",
    [pytest.param(None, id="missing"), pytest.param("wrong-key-0123456789abc", id="wrong")],
)
async def test_a_wrong_or_missing_key_is_refused(
    world: World, gateway: Gateway, http: httpx.AsyncClient, key: str | None
) -> None:
    with pytest.raises(BaseException) as raised:  # noqa: PT011 - the SDK raises a group
        async with connect(gateway.url, key=key):
            pass
    assert [e.error.message for e in mcp_errors(raised.value)] == [
        "Missing access key: send Authorization: Bearer <key>."
        if key is None
        else "Wrong access key."
    ]
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    response = await RawSession(http, gateway.url, headers).initialize()
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"]["code"] == -32600
    assert gateway.metric("tigress_gateway_mcp_session_events", {"event": "opened"}) == 0
    assert gateway.metric("tigress_gateway_mcp_refused_requests", {"reason": "auth"}) >= 2


async def test_without_keys_on_loopback_no_key_is_needed(
    world: World, gateway_for: GatewayFactory
) -> None:
    async with gateway_for(api_keys=()) as gateway, connect(gateway.url, key=None) as client:
        listed = await client.list_tools()
    assert [tool.name for tool in listed.tools] == [SEARCH, FETCH]


@pytest.mark.parametrize(
    "page_origin",
    [
        pytest.param("http://evil.test", id="other-site"),
        pytest.param("http://127.0.0.1:8081", id="other-port"),
        pytest.param("https://127.0.0.1:8080", id="other-scheme"),
        pytest.param("http://ui.127.0.0.1:8080", id="subdomain"),
        pytest.param("null", id="null"),
    ],
)
async def test_a_foreign_origin_is_refused(
    world: World, gateway_for: GatewayFactory, http: httpx.AsyncClient, page_origin: str
) -> None:
    settings = McpSettings(sessions_per_key=8, allowed_origins=("http://127.0.0.1:8080",))
    async with gateway_for(mcp=settings) as gateway:
        raw = RawSession(http, gateway.url, {**AUTH, "Origin": page_origin})
        refused = await raw.initialize()
        # Before the key is looked at: no key, still 403.
        keyless = await RawSession(http, gateway.url, {"Origin": page_origin}).initialize()
        allowed = await RawSession(
            http, gateway.url, {**AUTH, "Origin": "http://127.0.0.1:8080"}
        ).initialize()
    assert refused.status_code == 403
    assert keyless.status_code == 403
    assert "access-control-allow-origin" not in refused.headers
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "http://127.0.0.1:8080"
    assert allowed.headers["access-control-expose-headers"] == "mcp-session-id"
    assert gateway.metric("tigress_gateway_mcp_refused_requests", {"reason": "origin"}) == 2


async def test_an_allowed_page_gets_its_preflight_answered_without_a_key(
    world: World, gateway_for: GatewayFactory, http: httpx.AsyncClient
) -> None:
    settings = McpSettings(allowed_origins=("http://localhost:8080",))
    preflight = {
        "Origin": "http://localhost:8080",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, mcp-session-id",
    }
    async with gateway_for(mcp=settings) as gateway:
        answer = await http.options(f"{gateway.url}/mcp", headers=preflight)
        foreign = await http.options(
            f"{gateway.url}/mcp", headers={**preflight, "Origin": "http://localhost:8081"}
        )
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == "http://localhost:8080"
    assert "mcp-session-id" in answer.headers["access-control-allow-headers"]
    assert "DELETE" in answer.headers["access-control-allow-methods"]
    assert foreign.status_code == 403


async def test_a_session_is_refused_with_another_key(
    world: World, gateway_for: GatewayFactory, http: httpx.AsyncClient
) -> None:
    async with gateway_for(api_keys=(KEY, OTHER_KEY)) as gateway:
        owner = RawSession(http, gateway.url, AUTH)
        assert (await owner.initialize()).status_code == 200
        thief = RawSession(http, gateway.url, {"Authorization": f"Bearer {OTHER_KEY}"})
        thief.session_id = owner.session_id
        stolen = await thief.post(thief.request("tools/call", {"name": SEARCH, "arguments": {}}))
        still = await owner.post(owner.request("tools/list"))
    assert stolen.status_code == 404
    assert still.status_code == 200
    assert [t["name"] for t in sse_messages(still.text)[0]["result"]["tools"]] == [SEARCH, FETCH]


async def test_a_key_has_at_most_its_sessions(
    world: World, gateway_for: GatewayFactory, http: httpx.AsyncClient
) -> None:
    settings = McpSettings(sessions_per_key=2)
    async with gateway_for(api_keys=(KEY, OTHER_KEY), mcp=settings) as gateway:
        sessions = [RawSession(http, gateway.url, AUTH) for _ in range(3)]
        assert (await sessions[0].initialize()).status_code == 200
        async with connect(gateway.url) as client:
            await client.list_tools()
            refused = await sessions[1].initialize()
            with pytest.raises(BaseException) as raised:  # noqa: PT011 - a group
                async with connect(gateway.url):
                    pass
            other_key = await RawSession(
                http, gateway.url, {"Authorization": f"Bearer {OTHER_KEY}"}
            ).initialize()
        # The SDK client ended its session on leaving: there is room again.
        room = await sessions[2].initialize()
        assert (await sessions[0].delete()).status_code == 200
    assert refused.status_code == 429
    assert refused.json()["error"]["message"] == prompts.MCP_KEY_SESSIONS
    assert [e.error.message for e in mcp_errors(raised.value)] == [prompts.MCP_KEY_SESSIONS]
    assert other_key.status_code == 200
    assert room.status_code == 200
    assert gateway.metric("tigress_gateway_mcp_session_events", {"event": "key_limit"}) == 2


async def test_the_gateway_has_at_most_its_sessions(
    world: World, gateway_for: GatewayFactory, http: httpx.AsyncClient
) -> None:
    settings = McpSettings(sessions_per_key=0, max_sessions=1)
    async with gateway_for(api_keys=(KEY, OTHER_KEY), mcp=settings) as gateway:
        assert (await RawSession(http, gateway.url, AUTH).initialize()).status_code == 200
        other = RawSession(http, gateway.url, {"Authorization": f"Bearer {OTHER_KEY}"})
        full = await other.initialize()
    assert full.status_code == 503
    assert full.json()["error"]["message"] == prompts.MCP_SESSIONS_FULL


async def test_an_idle_session_expires_with_its_ledger(
    world: World, gateway_for: GatewayFactory, http: httpx.AsyncClient
) -> None:
    kettle_site(world)
    settings = McpSettings(session_idle=0.2)
    async with gateway_for(mcp=settings) as gateway:
        raw = RawSession(http, gateway.url, AUTH)
        assert (await raw.initialize()).status_code == 200
        call = raw.request("tools/call", {"name": SEARCH, "arguments": {"query": "kettle"}})
        assert (await raw.post(call)).status_code == 200
        await eventually(
            lambda: gateway.metric("tigress_gateway_mcp_session_events", {"event": "expired"}) == 1
        )
        gone = await raw.post(raw.request("tools/list"))
        # A new session starts with a new ledger and new budgets.
        fresh = RawSession(http, gateway.url, AUTH)
        assert (await fresh.initialize()).status_code == 200
        again = await fresh.post(call)
        assert gateway.metric("tigress_gateway_mcp_sessions") == 1
    assert gone.status_code == 404
    result = sse_messages(again.text)[-1]["result"]
    assert result["content"][0]["text"].endswith("\nSearches used 1 of 16; pages read 0 of 12")


async def test_a_client_that_leaves_mid_crawl_cancels_the_fetchers_read(
    world: World, gateway: Gateway
) -> None:
    start = kettle_site(world)
    asked = asyncio.Event()

    async def never(_: Request) -> Reply:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    world.origin.routes["/kettle/descale"] = never
    async with connect(gateway.url) as client:
        await client.call_tool(SEARCH, {"query": "kettle descale"})
        reading = asyncio.create_task(client.call_tool(FETCH, {"url": start}))
        await asked.wait()
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
    await eventually(
        lambda: (
            world.fetcher.metric(
                "tigress_fetcher_grpc_handled", {"method": "ReadStream", "code": "CANCELLED"}
            )
            == 1
        )
    )
    labels = {"interface": "mcp", "tool": FETCH, "outcome": "cancelled"}
    await eventually(lambda: gateway.metric("tigress_gateway_tool_calls", labels) == 1)
    assert gateway.metric("tigress_gateway_mcp_tool_calls_running") == 0


async def test_a_client_that_hangs_up_mid_crawl_cancels_the_fetchers_read(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    start = kettle_site(world)
    asked = asyncio.Event()

    async def never(_: Request) -> Reply:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    world.origin.routes["/kettle/descale"] = never
    raw = RawSession(http, gateway.url, AUTH)
    assert (await raw.initialize()).status_code == 200
    await raw.post(raw.request("tools/call", {"name": SEARCH, "arguments": {"query": "kettle"}}))
    call = raw.request("tools/call", {"name": FETCH, "arguments": {"url": start}})
    # No notifications/cancelled, no DELETE: the connection just closes.
    async with http.stream("POST", raw.endpoint, json=call, headers=raw.session_headers()):
        await asked.wait()
    await eventually(
        lambda: (
            world.fetcher.metric(
                "tigress_fetcher_grpc_handled", {"method": "ReadStream", "code": "CANCELLED"}
            )
            == 1
        )
    )
    assert gateway.metric("tigress_gateway_mcp_tool_calls_running") == 0
    # The session itself stays open for the client's next request.
    listed = await raw.post(raw.request("tools/list"))
    assert listed.status_code == 200


async def test_a_client_trying_the_stateless_revision_is_told_to_initialize(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    raw = RawSession(http, gateway.url, AUTH)
    probe = await http.post(
        raw.endpoint,
        json=raw.request("server/discover"),
        headers={**raw.headers, "Mcp-Protocol-Version": "2026-07-28"},
    )
    assert probe.status_code == 400
    error = probe.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {
        "supported": ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"],
        "requested": "2026-07-28",
    }


async def test_a_request_without_a_session_must_initialize(
    world: World, gateway: Gateway, http: httpx.AsyncClient
) -> None:
    raw = RawSession(http, gateway.url, AUTH)
    answer = await http.post(raw.endpoint, json=raw.request("tools/list"), headers=raw.headers)
    assert answer.status_code == 400
    assert gateway.metric("tigress_gateway_mcp_sessions") == 0


async def test_a_call_that_cannot_run_is_an_error_and_an_unknown_tool_a_protocol_error(
    world: World, gateway: Gateway
) -> None:
    async with connect(gateway.url) as client:
        missing = await client.call_tool(SEARCH, {})
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("run_shell", {"command": "id"})
    assert missing.is_error
    assert text_of(missing) == (
        prompts.MISSING_ARGUMENTS.format(name=SEARCH, missing="query") + f"\n{TRAILER_START}"
    )
    assert unknown.value.error.message == "Unknown tool: run_shell"
    labels = {"interface": "mcp", "tool": SEARCH, "outcome": "missing_arguments"}
    assert gateway.metric("tigress_gateway_tool_calls", labels) == 1


async def test_the_fetch_tools_words_speak_of_the_session(world: World, gateway: Gateway) -> None:
    # Over MCP the sources belong to the session, not to an answer (the chat loop's words).
    async with connect(gateway.url) as client:
        empty = await client.call_tool(FETCH, {"url": "  "})
    assert empty.is_error
    assert text_of(empty) == (
        "fetch_page_content_recursive needs url: an https address from this session's search "
        f"results. Nothing was read.\n{TRAILER_START}"
    )


async def test_a_body_past_the_limit_is_refused_before_the_sdk_reads_it(
    world: World, gateway_for: GatewayFactory, http: httpx.AsyncClient
) -> None:
    async with gateway_for(max_body_bytes=4096) as gateway:
        raw = RawSession(http, gateway.url, AUTH)
        assert (await raw.initialize()).status_code == 200
        call = raw.request("tools/call", {"name": SEARCH, "arguments": {"query": "x" * 5000}})
        refused = await raw.post(call)
        fits = await raw.post(raw.request("tools/list"))
    assert refused.status_code == 413
    assert fits.status_code == 200
    assert world.searxng.searches() == []


async def test_the_keys_limits_hold_over_mcp_as_for_the_chat_api(
    world: World, gateway_for: GatewayFactory, http: httpx.AsyncClient
) -> None:
    start = kettle_site(world)
    asked, release = asyncio.Event(), asyncio.Event()

    async def held(_: Request) -> Reply:
        asked.set()
        await release.wait()
        return page("Descaling", "Use citric acid.")

    world.origin.routes["/kettle/descale"] = held
    limits = Limits(chats_per_key=1, requests_per_minute_per_key=12)
    async with gateway_for(limits=limits) as gateway, connect(gateway.url) as client:
        await client.call_tool(SEARCH, {"query": "kettle descale"})
        reading = asyncio.create_task(client.call_tool(FETCH, {"url": start}))
        await asyncio.wait_for(asked.wait(), 10)
        # One call at a time for this key, as one chat at a time for the chat API.
        busy = await client.call_tool(SEARCH, {"query": "kettle limescale"})
        release.set()
        read = await reading
        raw = RawSession(http, gateway.url, AUTH)
        statuses = [(await raw.initialize()).status_code for _ in range(12)]
    assert busy.is_error
    assert text_of(busy).startswith("Too many chats at once for this key: at most 1.")
    assert not read.is_error
    labels = {"interface": "mcp", "tool": SEARCH, "outcome": "limited"}
    assert gateway.metric("tigress_gateway_tool_calls", labels) == 1
    # Every request to /mcp counts against the key's requests per minute.
    assert 429 in statuses
    assert gateway.metric("tigress_gateway_mcp_refused_requests", {"reason": "rate_limited"}) >= 1


async def test_while_the_gateway_drains_no_call_starts_and_no_session_opens(
    world: World, http: httpx.AsyncClient
) -> None:
    kettle_site(world)
    settings = world.settings()
    metrics = GatewayMetrics(CollectorRegistry())
    drain = Drain()
    app = create_app(settings, metrics=metrics, drain=drain)
    config = uvicorn_config(app, settings, metrics, log_level="warning")
    async with serve(app, config) as url, connect(url) as client:
        drain.draining = True  # as Drain.begin sets it at SIGTERM, without the timer
        refused = await client.call_tool(SEARCH, {"query": "kettle descale"})
        opening = await RawSession(http, url, AUTH).initialize()
    assert refused.is_error
    assert text_of(refused).startswith(prompts.MCP_SHUTTING_DOWN)
    assert world.searxng.searches() == []
    assert opening.status_code == 503
