"""Bytes from the engine that are not UTF-8 (issue 22, finding 6): the Web loop decodes
them with replacement characters, as pass-through relays them, and never drops the chunk."""

from __future__ import annotations

import json
from typing import Any

import httpx

from gateway import prompts
from gateway.engine.client import EngineClient
from gateway.settings import EngineSettings
from testkit.engine import Data, FakeEngine, Raw, Reply, chunk, tool_reply
from tests.gateway.conftest import AUTH, FakeSearch, GatewayFactory

#: One chunk whose content holds a byte that is never UTF-8 (0xff) and a cut sequence.
BROKEN = b'data: {"choices":[{"index":0,"delta":{"content":"caf\xc3 \xff ok"}}]}\n\n'


def broken_reply() -> Reply:
    return Reply(
        [
            Data(chunk({"role": "assistant", "content": ""})),
            Raw(BROKEN),
            Data(chunk({"content": " [1]."})),
            Data(chunk({}, "stop")),
        ]
    )


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "test-model", "messages": [{"role": "user", "content": "hi"}]} | fields


async def test_the_engine_client_keeps_a_chunk_that_is_not_utf8(engine: FakeEngine) -> None:
    engine.script(broken_reply())
    body = json.dumps(chat(stream=True)).encode()
    async with httpx.AsyncClient(trust_env=False) as http:
        client = EngineClient(http)
        try:
            chunks = [c async for c in client.chat_chunks(EngineSettings(engine.url), body)]
        finally:
            client.close()
    assert "".join(c.content for c in chunks) == "caf\ufffd \ufffd ok [1]."


async def test_web_mode_answers_with_replacement_characters(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(tool_reply(("web_search", '{"query": "rust"}')), broken_reply())
    async with gateway_at(tools=[FakeSearch()]) as url:
        response = await http.post(
            f"{url}/v1/chat/completions", json=chat(thor_web_search=True), headers=AUTH
        )
    assert response.status_code == 200
    message = response.json()["choices"][0]["message"]["content"]
    assert message == "caf\ufffd \ufffd ok [1]."
    assert prompts.NO_ANSWER not in message


async def test_pass_through_relays_the_same_bytes(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(broken_reply())
    async with gateway_at() as url:
        response = await http.post(
            f"{url}/v1/chat/completions", json=chat(stream=True), headers=AUTH
        )
    assert BROKEN in response.content
