"""The gateway's own first search (SPEC 3.2), against the fake engine: one test per way an
engine fails to make the model call a tool in round 1, and the rules around it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from gateway import prompts
from gateway.api.messages import parse_message
from gateway.api.quirks import PREAMBLE_LIMIT
from gateway.engine.client import EngineClient
from gateway.errors import EngineStatusError
from gateway.loop.first_search import QUERY_CHARS, first_query, fold_query
from gateway.loop.rounds import RequiredSupport
from gateway.loop.turn import RequiredMemory
from gateway.settings import Budgets, EngineSettings
from gateway.stream.events import Content, StreamEvent
from testkit.engine import (
    Data,
    FakeEngine,
    Reply,
    Stall,
    chunk,
    cut_reply,
    error_reply,
    text_reply,
    tool_reply,
)
from tests.gateway.conftest import FakeSearch
from tests.gateway.loop.test_turn import (
    QUESTION,
    make_turn,
    remembered,
    run,
    search,
    text,
    thor,
)

ASKED = QUESTION[0]["content"]


@pytest.fixture
async def client() -> AsyncIterator[EngineClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0), trust_env=False) as http:
        engines = EngineClient(http)
        yield engines
        engines.close()


def gateway_call(chat: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The assistant turn with the gateway's call and its tool turn, as the engine got
    them: the two messages right after the client's question."""
    messages = chat["messages"]
    assert messages[1] == QUESTION[0]
    return messages[2], messages[3]


def assert_searched_by_gateway(events: list[StreamEvent], chat: dict[str, Any]) -> None:
    """The gateway's search, as the client sees it and as the engine is sent it."""
    assert thor(events)[:3] == [
        {"type": "working", "calls": [{"tool": "web_search", "query": ASKED}]},
        {
            "type": "searched",
            "queries": [ASKED],
            "time_range": None,
            "kind": None,
            "results": 1,
            "unresponsive_engines": [],
            "error": None,
            "by": "gateway",
        },
        {"type": "working", "calls": []},
    ]
    assistant, tool = gateway_call(chat)
    call_id = assistant["tool_calls"][0]["id"]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "web_search", "arguments": json.dumps({"query": ASKED})},
            }
        ],
    }
    assert call_id.startswith("call_")
    assert tool["role"] == "tool"
    assert tool["tool_call_id"] == call_id
    # Counted against the budget like a model's search.
    assert tool["content"].endswith("\nSearches used 1 of 16; pages read 0 of 12")


async def test_an_engine_ignoring_required_gets_the_gateways_search_then_auto(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(text_reply("I think without searching."), text_reply("It is 1.90 [1]."))
    memory = RequiredMemory()
    tool = FakeSearch()
    events = await run(make_turn(client, engine, [tool], memory=memory))

    assert text(events) == "It is 1.90 [1]."  # the held prose is never shown
    assert [c["tool_choice"] for c in engine.chats] == ["required", "auto"]
    assert tool.calls == [{"query": ASKED}]
    assert_searched_by_gateway(events, engine.chats[1])
    assert "I think" not in json.dumps(engine.chats[1]["messages"])
    assert engine.chats[1]["messages"][0] == {"role": "system", "content": prompts.WEB_SYSTEM}
    assert remembered(memory, engine) is RequiredSupport.IGNORED
    assert thor(events)[-1] == {"type": "citations", "cited": [1], "unknown": []}


async def test_an_engine_refusing_required_with_a_400_gets_the_gateways_search_then_auto(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(
        error_reply(400, "tool_choice 'required' is not supported"), text_reply("One [1].")
    )
    memory = RequiredMemory()
    tool = FakeSearch()
    events = await run(make_turn(client, engine, [tool], memory=memory))

    assert text(events) == "One [1]."
    assert [c["tool_choice"] for c in engine.chats] == ["required", "auto"]
    assert tool.calls == [{"query": ASKED}]
    assert_searched_by_gateway(events, engine.chats[1])
    assert remembered(memory, engine) is RequiredSupport.REFUSED


@pytest.mark.parametrize("ending", ["past-the-limit", "cut-by-length"])
async def test_a_required_round_writing_prose_gets_the_gateways_search(
    engine: FakeEngine, client: EngineClient, ending: str
) -> None:
    if ending == "past-the-limit":
        # The engine would go on writing (Stall: the stream never ends); the loop stops
        # reading past PREAMBLE_LIMIT characters and closes the stream.
        pieces = [Data(chunk({"content": "word " * 20})) for _ in range(PREAMBLE_LIMIT // 100 + 1)]
        assert sum(len(p.obj["choices"][0]["delta"]["content"]) for p in pieces) > PREAMBLE_LIMIT
        first = Reply([*pieces, Stall()])
    else:
        # Ended by the engine's token limit before PREAMBLE_LIMIT, still without a call.
        first = cut_reply("I will search the web for ", "what is new in Rust and then")
    engine.script(first, text_reply("Done [1]."))
    memory = RequiredMemory()
    events = await run(make_turn(client, engine, [FakeSearch()], memory=memory))

    assert engine.closed_early.is_set() is (ending == "past-the-limit")
    assert text(events) == "Done [1]."
    assert [c["tool_choice"] for c in engine.chats] == ["required", "auto"]
    assert_searched_by_gateway(events, engine.chats[1])
    assert all(w not in json.dumps(engine.chats[1]["messages"]) for w in ("word", "I will"))
    assert remembered(memory, engine) is RequiredSupport.IGNORED


async def test_an_engine_that_honoured_required_before_and_writes_prose_now(
    engine: FakeEngine, client: EngineClient
) -> None:
    memory = RequiredMemory()
    memory.learn(EngineSettings(engine.url), RequiredSupport.HONOURED)
    engine.script(text_reply("From memory: 1.89."), text_reply("The answer [1]."))
    events = await run(make_turn(client, engine, [FakeSearch()], memory=memory))
    assert text(events) == "The answer [1]."
    assert [c["tool_choice"] for c in engine.chats] == ["required", "auto"]
    assert_searched_by_gateway(events, engine.chats[1])
    assert remembered(memory, engine) is RequiredSupport.IGNORED


@pytest.mark.parametrize("support", [RequiredSupport.IGNORED, RequiredSupport.REFUSED])
async def test_a_remembered_engine_starts_with_the_gateways_search_and_wastes_no_round(
    engine: FakeEngine, client: EngineClient, support: RequiredSupport
) -> None:
    memory = RequiredMemory()
    memory.learn(EngineSettings(engine.url), support)
    engine.script(tool_reply(search("rust 1.90 notes")), text_reply("Both [1][2]."))
    tool = FakeSearch()
    events = await run(make_turn(client, engine, [tool], memory=memory))

    assert text(events) == "Both [1][2]."
    # Round 1 is already "auto", and already has the gateway's search in front of it.
    assert [c["tool_choice"] for c in engine.chats] == ["auto", "auto"]
    assert_searched_by_gateway(events, engine.chats[0])
    assert tool.calls == [{"query": ASKED}, {"query": "rust 1.90 notes"}]
    by = [e["by"] for e in thor(events) if e["type"] == "searched"]
    assert by == ["gateway", "model"]
    assert remembered(memory, engine) is support


async def test_a_model_repeating_the_gateways_search_is_told_it_already_ran(
    engine: FakeEngine, client: EngineClient
) -> None:
    memory = RequiredMemory()
    memory.learn(EngineSettings(engine.url), RequiredSupport.IGNORED)
    engine.script(tool_reply(search("  what is NEW in rust? ")), text_reply("ok"))
    tool = FakeSearch()
    await run(make_turn(client, engine, [tool], memory=memory))
    assert tool.calls == [{"query": ASKED}]  # the same call, as a model's would be
    assert engine.chats[1]["messages"][-1]["content"].startswith(
        prompts.DUPLICATE_CALL.format(scope=prompts.Scope.ANSWER)
    )


async def test_the_gateways_search_can_spend_the_budget_and_start_the_answer_rounds(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(text_reply("prose"), text_reply("answer [1]"))
    events = await run(
        make_turn(client, engine, [FakeSearch()], budgets=Budgets(searches=1, pages=1))
    )
    assert text(events) == "answer [1]"
    assert [c.get("tool_choice") for c in engine.chats] == ["required", None]
    assert engine.chats[1]["messages"][-1]["content"].endswith(f"\n\n{prompts.ANSWER_NOW}")


async def test_a_question_without_words_gets_no_gateway_search(
    engine: FakeEngine, client: EngineClient
) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [{"role": "user", "content": [image]}]
    engine.script(text_reply("prose"), text_reply("a picture"))
    tool = FakeSearch()
    events = await run(make_turn(client, engine, [tool], messages=messages))
    assert text(events) == "a picture"
    assert tool.calls == []
    assert [c["tool_choice"] for c in engine.chats] == ["required", "auto"]


async def test_a_400_that_is_not_about_required_still_reaches_the_client(
    engine: FakeEngine, client: EngineClient
) -> None:
    # The gateway cannot tell this 400 from a refusal of "required": it searches, asks
    # with "auto", and the engine's second 400 is the answer. The engine is not marked.
    memory = RequiredMemory()
    engine.script(error_reply(400, "bad seed"), error_reply(400, "bad seed"))
    turn = make_turn(client, engine, [FakeSearch()], memory=memory)
    events: list[StreamEvent] = []

    async def answer() -> None:
        async for event in turn.events():
            events.append(event)

    with pytest.raises(EngineStatusError, match="bad seed"):
        await answer()
    assert [c["tool_choice"] for c in engine.chats] == ["required", "auto"]
    assert not any(isinstance(e, Content) for e in events)
    assert remembered(memory, engine) is RequiredSupport.UNKNOWN


# --- The query (pure) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "query"),
    [
        ("What is new in Rust?", "What is new in Rust?"),
        ("  What\tis\n\nnew   in Rust?\n", "What is new in Rust?"),
        ("a\u00a0b\u2003c", "a b c"),  # Unicode spaces fold too
        ("", None),
        (" \n\t ", None),
        ("x" * 199 + " y", "x" * 199),  # " y" would make 201
        ("x" * 198 + " y", "x" * 198 + " y"),  # exactly 200
        ("x" * 250, "x" * 200),  # one word longer than the limit: cut inside it
        ("word " * 100, " ".join(["word"] * 40)),  # 40 * 5 - 1 = 199 characters
    ],
    ids=[
        "as-is",
        "whitespace-folded",
        "unicode-spaces",
        "empty",
        "blank",
        "cut-before-a-word-that-passes-200",
        "exactly-200",
        "one-long-word",
        "many-words",
    ],
)
def test_the_query_is_the_message_folded_and_cut_at_a_word_boundary(
    message: str, query: str | None
) -> None:
    assert fold_query(message) == query
    if query is not None:
        assert len(query) <= QUERY_CHARS


def test_the_query_comes_from_the_users_last_message() -> None:
    raw = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "second"}, {"type": "text", "text": "part"}],
        },
        {"role": "assistant", "content": "prefill"},
    ]
    messages = [parse_message(m, i) for i, m in enumerate(raw)]
    assert first_query(messages) == "second part"
    assert first_query(messages[:1]) is None


def test_a_megabyte_message_gives_the_same_cut() -> None:
    assert fold_query("w " * 500_000) == " ".join(["w"] * 100)
