"""The official ``openai`` client against the gateway, web on and off, both call styles."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI, OpenAI

from testkit.engine import (
    Data,
    FakeEngine,
    Reply,
    chunk,
    completion_body,
    text_reply,
    tool_reply,
)
from tests.gateway.conftest import KEY, FakeSearch, GatewayFactory

MESSAGES: Any = [{"role": "user", "content": "What changed in Rust this week?"}]
WEB = {"thor_web_search": True}


def search_then_answer(engine: FakeEngine) -> None:
    engine.script(
        tool_reply(("web_search", '{"query": "rust news"}')),
        text_reply("Rust 1.90 ", "shipped [1].", reasoning=("checking",)),
    )


async def test_async_streaming_with_web_reads_events_from_extra_fields(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    search_then_answer(engine)
    async with gateway_at(tools=[FakeSearch()]) as url:
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
        async with client:
            stream = await client.chat.completions.create(
                model="test-model", messages=MESSAGES, stream=True, extra_body=WEB
            )
            text, events, finish, reasoning = "", [], None, ""
            async for part in stream:
                extra = part.model_extra or {}
                if "thor_event" in extra:
                    events.append(extra["thor_event"])
                if not part.choices:
                    continue
                delta = part.choices[0].delta
                text += delta.content or ""
                reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
                finish = part.choices[0].finish_reason or finish
    assert text == "Rust 1.90 shipped [1]."
    assert events == [
        {"type": "working", "calls": [{"tool": "web_search", "query": "rust news"}]},
        {
            "type": "searched",
            "queries": ["rust news"],
            "time_range": None,
            "kind": None,
            "results": 1,
            "unresponsive_engines": [],
            "error": None,
        },
        {"type": "working", "calls": []},
        {
            "type": "sources",
            "sources": [
                {"n": 1, "url": "https://example.org/rust-news", "title": "About rust news"}
            ],
        },
        {"type": "citations", "cited": [1], "unknown": []},
    ]
    assert finish == "stop"
    assert reasoning == "checking"


async def test_async_non_streaming_with_web_has_the_events_field(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    search_then_answer(engine)
    async with (
        gateway_at(tools=[FakeSearch()]) as url,
        AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0) as client,
    ):
        answer = await client.chat.completions.create(
            model="test-model", messages=MESSAGES, extra_body=WEB
        )
    assert answer.choices[0].message.content == "Rust 1.90 shipped [1]."
    assert answer.choices[0].finish_reason == "stop"
    assert (answer.model_extra or {})["thor_events"][0]["type"] == "searched"
    assert answer.usage is not None


def _sync_calls(url: str) -> tuple[str, str, list[str]]:
    """The client's everyday idiom, blocking (run in a thread)."""
    with OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0) as client:
        pieces: list[str] = []
        for part in client.chat.completions.create(
            model="test-model", messages=MESSAGES, stream=True
        ):
            if part.choices and part.choices[0].delta.content:
                pieces.append(part.choices[0].delta.content)
        plain = client.chat.completions.create(model="test-model", messages=MESSAGES)
        models = [m.id for m in client.models.list()]
    return "".join(pieces), plain.choices[0].message.content or "", models


async def test_sync_client_streaming_and_not_without_web(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    engine.script(text_reply("plain ", "answer"), Reply(body=completion_body("whole answer")))
    async with gateway_at() as url:
        streamed, whole, models = await asyncio.to_thread(_sync_calls, url)
    assert streamed == "plain answer"
    assert whole == "whole answer"
    assert models == ["test-model"]
    assert all("tools" not in c for c in engine.chats)


async def test_client_sees_an_error_event_as_an_api_error(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    engine.script(
        tool_reply(("web_search", '{"query": "x"}')),
        Reply([Data(chunk({"content": "Part"})), Data({"error": {"message": "slot crashed"}})]),
    )
    async with (
        gateway_at(tools=[FakeSearch()]) as url,
        AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0) as client,
    ):
        stream = await client.chat.completions.create(
            model="test-model", messages=MESSAGES, stream=True, extra_body=WEB
        )
        with pytest.raises(openai.APIError, match="slot crashed"):
            async for _ in stream:
                pass


@pytest.mark.parametrize(
    ("key", "model", "error"),
    [
        ("wrong-key-0123456789", "test-model", openai.AuthenticationError),
        (KEY, "no-such-model", openai.NotFoundError),
    ],
    ids=["401", "404"],
)
async def test_client_errors_map_to_the_clients_exceptions(
    gateway_at: GatewayFactory, key: str, model: str, error: type[Exception]
) -> None:
    async with (
        gateway_at() as url,
        AsyncOpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0) as client,
    ):
        with pytest.raises(error):
            await client.chat.completions.create(model=model, messages=MESSAGES)


def usage_on_request(reply: Reply, asked: bool) -> Reply:
    """An engine that sends the usage chunk only when asked (llama-server, vLLM)."""
    if asked:
        return reply
    return Reply([s for s in reply.steps if not (isinstance(s, Data) and not s.obj["choices"])])


@pytest.mark.parametrize("web", [False, True], ids=["pass-through", "web"])
@pytest.mark.parametrize("usage", [False, True], ids=["no-usage", "usage"])
async def test_every_stream_chunk_parses_and_the_turn_ends_as_spec_4_says(
    engine: FakeEngine, gateway_at: GatewayFactory, web: bool, usage: bool
) -> None:
    if web:
        engine.script(tool_reply(("web_search", '{"query": "rust news"}')))
    engine.script(usage_on_request(text_reply("Rust ", "shipped [1].", reasoning=("hm",)), usage))
    extra: dict[str, Any] = {"thor_web_search": True} if web else {}
    async with (
        gateway_at(tools=[FakeSearch()]) as url,
        AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0) as client,
    ):
        stream = await client.chat.completions.create(
            model="test-model",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True} if usage else openai.omit,
            extra_body=extra,
        )
        parts = [part async for part in stream]  # the client stops at [DONE]
    with_choices = [p for p in parts if p.choices]
    text = "".join(p.choices[0].delta.content or "" for p in with_choices)
    reasoning = "".join(
        (p.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for p in with_choices
    )
    assert (text, reasoning) == ("Rust shipped [1].", "hm")
    assert len({p.id for p in parts}) == 1
    finishes = [p.choices[0].finish_reason for p in with_choices if p.choices[0].finish_reason]
    assert finishes == ["stop"]  # one end, never "tool_calls"
    assert all(not p.choices[0].delta.tool_calls for p in with_choices)
    usage_chunks = [p for p in parts if not p.choices]
    assert [p.usage is not None for p in usage_chunks] == ([True] if usage else [])
    if usage:
        assert parts[-1] is usage_chunks[0]  # the usage chunk comes last
    events = [(p.model_extra or {}).get("thor_event") for p in parts]
    kinds = [e["type"] for e in events if e]
    # Streams also say when a round's calls start and end ("working", README).
    expected = ["working", "searched", "working", "sources", "citations"]
    assert kinds == (expected if web else [])
    for part, event in zip(parts, events, strict=True):
        if event:
            assert part.choices[0].delta.content is None
            assert part.choices[0].finish_reason is None


@pytest.mark.parametrize("web", [False, True], ids=["pass-through", "web"])
async def test_a_whole_answer_parses_with_its_events_only_under_the_switch(
    engine: FakeEngine, gateway_at: GatewayFactory, web: bool
) -> None:
    if web:
        search_then_answer(engine)
    else:
        engine.script(Reply(body=completion_body("whole answer")))
    async with (
        gateway_at(tools=[FakeSearch()]) as url,
        AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0) as client,
    ):
        answer = await client.chat.completions.create(
            model="test-model", messages=MESSAGES, extra_body=WEB if web else {}
        )
    assert answer.object == "chat.completion"
    assert answer.choices[0].finish_reason == "stop"
    events = (answer.model_extra or {}).get("thor_events")
    if web:
        assert answer.choices[0].message.content == "Rust 1.90 shipped [1]."
        assert [e["type"] for e in events or []] == ["searched", "sources", "citations"]
        assert (answer.choices[0].message.model_extra or {})["reasoning_content"] == "checking"
    else:
        assert answer.choices[0].message.content == "whole answer"
        assert events is None


async def test_several_choices_pass_through_unchanged(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    def two(delta: dict[str, Any], finish: str | None = None) -> Data:
        base = chunk(delta, finish)
        base["choices"] = [
            {**base["choices"][0], "index": i, "delta": dict(delta)} for i in range(2)
        ]
        return Data(base)

    engine.script(
        Reply([two({"role": "assistant", "content": ""}), two({"content": "x"}), two({}, "stop")])
    )
    async with (
        gateway_at() as url,
        AsyncOpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0) as client,
    ):
        stream = await client.chat.completions.create(
            model="test-model", messages=MESSAGES, stream=True, n=2
        )
        parts = [part async for part in stream]
    assert [[c.index for c in p.choices] for p in parts] == [[0, 1]] * 3
    assert engine.chats[0]["n"] == 2
