"""The tool loop against the fake engine: rounds, tool_choice, results, dedup, answer rounds."""

from __future__ import annotations

import asyncio
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
from gateway.loop.rounds import RequiredSupport
from gateway.loop.turn import ChatTurn, FilterFactory, LoopOptions, RequiredMemory, default_filter
from gateway.settings import Budgets, EngineSettings
from gateway.stream.events import Content, Reasoning, RoundStarted, StreamEvent, ToolEvent, Usage
from gateway.tools.base import Tool, ToolBox
from testkit.engine import (
    Data,
    FakeEngine,
    Reply,
    chunk,
    error_reply,
    text_reply,
    tool_reply,
)
from tests.gateway.conftest import BlockingTool, FakeSearch, PlainFilter

QUESTION = [{"role": "user", "content": "What is new in Rust?"}]


@pytest.fixture
async def client() -> AsyncIterator[EngineClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0), trust_env=False) as http:
        engines = EngineClient(http)
        yield engines
        engines.close()


def make_turn(
    client: EngineClient,
    engine: FakeEngine,
    tools: list[Tool],
    *,
    memory: RequiredMemory | None = None,
    budgets: Budgets | None = None,
    filters: FilterFactory = PlainFilter,
    messages: list[dict[str, Any]] | None = None,
    tool_timeout: float = 5.0,
    fields: dict[str, Any] | None = None,
) -> ChatTurn:
    messages = messages or QUESTION
    return ChatTurn(
        client=client,
        engine=EngineSettings(engine.url),
        messages=[parse_message(m, i) for i, m in enumerate(messages)],
        fields={"model": "test-model", "messages": messages, "temperature": 0.2} | (fields or {}),
        tools=ToolBox(tools),
        memory=RequiredMemory() if memory is None else memory,
        options=LoopOptions(budgets=budgets or Budgets(), tool_timeout=tool_timeout),
        filter_factory=filters,
    )


async def run(turn: ChatTurn) -> list[StreamEvent]:
    return [event async for event in turn.events()]


def text(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, Content))


def thor(events: list[StreamEvent]) -> list[dict[str, Any]]:
    return [e.event.payload() for e in events if isinstance(e, ToolEvent)]


def remembered(memory: RequiredMemory, engine: FakeEngine) -> RequiredSupport:
    return memory.get(EngineSettings(engine.url))


def search(query: str) -> tuple[str, str]:
    return ("web_search", json.dumps({"query": query}))


async def test_round_one_required_then_auto_and_answer(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(tool_reply(search("rust 1.90")), text_reply("Rust 1.90 ", "shipped [1]."))
    tool = FakeSearch()
    events = await run(make_turn(client, engine, [tool]))
    assert text(events) == "Rust 1.90 shipped [1]."
    first, second = engine.chats
    assert first["tool_choice"] == "required"
    assert second["tool_choice"] == "auto"
    assert first["tools"] == [tool.schema]
    assert first["stream"] is True
    assert first["temperature"] == 0.2  # unknown fields go to the engine unchanged
    assert first["messages"][0] == {"role": "system", "content": prompts.WEB_SYSTEM}
    assert thor(events) == [
        {"type": "working", "calls": [{"tool": "web_search", "query": "rust 1.90"}]},
        {
            "type": "searched",
            "queries": ["rust 1.90"],
            "time_range": None,
            "kind": None,
            "results": 1,
            "unresponsive_engines": [],
            "error": None,
            "by": "model",
        },
        {"type": "working", "calls": []},
        {
            "type": "sources",
            "sources": [
                {
                    "n": 1,
                    "url": "https://example.org/rust-1.90",
                    "title": "About rust 1.90",
                    "read": False,
                }
            ],
        },
        {"type": "citations", "cited": [1], "unknown": []},
    ]
    assert tool.calls == [{"query": "rust 1.90"}]


async def test_results_come_back_in_call_order_with_ids(
    engine: FakeEngine, client: EngineClient
) -> None:
    tool = FakeSearch()
    tool.gate = asyncio.Event()
    tool.open_at = 3
    engine.script(tool_reply(search("a"), search("b"), search("c")), text_reply("done"))
    await run(make_turn(client, engine, [tool]))
    assert tool.max_running == 3  # the three calls ran at the same time
    messages = engine.chats[1]["messages"]
    assistant = messages[-4]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_0", "call_1", "call_2"]
    results = messages[-3:]
    assert [m["role"] for m in results] == ["tool"] * 3
    assert [m["tool_call_id"] for m in results] == ["call_0", "call_1", "call_2"]
    # Numbers follow completion order; the messages follow call order.
    assert [m["content"].splitlines()[0].split("] ")[1] for m in results] == [
        "About a — https://example.org/a",
        "About b — https://example.org/b",
        "About c — https://example.org/c",
    ]


async def test_every_tool_result_ends_with_the_budget_trailer(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(tool_reply(search("a"), ("nope", "{}")), text_reply("ok"))
    await run(make_turn(client, engine, [FakeSearch()]))
    results = [m for m in engine.chats[1]["messages"] if m["role"] == "tool"]
    assert [m["content"].splitlines()[-1] for m in results] == [
        "Searches used 1 of 16; pages read 0 of 12"
    ] * 2


async def test_empty_ids_are_generated_and_whitespace_content_dropped(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(tool_reply(search("a"), ids=False, content="\n\n"), text_reply("fine"))
    events = await run(make_turn(client, engine, [FakeSearch()]))
    assert text(events) == "fine"
    assistant = engine.chats[1]["messages"][-2]
    call_id = assistant["tool_calls"][0]["id"]
    assert call_id.startswith("call_")
    assert assistant["content"] is None
    assert engine.chats[1]["messages"][-1]["tool_call_id"] == call_id


async def test_a_repeated_call_is_not_rerun_and_the_model_is_told(
    engine: FakeEngine, client: EngineClient
) -> None:
    tool = FakeSearch()
    engine.script(
        tool_reply(search("Rust news")),
        tool_reply(search("  rust   NEWS ")),
        text_reply("answer"),
    )
    await run(make_turn(client, engine, [tool]))
    assert len(tool.calls) == 1
    told = engine.chats[2]["messages"][-1]
    assert told["role"] == "tool"
    assert told["content"].startswith(prompts.DUPLICATE_CALL.format(scope="answer"))


async def test_malformed_and_unknown_calls_are_answered_not_run(
    engine: FakeEngine, client: EngineClient
) -> None:
    tool = FakeSearch()
    engine.script(
        tool_reply(("web_search", '{"query": "cut'), ("shell", '{"cmd": "rm"}')),
        text_reply("sorry"),
    )
    events = await run(make_turn(client, engine, [tool]))
    assert text(events) == "sorry"
    assert tool.calls == []
    bad, unknown = engine.chats[1]["messages"][-2:]
    assert "not a valid JSON object" in bad["content"]
    assert "There is no tool named shell" in unknown["content"]
    assert thor(events) == [{"type": "citations", "cited": [], "unknown": []}]  # no "working"


async def test_working_names_the_calls_that_run_then_none(
    engine: FakeEngine, client: EngineClient
) -> None:
    tool = FakeSearch()
    long = "a  long\nquery " * 30
    engine.script(
        tool_reply(search("Rust news"), search(" rust NEWS"), ("shell", "{}"), search(long)),
        text_reply("answer"),
    )
    events = await run(make_turn(client, engine, [tool]))
    kinds = [e["type"] for e in thor(events)]
    assert kinds == ["working", "searched", "searched", "working", "sources", "citations"]
    started, ended = (e for e in thor(events) if e["type"] == "working")
    # Only the calls that run (not the repeat, not the unknown tool), each by its query on
    # one line, cut to 200 characters.
    assert started["calls"][0] == {"tool": "web_search", "query": "Rust news"}
    (second,) = started["calls"][1:]
    assert second["tool"] == "web_search"
    assert second["query"] == ("a long query " * 16)[:200]
    assert ended == {"type": "working", "calls": []}


async def test_eight_tool_rounds_then_sources_and_answer_now(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(*[tool_reply(search(f"q{i}")) for i in range(8)], text_reply("final [1]"))
    events = await run(make_turn(client, engine, [FakeSearch()]))
    chats = engine.chats
    assert len(chats) == 9
    assert [c.get("tool_choice") for c in chats] == ["required"] + ["auto"] * 7 + [None]
    assert all("tools" in c for c in chats[:8])
    assert "tools" not in chats[8]
    before, turn = chats[8]["messages"][-2:]
    # SPEC 3.6: ONE user turn: the sources list, a blank line, the answer-now line.
    assert before["role"] == "tool"
    assert turn["role"] == "user"
    assert turn["content"].startswith("Sources found, with the numbers to cite")
    assert "[8] About q7 — https://example.org/q7\n\n" in turn["content"]
    assert turn["content"].endswith(f"\n\n{prompts.ANSWER_NOW}")
    sources = [p for p in thor(events) if p["type"] == "sources"]
    assert len(sources[0]["sources"]) == 8
    assert sources[0]["sources"][0] == {
        "n": 1,
        "url": "https://example.org/q0",
        "title": "About q0",
        "read": False,
    }
    assert text(events) == "final [1]"


async def test_an_answer_in_a_tool_round_is_followed_by_the_sources_it_cites(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(tool_reply(search("q")), text_reply("The answer [1]."))
    events = await run(make_turn(client, engine, [FakeSearch()]))
    assert len(engine.chats) == 2
    assert text(events) == "The answer [1]."
    kinds = [p["type"] for p in thor(events)]
    assert kinds[-2:] == ["sources", "citations"]
    assert kinds.count("sources") == 1
    assert thor(events)[-2]["sources"][0]["n"] == 1


async def test_no_sources_event_when_nothing_was_found(
    engine: FakeEngine, client: EngineClient
) -> None:
    # A tool box without web_search: the gateway has no search of its own to make.
    engine.script(text_reply("plain"), text_reply("plain"))
    events = await run(make_turn(client, engine, [FakeSearch("other_search")]))
    assert [p for p in thor(events) if p["type"] == "sources"] == []


async def test_a_call_in_an_answer_round_is_run_and_the_model_asked_once_more(
    engine: FakeEngine, client: EngineClient
) -> None:
    tool = FakeSearch()
    engine.script(
        *[tool_reply(search(f"q{i}")) for i in range(8)],
        tool_reply(search("late")),
        text_reply("answer"),
    )
    events = await run(make_turn(client, engine, [tool]))
    assert tool.calls[-1] == {"query": "late"}
    assert len(engine.chats) == 10
    last = engine.chats[9]
    assert "tools" not in last
    assert last["messages"][-1] == {"role": "user", "content": prompts.ANSWER_NOW}
    assert last["messages"][-2]["role"] == "tool"
    assert text(events) == "answer"


async def test_the_loop_never_ends_with_a_bare_call(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(*[tool_reply(search(f"q{i}")) for i in range(10)])
    events = await run(make_turn(client, engine, [FakeSearch()]))
    assert len(engine.chats) == 10
    assert text(events) == prompts.NO_ANSWER


async def test_a_spent_search_budget_starts_the_answer_rounds(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(tool_reply(search("a"), search("b")), text_reply("answer"))
    await run(make_turn(client, engine, [FakeSearch()], budgets=Budgets(searches=2, pages=1)))
    assert len(engine.chats) == 2
    assert "tools" not in engine.chats[1]
    assert engine.chats[1]["messages"][-1]["content"].endswith(f"\n\n{prompts.ANSWER_NOW}")


async def test_a_400_repeated_with_auto_does_not_mark_the_engine(
    engine: FakeEngine, client: EngineClient
) -> None:
    memory = RequiredMemory()
    engine.script(error_reply(400, "prompt too long"), error_reply(400, "prompt too long"))
    with pytest.raises(EngineStatusError, match="prompt too long"):
        await run(make_turn(client, engine, [FakeSearch()], memory=memory))
    assert [c["tool_choice"] for c in engine.chats] == ["required", "auto"]
    assert remembered(memory, engine) is RequiredSupport.UNKNOWN


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("exceed_context_size_error", "request (2250 tokens) exceeds the available context size"),
        ("BadRequestError", "This model's maximum context length is 2048 tokens."),
    ],
    ids=["llama-server", "vllm"],
)
async def test_a_context_overflow_is_not_taken_for_a_refusal_of_required(
    engine: FakeEngine, client: EngineClient, kind: str, message: str
) -> None:
    memory = RequiredMemory()
    engine.script(error_reply(400, message, kind))
    with pytest.raises(EngineStatusError) as caught:
        await run(make_turn(client, engine, [FakeSearch()], memory=memory))
    assert caught.value.status == 400
    assert caught.value.body()["error"]["type"] == kind
    assert [c["tool_choice"] for c in engine.chats] == ["required"]
    assert remembered(memory, engine) is RequiredSupport.UNKNOWN


async def test_a_preamble_within_the_limit_is_shown_with_the_call(
    engine: FakeEngine, client: EngineClient
) -> None:
    plan = "Plan: " + "x" * (PREAMBLE_LIMIT - 10)
    call = tool_reply(search("a"))
    call.steps.insert(1, Data(chunk({"content": plan})))
    engine.script(call, text_reply("Done [1]."))
    events = await run(make_turn(client, engine, [FakeSearch()]))
    assert text(events) == f"{plan}\n\nDone [1]."


@pytest.mark.parametrize(
    ("fields", "tool_round", "answer_round"),
    [
        ({"max_tokens": 16}, {"max_tokens": 512}, {"max_tokens": 16}),
        (
            {"max_completion_tokens": 16},
            {"max_completion_tokens": 512},
            {"max_completion_tokens": 16},
        ),
        ({"max_tokens": 2000}, {"max_tokens": 2000}, {"max_tokens": 2000}),
        ({}, {}, {}),
        ({"parallel_tool_calls": False}, {"parallel_tool_calls": False}, {}),
    ],
    ids=["small-max-tokens", "small-max-completion-tokens", "large", "none", "client-parallel"],
)
async def test_tool_rounds_get_room_for_a_call_and_parallel_calls(
    engine: FakeEngine,
    client: EngineClient,
    fields: dict[str, Any],
    tool_round: dict[str, Any],
    answer_round: dict[str, Any],
) -> None:
    engine.script(tool_reply(search("a")), text_reply("Done [1]."))
    await run(make_turn(client, engine, [FakeSearch()], budgets=Budgets(searches=1), fields=fields))
    first, answer = engine.chats
    expected = {"parallel_tool_calls": True} | tool_round
    for name in ("max_tokens", "max_completion_tokens", "parallel_tool_calls"):
        assert first.get(name) == expected.get(name), name
        assert answer.get(name) == answer_round.get(name), name
    assert "tools" not in answer


async def test_other_engine_errors_are_not_retried(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(error_reply(500, "out of memory", "server_error"))
    with pytest.raises(EngineStatusError):
        await run(make_turn(client, engine, [FakeSearch()]))
    assert len(engine.chats) == 1


async def test_reasoning_passes_through(engine: FakeEngine, client: EngineClient) -> None:
    engine.script(tool_reply(search("a")), text_reply("ans", reasoning=("think", "ing")))
    events = await run(make_turn(client, engine, [FakeSearch()]))
    assert [e.text for e in events if isinstance(e, Reasoning)] == ["think", "ing"]


async def test_text_of_rounds_is_kept_apart(engine: FakeEngine, client: EngineClient) -> None:
    engine.script(
        Reply(
            [
                Data(chunk({"content": "Let me look."})),
                *tool_reply(search("a")).steps,
            ]
        ),
        text_reply("Found it."),
    )
    events = await run(make_turn(client, engine, [FakeSearch()]))
    assert text(events) == "Let me look.\n\nFound it."


async def test_a_client_system_message_is_merged_with_the_web_line(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(tool_reply(search("a")), text_reply("ok"))
    messages = [{"role": "system", "content": "Be brief."}, *QUESTION]
    await run(make_turn(client, engine, [FakeSearch()], messages=messages))
    sent = engine.chats[0]["messages"]
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[0]["content"] == f"{prompts.WEB_SYSTEM}\n\nBe brief."


async def test_usage_is_summed_over_rounds(engine: FakeEngine, client: EngineClient) -> None:
    engine.script(tool_reply(search("a")), text_reply("ok"))
    events = await run(make_turn(client, engine, [FakeSearch()]))
    usage = [e.counts.payload() for e in events if isinstance(e, Usage)]
    assert usage == [{"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}]
    assert sum(isinstance(e, RoundStarted) for e in events) == 2


async def test_a_slow_tool_is_stopped_and_the_model_told(
    engine: FakeEngine, client: EngineClient
) -> None:
    slow = BlockingTool()
    engine.script(tool_reply(("slow", "{}")), text_reply("ok"))
    await run(make_turn(client, engine, [slow], tool_timeout=0.05))
    assert slow.cancelled.is_set()
    result = engine.chats[1]["messages"][-1]
    assert result["content"].startswith(prompts.TOOL_TIMEOUT.format(name="slow"))


async def test_cancelling_the_turn_cancels_tool_work(
    engine: FakeEngine, client: EngineClient
) -> None:
    slow = BlockingTool()
    engine.script(tool_reply(("slow", "{}")))
    task = asyncio.create_task(run(make_turn(client, engine, [slow])))
    await slow.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slow.cancelled.is_set()


async def test_a_failing_tool_becomes_a_tool_message(
    engine: FakeEngine, client: EngineClient
) -> None:
    class Broken(FakeSearch):
        async def run(self, arguments: Any, context: Any) -> Any:
            if arguments is not None:
                raise RuntimeError("secret page text")
            yield None

    engine.script(tool_reply(search("a")), text_reply("ok"))
    await run(make_turn(client, engine, [Broken()]))
    result = engine.chats[1]["messages"][-1]["content"]
    assert "failed (RuntimeError)" in result
    assert "secret page text" not in result


# --- Calls written as text (the real filter of gateway.loop.tooltext.filter) ---------------------


def pieces(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def test_a_hermes_call_written_as_text_is_run_and_hidden(
    engine: FakeEngine, client: EngineClient
) -> None:
    written = (
        'Checking. <tool_call>{"name": "web_search", "arguments": {"query": "rust"}}</tool_call>'
    )
    engine.script(text_reply(*pieces(written)), text_reply("Answer [1]."))
    tool = FakeSearch()
    memory = RequiredMemory()
    events = await run(make_turn(client, engine, [tool], filters=default_filter, memory=memory))
    assert tool.calls == [{"query": "rust"}]
    assert text(events) == "Checking. \n\nAnswer [1]."
    assert "<tool_call>" not in text(events)
    assistant = engine.chats[1]["messages"][-2]
    assert assistant["content"] == "Checking. "
    assert assistant["tool_calls"][0]["function"]["name"] == "web_search"
    assert assistant["tool_calls"][0]["id"].startswith("call_")
    assert remembered(memory, engine) is RequiredSupport.HONOURED


async def test_an_xml_call_in_an_answer_round_is_run_then_asked_once_more(
    engine: FakeEngine, client: EngineClient
) -> None:
    tool = FakeSearch()
    written = (
        "<tool_call>\n<function=web_search>\n<parameter=query>\nlate news\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    engine.script(
        *[tool_reply(search(f"q{i}")) for i in range(8)],
        text_reply(*pieces(written, 5)),
        text_reply("Final."),
    )
    events = await run(make_turn(client, engine, [tool], filters=default_filter))
    assert tool.calls[-1] == {"query": "late news"}
    assert "tools" not in engine.chats[8]
    assert text(events) == "Final."


async def test_a_malformed_text_call_is_reported_to_the_model(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(
        tool_reply(search("a")),
        text_reply('<tool_call>{"name": "web_search", "arguments": {"query": '),
        text_reply("Answer."),
    )
    tool = FakeSearch()
    events = await run(make_turn(client, engine, [tool], filters=default_filter))
    assert len(tool.calls) == 1
    assert engine.chats[2]["messages"][-1] == {
        "role": "user",
        "content": prompts.MALFORMED_TEXT_CALL,
    }
    assert text(events) == "Answer."
