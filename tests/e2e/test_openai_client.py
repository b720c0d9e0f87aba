"""The official ``openai`` client consumes a whole Web-on answer, streaming and not."""

from __future__ import annotations

import json
from typing import Any

from openai import AsyncOpenAI

from testkit.engine import text_reply, tool_reply
from testkit.origin import html
from tests.e2e.conftest import KEY, Gateway, World

QUESTION: Any = [{"role": "user", "content": "How do I descale a kettle?"}]
WEB = {"thor_web_search": True}


def script(world: World) -> None:
    world.results_on_origin()
    world.origin.routes["/kettle/descale"] = html(
        "<html><head><title>Descaling</title></head><body><main><p>Use citric acid.</p>"
        "</main></body></html>"
    )
    world.engine.script(
        tool_reply(("web_search", json.dumps({"query": "kettle descale"}))),
        tool_reply(
            ("fetch_page_content_recursive", json.dumps({"url": world.url("/kettle/descale")}))
        ),
        text_reply("Use citric acid ", "[1]."),
    )


async def test_streaming_answer_and_events_through_the_openai_client(
    world: World, gateway: Gateway
) -> None:
    script(world)
    async with AsyncOpenAI(base_url=gateway.api, api_key=KEY, max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="test-model", messages=QUESTION, stream=True, extra_body=WEB
        )
        text, events, finish = "", [], None
        async for part in stream:
            extra = part.model_extra or {}
            if "thor_event" in extra:
                events.append(extra["thor_event"])
            if part.choices:
                text += part.choices[0].delta.content or ""
                finish = part.choices[0].finish_reason or finish
    assert text == "Use citric acid [1]."
    assert finish == "stop"
    assert [e["type"] for e in events] == [
        "working",
        "searched",
        "working",
        "working",
        "read",
        "working",
        "sources",
        "citations",
    ]
    assert events[0] == {
        "type": "working",
        "calls": [{"tool": "web_search", "query": "kettle descale"}],
    }
    assert events[4]["title"] == "Descaling"
    assert events[-1] == {"type": "citations", "cited": [1], "unknown": []}


async def test_whole_answer_and_events_through_the_openai_client(
    world: World, gateway: Gateway
) -> None:
    script(world)
    async with AsyncOpenAI(base_url=gateway.api, api_key=KEY, max_retries=0) as client:
        completion = await client.chat.completions.create(
            model="test-model", messages=QUESTION, extra_body=WEB
        )
    assert completion.choices[0].message.content == "Use citric acid [1]."
    assert completion.choices[0].finish_reason == "stop"
    events = (completion.model_extra or {})["thor_events"]
    assert [e["type"] for e in events] == ["searched", "read", "sources", "citations"]
    assert events[2]["sources"][0]["url"] == world.url("/kettle/descale")
