"""Which calls count as run (issue 22, finding 10): a call a rule or a budget refused did
nothing, so the same call later in the answer or session is no repeat; and the repeat
notice in the words of each scope."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import httpx
import pytest

from gateway import prompts
from gateway.api.messages import parse_message
from gateway.engine.client import EngineClient
from gateway.loop.calls import CallVerdict, RawCall, settle_seen, vet_call
from gateway.loop.turn import ChatTurn, LoopOptions, RequiredMemory
from gateway.settings import EngineSettings
from gateway.tools.base import CallShape, ToolBox, ToolContext, ToolItem, ToolOutcome, ToolResult
from gateway.tools.ledger import BudgetKind
from testkit.engine import FakeEngine, text_reply, tool_reply

FETCH = "fetch_page_content_recursive"
TOOLS = {FETCH: CallShape(("url",), "url")}


def vet(seen: set[str], scope: prompts.Scope = prompts.Scope.ANSWER) -> CallVerdict:
    call = RawCall("c1", FETCH, {"url": "https://a.example/"})
    return vet_call(call, tools=TOOLS, seen=seen, scope=scope).verdict


@pytest.mark.parametrize(
    ("outcome", "repeat"),
    [
        (ToolOutcome.REFUSED, CallVerdict.RUN),  # nothing was done: try again later
        (ToolOutcome.OK, CallVerdict.DUPLICATE),
        (ToolOutcome.ERROR, CallVerdict.DUPLICATE),  # it ran, and failed
        (ToolOutcome.TIMEOUT, CallVerdict.DUPLICATE),
    ],
)
def test_only_a_call_that_ran_makes_its_repeat_a_duplicate(
    outcome: ToolOutcome, repeat: CallVerdict
) -> None:
    seen: set[str] = set()
    call = RawCall("c1", FETCH, {"url": "https://a.example/"})
    first = vet_call(call, tools=TOOLS, seen=seen)
    assert first.verdict is CallVerdict.RUN
    settle_seen(seen, first.key, outcome.value)
    assert vet(seen) is repeat


@pytest.mark.parametrize(
    ("scope", "notice"),
    [
        (prompts.Scope.ANSWER, prompts.DUPLICATE_CALL.format(scope="answer")),
        (prompts.Scope.SESSION, prompts.DUPLICATE_CALL_SESSION),
    ],
)
def test_the_repeat_notice_speaks_of_its_scope(scope: prompts.Scope, notice: str) -> None:
    seen: set[str] = set()
    call = RawCall("c1", FETCH, {"url": "https://a.example/"})
    vet_call(call, tools=TOOLS, seen=seen, scope=scope)
    again = vet_call(call, tools=TOOLS, seen=seen, scope=scope)
    assert again.verdict is CallVerdict.DUPLICATE
    assert again.message == notice


def test_over_mcp_the_notice_never_points_above() -> None:
    assert "above" not in prompts.DUPLICATE_CALL_SESSION
    assert "MCP session" in prompts.DUPLICATE_CALL_SESSION


class RefusedOnce:
    """A fetch tool that a rule refuses the first time, as rule 1 does before a search."""

    name = FETCH
    subject = "url"
    folded: frozenset[str] = frozenset()
    budget: BudgetKind | None = None
    schema: Mapping[str, Any] = {
        "type": "function",
        "function": {
            "name": FETCH,
            "description": "Read a page.",
            "parameters": {
                "type": "object",
                "properties": {"url": {"type": "string"}},
                "required": ["url"],
            },
        },
    }

    def __init__(self) -> None:
        self.runs = 0

    async def run(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> AsyncGenerator[ToolItem, None]:
        self.runs += 1
        if self.runs == 1:
            yield ToolResult("Not in this answer's search results.", ToolOutcome.REFUSED)
        else:
            yield ToolResult("The page's text.", ToolOutcome.OK)


async def test_the_chat_loop_runs_again_a_call_it_refused(engine: FakeEngine) -> None:
    call = (FETCH, json.dumps({"url": "https://a.example/"}))
    engine.script(tool_reply(call), tool_reply(call), tool_reply(call), text_reply("Done."))
    tool = RefusedOnce()
    question = {"role": "user", "content": "Read https://a.example/"}
    async with httpx.AsyncClient(trust_env=False) as http:
        client = EngineClient(http)
        turn = ChatTurn(
            client=client,
            engine=EngineSettings(engine.url),
            messages=[parse_message(question, 0)],
            fields={"model": "test-model", "messages": [question]},
            tools=ToolBox([tool]),
            memory=RequiredMemory(),
            options=LoopOptions(),
        )
        _ = [event async for event in turn.events()]
        client.close()
    assert tool.runs == 2  # refused, then run; the third call is the repeat
    told = [m["content"] for m in engine.chats[3]["messages"] if m["role"] == "tool"]
    assert told[0].startswith("Not in this answer's search results.")
    assert told[1].startswith("The page's text.")
    assert told[2].startswith(prompts.DUPLICATE_CALL.format(scope="answer"))
