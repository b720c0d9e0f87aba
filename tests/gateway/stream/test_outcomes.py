"""Metrics count what happened: each chat's outcome, streamed tokens, time to first token.

Regressions of what testing the gateway as a service found (issue 8).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from testkit.engine import (
    Data,
    Drop,
    FakeEngine,
    Reply,
    Stall,
    chunk,
    error_reply,
    text_reply,
    tool_reply,
)
from tests.gateway.conftest import (
    AUTH,
    CHATS,
    TEST_TIMEOUTS,
    FakeSearch,
    GatewayFactory,
    make_settings,
    outcome,
    post_chat,
    sample,
    until,
)
from tests.gateway.http.test_app import chat

# --- 7. Metrics count what happened --------------------------------------------------------


OUTCOME_CASES: list[tuple[str, Reply, dict[str, Any], str, str, dict[str, float]]] = [
    ("stream-ok", text_reply("a", "b"), chat(stream=True), "proxy", "ok", {}),
    ("body-ok", Reply(body={"choices": []}), chat(), "proxy", "ok", {}),
    (
        "engine-4xx",
        error_reply(400, "prompt too long"),
        chat(stream=True),
        "proxy",
        "engine_error",
        {"http_4xx": 1},
    ),
    (
        "engine-5xx",
        error_reply(503, "loading", "server_error"),
        chat(),
        "proxy",
        "engine_error",
        {"http_5xx": 1},
    ),
    (
        "died-mid-stream",
        Reply([Data(chunk({"content": "a"})), Drop()]),
        chat(stream=True),
        "proxy",
        "engine_error",
        {"connect": 1},
    ),
    (
        "timeout",
        Reply([Data(chunk({"content": "a"})), Stall()]),
        chat(stream=True),
        "proxy",
        "timeout",
        {"timeout": 1},
    ),
    (
        "web-ok",
        text_reply("plain"),
        chat(stream=True, thor_web_search=True),
        "web",
        "ok",
        {},
    ),
]


@pytest.mark.parametrize(
    ("reply", "body", "mode", "result", "engine_errors"),
    [case[1:] for case in OUTCOME_CASES],
    ids=[case[0] for case in OUTCOME_CASES],
)
async def test_each_outcome_is_counted_as_what_happened(
    engine: FakeEngine,
    gateway_at: GatewayFactory,
    http: httpx.AsyncClient,
    reply: Reply,
    body: dict[str, Any],
    mode: str,
    result: str,
    engine_errors: dict[str, float],
) -> None:
    settings = make_settings(engine, timeouts=replace(TEST_TIMEOUTS, engine_read=0.3))
    engine.script(reply, text_reply("again"))
    registry = CollectorRegistry()
    async with gateway_at(settings=settings, registry=registry, tools=[FakeSearch()]) as url:
        await post_chat(http, url, body)
        await until(lambda: outcome(registry, mode, result) == 1)
        # Nothing else was counted, and nothing is left in flight.
        total = sum(
            outcome(registry, m, o)
            for m in ("web", "proxy", "none")
            for o in ("ok", "client_closed", "engine_error", "timeout", "rejected", "limited")
        )
        assert total == 1
        assert sample(registry, "tigress_gateway_inflight_chats") == 0
    for kind in ("connect", "timeout", "http_4xx", "http_5xx", "bad_stream"):
        counted = sample(registry, "tigress_gateway_engine_errors_total", kind=kind)
        assert counted == engine_errors.get(kind, 0), kind


async def test_a_client_leaving_mid_stream_is_client_closed(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(Reply([Data(chunk({"content": "a"})), Stall()]))
    registry = CollectorRegistry()
    async with gateway_at(registry=registry) as url:
        async with http.stream(
            "POST", f"{url}{CHATS}", json=chat(stream=True), headers=AUTH
        ) as response:
            async for _ in response.aiter_raw():
                break
        await until(lambda: outcome(registry, "proxy", "client_closed") == 1)
        assert sample(registry, "tigress_gateway_inflight_chats") == 0


@pytest.mark.parametrize("web", [False, True], ids=["pass-through", "web"])
async def test_streamed_tokens_count_text_only(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient, web: bool
) -> None:
    # Role, finish, usage and [DONE] events carry no model-written text.
    if web:
        engine.script(tool_reply(("web_search", '{"query": "x"}')))
    engine.script(text_reply("Hel", "lo", reasoning=("hm",)))
    registry = CollectorRegistry()
    body = chat(stream=True, thor_web_search=True) if web else chat(stream=True)
    mode = "web" if web else "proxy"
    async with gateway_at(registry=registry, tools=[FakeSearch()]) as url:
        await post_chat(http, url, body)
        await until(lambda: outcome(registry, mode, "ok") == 1)
    assert sample(registry, "tigress_gateway_streamed_tokens_total", mode=mode) == 3


async def test_first_token_time_waits_for_text_in_pass_through(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(
        Reply([Data(chunk({"role": "assistant", "content": ""})), Data(chunk({}, "stop"))])
    )
    registry = CollectorRegistry()
    async with gateway_at(registry=registry) as url:
        await post_chat(http, url, chat(stream=True))
        await until(lambda: outcome(registry, "proxy", "ok") == 1)
    count = sample(registry, "tigress_gateway_time_to_first_token_seconds_count", mode="proxy")
    assert count == 0
