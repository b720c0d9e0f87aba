"""A third tool registered only where tools are listed runs through the loop, the stream
and MCP like the two research tools, with its own subject, repeat rule, event and budget."""

from __future__ import annotations

import json

import httpx

from gateway.settings import Budgets
from testkit.engine import FakeEngine, text_reply, tool_reply
from tests.e2e.mcp_client import Notes, connect, text_of
from tests.gateway.conftest import AUTH, KEY, GatewayFactory, make_settings
from tests.gateway.http.test_app import chat, content_of, events_of
from tests.gateway.tools.third_tool import NAME, CountWords


def thor_events(body: str) -> list[dict[str, object]]:
    return [e["thor_event"] for e in events_of(body) if isinstance(e, dict) and "thor_event" in e]


async def test_the_third_tool_runs_in_the_loop_and_its_events_stream(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    tool = CountWords()
    engine.script(
        tool_reply((NAME, json.dumps({"text": "one two  three"}))),
        # The same text in other case and spacing is a repeat by the tool's own rule.
        tool_reply((NAME, json.dumps({"text": "ONE two three"}))),
        text_reply("Three words."),
    )
    async with gateway_at(tools=[tool]) as url:
        response = await http.post(
            f"{url}/v1/chat/completions",
            json=chat(thor_web_search=True, stream=True),
            headers=AUTH,
        )
    assert response.status_code == 200
    events = thor_events(response.text)
    assert {"type": "counted", "words": 3} in events
    working = [e for e in events if e["type"] == "working" and e["calls"]]
    assert working[0]["calls"] == [{"tool": NAME, "text": "one two three"}]
    assert tool.calls == ["one two  three"]  # the repeat did not run
    assert content_of(events_of(response.text)) == "Three words."
    offered = [t["function"]["name"] for t in engine.chats[0]["tools"]]
    assert offered == [NAME]
    first_result = engine.chats[1]["messages"][-1]
    assert first_result["role"] == "tool"
    assert first_result["content"].startswith("The text has 3 words.")
    # The trailer holds the tool's own budget after SPEC 8's two.
    assert first_result["content"].endswith(
        "\nSearches used 0 of 16; pages read 0 of 12; texts counted 1 of 12"
    )


async def test_the_third_tools_own_budget_ends_the_tool_rounds_when_spent(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    tool = CountWords()
    engine.script(
        tool_reply((NAME, json.dumps({"text": "one two"}))),
        text_reply("Two words."),
    )
    settings = make_settings(engine, budgets=Budgets(pages=1))
    async with gateway_at(settings=settings, tools=[tool]) as url:
        response = await http.post(
            f"{url}/v1/chat/completions",
            json=chat(thor_web_search=True, stream=True),
            headers=AUTH,
        )
    assert response.status_code == 200
    assert tool.calls == ["one two"]
    assert content_of(events_of(response.text)) == "Two words."
    # Its one count spent, the next round is an answer round: no tools offered.
    assert "tools" in engine.chats[0]
    assert "tools" not in engine.chats[1]
    result = next(m for m in engine.chats[1]["messages"] if m["role"] == "tool")
    assert result["content"].endswith("; texts counted 1 of 1")


async def test_the_third_tool_is_listed_and_called_over_mcp(gateway_at: GatewayFactory) -> None:
    notes = Notes()
    async with gateway_at(tools=[CountWords()]) as url, connect(url, key=KEY) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool(
            NAME, {"text": "a b c d"}, progress_callback=notes.on_progress
        )
    assert listed == [NAME]
    assert text_of(result).startswith("The text has 4 words.")
    assert [message for _, message in notes.progress] == ["counted: 4 words"]
