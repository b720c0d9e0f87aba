"""Bad input is a 4xx, never a traceback, and the in-flight gauge always comes back.

Regressions of what testing the gateway as a service found (issue 8).
"""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from prometheus_client import CollectorRegistry

from testkit.engine import (
    FakeEngine,
    text_reply,
    tool_reply,
)
from tests.gateway.conftest import (
    AUTH,
    CHATS,
    JSON,
    KEY,
    FakeSearch,
    GatewayFactory,
    outcome,
    sample,
    until,
)

# --- 3, 4, 5. Bad input is a 4xx, and the in-flight gauge always comes back -------------


@pytest.mark.parametrize("web", [False, True], ids=["pass-through", "web"])
async def test_a_lone_surrogate_is_passed_on_not_a_500(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient, web: bool
) -> None:
    # A JavaScript client cutting an emoji in two, with the switch written out.
    raw = (
        b'{"model": "test-model", "messages": [{"role": "user", "content": "hi \\ud83d"}],'
        b' "thor_web_search": ' + (b"true" if web else b"false") + b"}"
    )
    engine.script(tool_reply(("web_search", '{"query": "x"}')), text_reply("ok"))
    async with gateway_at(tools=[FakeSearch()]) as url:
        response = await http.post(f"{url}{CHATS}", content=raw, headers={**AUTH, **JSON})
    assert response.status_code == 200
    sent = engine.chats[0]["messages"]
    assert sent[-1]["content"] == "hi \ud83d"


@pytest.mark.parametrize("depth", [1000, 100_000])
async def test_deeply_nested_json_is_400_and_the_gauge_returns(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient, depth: int
) -> None:
    raw = b'{"model": "test-model", "messages": ' + b"[" * depth + b"]" * depth + b"}"
    registry = CollectorRegistry()
    async with gateway_at(registry=registry) as url:
        response = await http.post(f"{url}{CHATS}", content=raw, headers={**AUTH, **JSON})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert sample(registry, "tigress_gateway_inflight_chats") == 0
    assert engine.chats == []


async def test_aborted_uploads_leave_no_traceback_and_no_gauge(
    gateway_at: GatewayFactory, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    registry = CollectorRegistry()
    head = (
        f"POST {CHATS} HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {KEY}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    ).encode()
    with caplog.at_level(logging.WARNING):
        async with gateway_at(registry=registry) as url:
            port = int(url.rsplit(":", 1)[1])
            for _ in range(20):
                _reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(head + b'{"model": "te')
                await writer.drain()
                writer.close()
                await writer.wait_closed()
            await until(lambda: outcome(registry, "none", "client_closed") == 20)
            assert sample(registry, "tigress_gateway_inflight_chats") == 0
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
