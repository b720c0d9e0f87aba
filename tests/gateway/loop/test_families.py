"""Calls written in other families' text forms (SPEC 4a R14, R17) run in the loop like any other.

The fake engine streams the calls as content, cut into small pieces, with the real filter of
:mod:`gateway.loop.tooltext.filter` in the loop; the offered schema comes from the tool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from gateway.engine.client import EngineClient
from gateway.loop.turn import default_filter
from testkit.engine import FakeEngine, text_reply
from tests.gateway.conftest import FakeSearch
from tests.gateway.loop.test_turn import make_turn, pieces, run, text, thor

GLM_CALL = (
    "Let me look that up.\n<tool_call>web_search\n<arg_key>query</arg_key>\n"
    "<arg_value>rust jobs berlin</arg_value>\n</tool_call>"
)
MISTRAL_CALL = '[TOOL_CALLS]web_search[ARGS]{"query": "rust salaries"}'


@pytest.fixture
async def client() -> AsyncIterator[EngineClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0), trust_env=False) as http:
        engines = EngineClient(http)
        yield engines
        engines.close()


async def test_a_glm_call_and_a_mistral_call_written_as_text_are_run_and_hidden(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(
        text_reply(*pieces(GLM_CALL, 4)),
        text_reply(*pieces(MISTRAL_CALL, 3)),
        text_reply("Rust jobs in Berlin pay well [1][2]."),
    )
    tool = FakeSearch()
    events = await run(make_turn(client, engine, [tool], filters=default_filter))
    assert tool.calls == [{"query": "rust jobs berlin"}, {"query": "rust salaries"}]
    shown = text(events)
    assert shown == "Let me look that up.\n\nRust jobs in Berlin pay well [1][2]."
    for tag in ("<tool_call>", "<arg_key>", "[TOOL_CALLS]", "[ARGS]"):
        assert tag not in shown
    searched = [e["queries"] for e in thor(events) if e["type"] == "searched"]
    assert searched == [["rust jobs berlin"], ["rust salaries"]]
    # Each call went back to the engine as an assistant tool call with its result after it.
    second, third = engine.chats[1]["messages"], engine.chats[2]["messages"]
    assert second[-2]["content"] == "Let me look that up.\n"
    assert second[-2]["tool_calls"][0]["function"]["name"] == "web_search"
    assert second[-1]["role"] == "tool"
    assert second[-1]["tool_call_id"] == second[-2]["tool_calls"][0]["id"]
    assert third[-2]["tool_calls"][0]["function"]["arguments"] == '{"query": "rust salaries"}'
    assert "About rust salaries" in third[-1]["content"]
    assert engine.chats[0]["tools"] == [tool.schema]
