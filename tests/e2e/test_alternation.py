"""The gateway never sends two consecutive messages of the same role that it created itself
(SPEC 3.6: Gemma's and some Mistral chat templates reject them), on every loop path, with
the real research tools. Every message list the engine received is checked."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from gateway.settings import Budgets
from testkit.engine import Reply, error_reply, text_reply, tool_reply
from testkit.origin import html
from tests.e2e.client import body, stream_answer
from tests.e2e.conftest import GatewayFactory, World

PAGE = "/kettle/descale"


def search(query: str) -> tuple[str, str]:
    return ("web_search", json.dumps({"query": query}))


def fetch(url: str) -> tuple[str, str]:
    return ("fetch_page_content_recursive", json.dumps({"url": url}))


def hermes(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


@dataclass(frozen=True)
class Path:
    """One way through the loop: the engine's replies (given the page's address, known
    only when the origin runs), and the search budget."""

    replies: Callable[[str], list[Reply]]
    searches: int = 16


PATHS: dict[str, Path] = {
    "answer-in-a-tool-round": Path(
        lambda page: [tool_reply(search("a")), text_reply("Answer [1].")]
    ),
    "search-read-answer": Path(
        lambda page: [tool_reply(search("a")), tool_reply(fetch(page)), text_reply("Answer [1].")]
    ),
    "eight-tool-rounds-then-answer-rounds": Path(
        lambda page: [tool_reply(search(f"q{i}")) for i in range(8)] + [text_reply("Answer [1].")]
    ),
    "search-budget-spent": Path(
        lambda page: [tool_reply(search("a")), text_reply("Answer.")], searches=1
    ),
    "call-in-an-answer-round": Path(
        lambda page: [tool_reply(search("a")), tool_reply(fetch(page)), text_reply("Answer [1].")],
        searches=1,
    ),
    "calls-in-both-answer-rounds": Path(
        lambda page: [tool_reply(search("a")), tool_reply(fetch(page)), tool_reply(search("b"))],
        searches=1,
    ),
    "text-call-in-an-answer-round": Path(
        lambda page: [
            tool_reply(search("a")),
            text_reply(hermes("fetch_page_content_recursive", {"url": page})),
            text_reply("Answer [1]."),
        ],
        searches=1,
    ),
    "malformed-text-call": Path(
        lambda page: [
            text_reply('<tool_call>{"name": "web_search", "arguments": {"query": "a'),
            tool_reply(search("a")),
            text_reply("Answer."),
        ]
    ),
    "malformed-text-call-in-an-answer-round": Path(
        lambda page: [
            tool_reply(search("a")),
            text_reply('<tool_call>{"name": "web_search", "arguments": '),
            text_reply("Answer."),
        ],
        searches=1,
    ),
    "repeated-and-unknown-calls": Path(
        lambda page: [
            tool_reply(search("a")),
            tool_reply(search(" A "), ("shell", '{"cmd": "ls"}')),
            text_reply("Answer."),
        ]
    ),
    "engine-refuses-required": Path(
        lambda page: [
            error_reply(400, "tool_choice required is not supported"),
            tool_reply(search("a")),
            text_reply("Answer."),
        ]
    ),
    "engine-ignores-required": Path(
        lambda page: [text_reply("I know already."), tool_reply(search("a")), text_reply("Answer.")]
    ),
    "empty-tool-round": Path(
        lambda page: [tool_reply(search("a")), text_reply(), text_reply("Answer.")]
    ),
    "empty-answer-round-then-answer": Path(
        lambda page: [tool_reply(search("a")), text_reply(), text_reply("Answer.")], searches=1
    ),
    "nothing-but-empty-rounds": Path(
        lambda page: [text_reply(), text_reply(), text_reply(), text_reply()]
    ),
    "text-beside-a-call": Path(
        lambda page: [tool_reply(search("a"), content="Let me look."), text_reply("Answer.")]
    ),
    "failing-tools": Path(
        lambda page: [
            tool_reply(search("a")),
            tool_reply(fetch(page + "-missing"), fetch("https://other.test/")),
            text_reply("Answer."),
        ]
    ),
}

CONVERSATIONS: dict[str, list[dict[str, Any]]] = {
    "one-question": [{"role": "user", "content": "How do I descale a kettle?"}],
    "system-and-earlier-turns": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello."},
        {"role": "assistant", "content": "Hello! What do you need?"},
        {"role": "user", "content": "How do I descale a kettle?"},
    ],
}


def check_alternation(sent: list[dict[str, Any]], client: list[dict[str, Any]]) -> None:
    """No two consecutive messages share a role where the second is the gateway's own
    (tool results excepted: one per call), and every tool result answers a call of the
    assistant turn it follows."""
    roles = [m["role"] for m in sent]
    assert roles.count("system") == 1
    assert roles[0] == "system"
    ours_from = len(client) + (0 if client[0]["role"] == "system" else 1)
    assert len(sent) >= ours_from
    calls: list[str] = []
    for i in range(ours_from, len(sent)):
        before, message = sent[i - 1], sent[i]
        if message["role"] == "tool":
            assert calls, f"a tool result without a call at {i}: {roles}"
            assert message["tool_call_id"] == calls.pop(0), (i, roles)
            continue
        assert not calls, f"results missing before message {i}: {roles}"
        assert message["role"] != before["role"], f"two {message['role']} turns at {i}: {roles}"
        calls = [c["id"] for c in message.get("tool_calls") or []]


@pytest.mark.parametrize("conversation", CONVERSATIONS.values(), ids=CONVERSATIONS.keys())
@pytest.mark.parametrize("path", PATHS.values(), ids=PATHS.keys())
async def test_no_two_consecutive_gateway_messages_share_a_role(
    world: World,
    gateway_for: GatewayFactory,
    http: httpx.AsyncClient,
    path: Path,
    conversation: list[dict[str, Any]],
) -> None:
    world.results_on_origin()
    world.origin.routes[PAGE] = html("<html><head><title>Descaling</title></head><body>Acid.")
    world.engine.script(*path.replies(world.url(PAGE)))
    request = body() | {"messages": conversation}
    async with gateway_for(budgets=Budgets(searches=path.searches, pages=12)) as gateway:
        answer = await stream_answer(http, gateway.api, request)
    # The loop always ends with an answer or a clear message, never with nothing.
    assert answer.text.strip()
    assert answer.sequence[-2:] == ["citations", "[DONE]"]
    assert world.engine.chats, "the engine was never asked"
    for sent in world.engine.chats:
        check_alternation(sent["messages"], conversation)
