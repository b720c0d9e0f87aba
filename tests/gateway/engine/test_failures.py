"""Engine failures are visible: named, logged without their words; Retry-After and
keep-alives pass through.

Regressions of what testing the gateway as a service found (issue 8).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import httpx
import pytest

from gateway.settings import EngineSettings
from testkit.engine import (
    Data,
    FakeEngine,
    Reply,
    chunk,
    error_reply,
    tool_reply,
)
from tests.gateway.conftest import (
    AUTH,
    CHATS,
    TEST_TIMEOUTS,
    FakeSearch,
    GatewayFactory,
    make_settings,
    post_chat,
)
from tests.gateway.http.test_app import chat, content_of, events_of

# --- 8, 9. Engine failures are visible; Retry-After and keep-alives pass through ---------


async def test_an_unreachable_engine_is_named_and_logged(
    engine: FakeEngine,
    gateway_at: GatewayFactory,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    dead = "http://127.0.0.1:9/v1"
    settings = make_settings(engine, engines=(EngineSettings(dead, ("test-model",)),))
    with caplog.at_level(logging.WARNING, logger="gateway"):
        async with gateway_at(settings=settings) as url:
            response = await post_chat(http, url, chat())
    assert response.status_code == 502
    assert dead in response.json()["error"]["message"]
    assert any(dead in r.getMessage() and "connect" in r.getMessage() for r in caplog.records)


SECRET = "the user's private words"


@pytest.mark.parametrize(
    ("reply", "body"),
    [
        (error_reply(400, f"1 validation error: input {SECRET!r}"), chat()),
        (error_reply(400, f"1 validation error: input {SECRET!r}"), chat(thor_web_search=True)),
        (error_reply(500, SECRET, "server_error"), chat(stream=True)),
        (
            Reply([Data(chunk({"content": "a"})), Data({"error": {"message": SECRET}})]),
            chat(stream=True, thor_web_search=True),
        ),
    ],
    ids=["status-pass-through", "status-web", "status-stream", "stream-error"],
)
async def test_the_engines_error_words_are_relayed_but_never_logged(
    engine: FakeEngine,
    gateway_at: GatewayFactory,
    http: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
    reply: Reply,
    body: dict[str, Any],
) -> None:
    # SPEC 9: no conversation text in logs; an engine's error may quote the request.
    if body.get("thor_web_search"):
        engine.script(tool_reply(("web_search", '{"query": "x"}')))
    engine.script(reply)
    with caplog.at_level(logging.DEBUG):
        async with gateway_at(tools=[FakeSearch()]) as url:
            response = await post_chat(http, url, body)
    assert SECRET in response.text  # the client sees the engine's words
    assert any("engine" in r.getMessage() for r in caplog.records)
    assert not [r for r in caplog.records if SECRET in r.getMessage()]


def test_an_engine_is_named_without_its_credentials() -> None:
    engine = EngineSettings("http://user:secret@127.0.0.1:8080/v1", api_key="k" * 20)
    assert engine.label == "http://127.0.0.1:8080/v1"
    assert EngineSettings("http://127.0.0.1:8080/v1", name="vllm").label == "vllm"


@pytest.mark.parametrize("web", [False, True], ids=["pass-through", "web"])
async def test_an_engines_retry_after_is_passed_on(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient, web: bool
) -> None:
    limited = error_reply(429, "slow down", headers={"Retry-After": "7"})
    engine.script(limited, limited)
    body = chat(thor_web_search=True) if web else chat()
    async with gateway_at(tools=[FakeSearch()]) as url:
        response = await post_chat(http, url, body)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    assert response.json()["error"]["message"] == "slow down"


async def test_pass_through_sends_keep_alives_while_the_engine_is_silent(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    settings = make_settings(engine, timeouts=replace(TEST_TIMEOUTS, keepalive=0.05))
    # The engine sends not even its response head until released.
    engine.script(Reply([Data(chunk({"content": "late"}))], hold_head=True))
    async with (
        gateway_at(settings=settings) as url,
        http.stream("POST", f"{url}{CHATS}", json=chat(stream=True), headers=AUTH) as response,
    ):
        seen = ""
        async for text in response.aiter_text():
            seen += text
            if seen.count(": keep-alive") == 2:
                engine.release()
    assert response.status_code == 200
    assert content_of(events_of(seen)) == "late"
    assert seen.endswith("data: [DONE]\n\n")
