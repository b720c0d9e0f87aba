"""SPEC 3.6: the gateway never sends two consecutive messages of the same role that it
created itself, and never a user turn of its own right after a user message. Checked on
every message list the engine received, in every path of the loop."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from gateway import prompts
from gateway.api.messages import parse_message
from gateway.engine.client import EngineClient
from gateway.loop.conversation import Conversation
from gateway.loop.rounds import RequiredSupport
from gateway.loop.turn import ChatTurn, LoopOptions, RequiredMemory, default_filter
from gateway.settings import Budgets, EngineSettings
from gateway.tools.base import ToolBox
from testkit.engine import (
    Data,
    FakeEngine,
    Reply,
    chunk,
    error_reply,
    text_reply,
    tool_reply,
)
from tests.gateway.conftest import FakeSearch


def search(query: str) -> tuple[str, str]:
    return ("web_search", json.dumps({"query": query}))


MALFORMED = text_reply('<tool_call>{"name": "web_search", "arguments": {"query": ')
XML_CALL = text_reply(
    "<tool_call>\n<function=web_search>\n<parameter=query>\nlate\n</parameter>\n"
    "</function>\n</tool_call>"
)

#: (id, replies, remembered support, budgets) for every path through the loop.
PATHS: list[tuple[str, Callable[[], list[Reply]], RequiredSupport, Budgets]] = [
    (
        "answer-after-search",
        lambda: [tool_reply(search("a")), text_reply("ok")],
        RequiredSupport.UNKNOWN,
        Budgets(),
    ),
    (
        "eight-rounds-then-answer",
        lambda: [*[tool_reply(search(f"q{i}")) for i in range(8)], text_reply("ok")],
        RequiredSupport.HONOURED,
        Budgets(),
    ),
    (
        "call-in-answer-round",
        lambda: [
            *[tool_reply(search(f"q{i}")) for i in range(8)],
            tool_reply(search("late")),
            text_reply("ok"),
        ],
        RequiredSupport.HONOURED,
        Budgets(),
    ),
    (
        "text-call-in-answer-round",
        lambda: [*[tool_reply(search(f"q{i}")) for i in range(8)], XML_CALL, text_reply("ok")],
        RequiredSupport.HONOURED,
        Budgets(),
    ),
    (
        "malformed-in-tool-round",
        lambda: [tool_reply(search("a")), MALFORMED, text_reply("ok")],
        RequiredSupport.HONOURED,
        Budgets(),
    ),
    (
        "malformed-in-answer-round",
        lambda: [*[tool_reply(search(f"q{i}")) for i in range(8)], MALFORMED, text_reply("ok")],
        RequiredSupport.HONOURED,
        Budgets(),
    ),
    (
        "empty-tool-round",
        lambda: [Reply([Data(chunk({}, "stop"))]), text_reply("ok")],
        RequiredSupport.HONOURED,
        Budgets(),
    ),
    (
        "two-empty-answer-rounds",
        lambda: [Reply([Data(chunk({}, "stop"))])] * 3,
        RequiredSupport.HONOURED,
        Budgets(),
    ),
    (
        "required-ignored",
        lambda: [text_reply("no"), tool_reply(search("a")), text_reply("ok")],
        RequiredSupport.UNKNOWN,
        Budgets(),
    ),
    (
        "required-refused",
        lambda: [error_reply(400, "no required"), tool_reply(search("a")), text_reply("ok")],
        RequiredSupport.UNKNOWN,
        Budgets(),
    ),
    (
        "budget-spent",
        lambda: [tool_reply(search("a"), search("b")), text_reply("ok")],
        RequiredSupport.HONOURED,
        Budgets(searches=2, pages=1),
    ),
    (
        "repeated-call",
        lambda: [tool_reply(search("a")), tool_reply(search(" A ")), text_reply("ok")],
        RequiredSupport.HONOURED,
        Budgets(),
    ),
    (
        "unknown-tool",
        lambda: [tool_reply(("shell", "{}")), text_reply("ok")],
        RequiredSupport.HONOURED,
        Budgets(),
    ),
    (
        "no-answer-ever",
        lambda: [tool_reply(search(f"q{i}")) for i in range(10)],
        RequiredSupport.HONOURED,
        Budgets(),
    ),
]

CONVERSATIONS: dict[str, list[dict[str, Any]]] = {
    "question": [{"role": "user", "content": "What is new in Rust?"}],
    "system-and-history": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": [{"type": "text", "text": "What is new in Rust?"}]},
    ],
}


def same_role_pairs(messages: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """Consecutive messages of one role, tool results excepted (one per call)."""
    return [
        (i, a["role"])
        for i, (a, b) in enumerate(itertools.pairwise(messages))
        if a["role"] == b["role"] and a["role"] != "tool"
    ]


@pytest.fixture
async def client() -> AsyncIterator[EngineClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0), trust_env=False) as http:
        engines = EngineClient(http)
        yield engines
        engines.close()


@pytest.mark.parametrize("conversation", list(CONVERSATIONS), ids=list(CONVERSATIONS))
@pytest.mark.parametrize(
    ("replies", "support", "budgets"),
    [path[1:] for path in PATHS],
    ids=[path[0] for path in PATHS],
)
async def test_no_two_turns_of_one_role_in_a_row_in_any_loop_path(
    engine: FakeEngine,
    client: EngineClient,
    replies: Callable[[], list[Reply]],
    support: RequiredSupport,
    budgets: Budgets,
    conversation: str,
) -> None:
    engine.script(*replies())
    memory = RequiredMemory()
    settings = EngineSettings(engine.url)
    if support is not RequiredSupport.UNKNOWN:
        memory.learn(settings, support)
    messages = CONVERSATIONS[conversation]
    turn = ChatTurn(
        client=client,
        engine=settings,
        messages=[parse_message(m, i) for i, m in enumerate(messages)],
        fields={"model": "test-model", "messages": messages},
        tools=ToolBox([FakeSearch()]),
        memory=memory,
        options=LoopOptions(budgets=budgets, tool_timeout=5.0),
        filter_factory=default_filter,
    )
    [event async for event in turn.events()]
    assert engine.chats
    for sent in engine.chats:
        assert same_role_pairs(sent["messages"]) == []
        assert [m["role"] for m in sent["messages"]].count("system") == 1


def test_a_gateway_user_turn_after_a_user_turn_is_joined_to_it() -> None:
    question = parse_message({"role": "user", "content": "Q?"}, 0)
    conversation = Conversation([question])
    conversation.add_user("Sources found, with the numbers to cite:\n[1] a — https://a/")
    conversation.add_user(prompts.ANSWER_NOW)
    sent = conversation.messages("SYSTEM")
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[1]["content"] == (
        "Q?\n\nSources found, with the numbers to cite:\n[1] a — https://a/\n\n"
        + prompts.ANSWER_NOW
    )
    # The client's own message object is never changed.
    assert question.raw == {"role": "user", "content": "Q?"}


def test_a_system_line_joins_a_client_system_message_with_parts() -> None:
    system = parse_message(
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]}, 0
    )
    sent = Conversation([system]).messages("WEB")
    assert sent == [
        {
            "role": "system",
            "content": [{"type": "text", "text": "WEB"}, {"type": "text", "text": "Be brief."}],
        }
    ]


#: Paths whose tool rounds end on a round that wrote only a malformed call.
ENDS_MALFORMED: list[tuple[str, Callable[[], list[Reply]], Budgets]] = [
    (
        "eighth-round-malformed",
        lambda: [*[tool_reply(search(f"q{i}")) for i in range(7)], MALFORMED, text_reply("ok")],
        Budgets(),
    ),
    (
        "malformed-beside-the-last-search",
        lambda: [
            Reply(
                [
                    *tool_reply(search("a")).steps[:-2],
                    Data(chunk({"content": '<tool_call>{"name": "web_search", "arguments": {'})),
                    Data(chunk({}, "tool_calls")),
                ]
            ),
            text_reply("ok"),
        ],
        Budgets(searches=1, pages=1),
    ),
    (
        "malformed-in-an-answer-round",
        lambda: [*[tool_reply(search(f"q{i}")) for i in range(8)], MALFORMED, text_reply("ok")],
        Budgets(),
    ),
]


@pytest.mark.parametrize(
    ("replies", "budgets"),
    [path[1:] for path in ENDS_MALFORMED],
    ids=[path[0] for path in ENDS_MALFORMED],
)
async def test_answer_rounds_are_asked_with_the_answer_now_turn_alone(
    engine: FakeEngine, client: EngineClient, replies: Callable[[], list[Reply]], budgets: Budgets
) -> None:
    # SPEC 3.6: one user turn before the answer rounds: the sources list, a blank line,
    # the answer-now line. A malformed call in the last tool round is not answered with
    # "write the call again" in front of it: no tool round is left to write it in.
    engine.script(*replies())
    memory = RequiredMemory()
    settings = EngineSettings(engine.url)
    memory.learn(settings, RequiredSupport.HONOURED)
    messages = CONVERSATIONS["question"]
    turn = ChatTurn(
        client=client,
        engine=settings,
        messages=[parse_message(m, i) for i, m in enumerate(messages)],
        fields={"model": "test-model", "messages": messages},
        tools=ToolBox([FakeSearch()]),
        memory=memory,
        options=LoopOptions(budgets=budgets, tool_timeout=5.0),
        filter_factory=default_filter,
    )
    [event async for event in turn.events()]
    answer_rounds = [sent for sent in engine.chats if "tools" not in sent]
    assert answer_rounds
    for sent in answer_rounds:
        last = sent["messages"][-1]
        assert last["role"] == "user"
        assert prompts.MALFORMED_TEXT_CALL not in last["content"]
        assert last["content"].endswith(prompts.ANSWER_NOW)
    first = answer_rounds[0]["messages"][-1]["content"]
    assert first.startswith(prompts.SOURCES_HEADING)
    assert first.split("\n\n") == [turn.ledger.sources_message(), prompts.ANSWER_NOW]
