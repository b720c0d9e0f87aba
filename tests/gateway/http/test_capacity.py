"""Capacity: no pool limit below what the process serves; engines independent of each
other; health cached.

Regressions of what testing the gateway as a service found (issue 8).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import httpx
import pytest
from prometheus_client import CollectorRegistry

from gateway.engine.client import EngineClient
from gateway.engine.models import ModelDirectory
from gateway.errors import EngineError
from gateway.settings import EngineSettings, Limits
from testkit.engine import (
    Data,
    FakeEngine,
    HungServer,
    Pause,
    Reply,
    chunk,
    text_reply,
)
from tests.gateway.conftest import (
    AUTH,
    CHATS,
    TEST_TIMEOUTS,
    GatewayFactory,
    make_settings,
    outcome,
    until,
)
from tests.gateway.http.test_app import chat, content_of, events_of

# --- 1. Capacity: no pool limit below what the process serves ------------------------------


async def test_more_concurrent_chats_than_the_old_pool_all_stream(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    n = 210  # the old engine pool held 200 connections; the rest got 504 after 2 s
    engine.script(
        *[Reply([Data(chunk({"content": "a"})), Pause(), Data(chunk({"content": "b"}))])] * n
    )
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    # The engine holds every stream until all have arrived, however long that takes here.
    settings = make_settings(engine, timeouts=replace(TEST_TIMEOUTS, engine_read=120.0))
    async with (
        gateway_at(settings=settings) as url,
        httpx.AsyncClient(timeout=30, limits=limits, trust_env=False) as client,
    ):

        async def one() -> tuple[int, str]:
            async with client.stream(
                "POST", f"{url}{CHATS}", json=chat(stream=True), headers=AUTH
            ) as response:
                return response.status_code, (await response.aread()).decode()

        tasks = [asyncio.create_task(one()) for _ in range(n)]
        await until(lambda: len(engine.chats) == n, 60)
        engine.release()
        results = await asyncio.gather(*tasks)
    assert [status for status, _ in results] == [200] * n
    assert all(content_of(events_of(body)) == "ab" for _, body in results)


async def test_a_saturated_gateway_answers_503_with_retry_after_not_504(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    settings = make_settings(engine, limits=Limits(max_chats=1))
    engine.script(Reply([Data(chunk({"content": "a"})), Pause()]))
    registry = CollectorRegistry()
    async with (
        gateway_at(settings=settings, registry=registry) as url,
        http.stream("POST", f"{url}{CHATS}", json=chat(stream=True), headers=AUTH) as held,
    ):
        assert held.status_code == 200
        refused = await http.post(f"{url}{CHATS}", json=chat(), headers=AUTH)
        engine.release()
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "overloaded"
    assert outcome(registry, "proxy", "limited") == 1


# --- 2. Engines are independent ------------------------------------------------------------


async def test_a_hung_engine_never_delays_another(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    async with HungServer() as hung:
        settings = make_settings(
            engine,
            engines=(EngineSettings(hung.url), EngineSettings(engine.url)),
            # The hung engine's look-up would block for a minute.
            timeouts=replace(TEST_TIMEOUTS, engine_connect=60.0),
        )
        engine.script(*[text_reply("ok")] * 8)
        async with gateway_at(settings=settings) as url:
            answers = await asyncio.wait_for(
                asyncio.gather(
                    *(http.post(f"{url}{CHATS}", json=chat(), headers=AUTH) for _ in range(8))
                ),
                20,
            )
            health = await asyncio.wait_for(http.get(f"{url}/healthz"), 20)
            # Still hung: nothing above waited for it.
            assert hung.requests >= 1
    assert [a.status_code for a in answers] == [200] * 8
    engines = health.json()["engines"]
    assert [(e["engine"], e["ok"]) for e in engines] == [(hung.url, False), (engine.url, True)]
    assert "did not answer in time. Is it still loading its model" in engines[0]["says"]


async def test_a_failed_model_look_up_is_cached_briefly(engine: FakeEngine) -> None:
    engine.models_status = 500
    async with httpx.AsyncClient(timeout=5, trust_env=False) as http:
        directory = ModelDirectory(
            (EngineSettings(engine.url),), EngineClient(http), failure_seconds=60
        )
        for _ in range(3):
            with pytest.raises(EngineError):
                await directory.resolve("test-model")
    assert len([r for r in engine.received if r.path.endswith("/models")]) == 1


async def test_healthz_is_cached_briefly(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    settings = make_settings(engine, timeouts=replace(TEST_TIMEOUTS, health_cache=60.0))
    async with gateway_at(settings=settings) as url:
        first = await http.get(f"{url}/healthz")
        asked = len(engine.received)
        second = await http.get(f"{url}/healthz")
    assert first.json() == second.json()
    assert len(engine.received) == asked
