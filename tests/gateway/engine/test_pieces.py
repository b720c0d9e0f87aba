"""Events that arrive in many pieces (issue 22, "Everywhere": one large event cost the square
of its size in both engine readers; bench/scaling.py measures it). What comes out must not
depend on where the engine's writes were cut."""

from __future__ import annotations

import json
from typing import Any

import httpx

from gateway.engine.client import EngineClient
from gateway.settings import EngineSettings
from testkit.engine import FakeEngine, Raw, Reply
from tests.gateway.conftest import AUTH, GatewayFactory

BIG = "x" * 300_000


def event(content: str) -> bytes:
    payload = {"choices": [{"index": 0, "delta": {"content": content}}]}
    return b"data: " + json.dumps(payload).encode()


def pieces(data: bytes, size: int) -> list[Raw]:
    return [Raw(data[i : i + size]) for i in range(0, len(data), size)]


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "test-model", "messages": [{"role": "user", "content": "hi"}]} | fields


def script() -> Reply:
    # One large event in 1,000-byte pieces (no line end in most), then a small one whose
    # blank line is split between two writes, CRLF style.
    return Reply(
        [
            *pieces(event(BIG) + b"\n\n", 1000),
            Raw(event(" end") + b"\r\n\r"),
            Raw(b"\n"),
        ]
    )


async def test_the_web_loops_reader_joins_an_event_cut_in_pieces(engine: FakeEngine) -> None:
    engine.script(script())
    async with httpx.AsyncClient(trust_env=False) as http:
        client = EngineClient(http)
        try:
            body = json.dumps(chat(stream=True)).encode()
            chunks = [c async for c in client.chat_chunks(EngineSettings(engine.url), body)]
        finally:
            client.close()
    assert [c.content for c in chunks] == [BIG, " end"]


async def test_pass_through_relays_an_event_cut_in_pieces_as_one(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(script())
    async with gateway_at() as url:
        response = await http.post(
            f"{url}/v1/chat/completions", json=chat(stream=True), headers=AUTH
        )
    assert response.content == (
        event(BIG) + b"\n\n" + event(" end") + b"\r\n\r\n" + b"data: [DONE]\n\n"
    )
