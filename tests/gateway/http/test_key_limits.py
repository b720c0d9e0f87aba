"""Per-key limits (SPEC 2's 429): concurrent chats and requests per minute.

Regressions of what testing the gateway as a service found (issue 8).
"""

from __future__ import annotations

import httpx

from gateway.settings import Limits
from testkit.engine import (
    Data,
    FakeEngine,
    Pause,
    Reply,
    chunk,
    text_reply,
)
from tests.gateway.conftest import (
    AUTH,
    CHATS,
    GatewayFactory,
    make_settings,
    post_chat,
)
from tests.gateway.http.test_app import chat

# --- Per-key limits (SPEC 2's 429) ---------------------------------------------------------


async def test_a_key_over_its_concurrent_chats_gets_429(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    settings = make_settings(engine, limits=Limits(chats_per_key=1))
    engine.script(Reply([Data(chunk({"content": "a"})), Pause()]), text_reply("b"))
    async with (
        gateway_at(settings=settings) as url,
        http.stream("POST", f"{url}{CHATS}", json=chat(stream=True), headers=AUTH) as held,
    ):
        assert held.status_code == 200
        refused = await post_chat(http, url, chat())
        engine.release()
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"


async def test_a_key_over_its_requests_per_minute_gets_429_with_retry_after(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    settings = make_settings(engine, limits=Limits(requests_per_minute_per_key=2))
    async with gateway_at(settings=settings) as url:
        first = await http.get(f"{url}/v1/models", headers=AUTH)
        second = await http.get(f"{url}/v1/models", headers=AUTH)
        third = await http.get(f"{url}/v1/models", headers=AUTH)
        health = await http.get(f"{url}/healthz")
    assert [first.status_code, second.status_code, third.status_code] == [200, 200, 429]
    assert 1 <= int(third.headers["retry-after"]) <= 30
    assert health.status_code == 200
