"""Regression tests for what testing the gateway as a service found (issue 8, 1-9).

Each test names the behaviour; the numbers in the comments are the issue's findings.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from gateway.engine.client import EngineClient
from gateway.engine.models import ModelDirectory
from gateway.errors import EngineError
from gateway.settings import EngineSettings, Limits
from testkit.engine import (
    Data,
    Drop,
    FakeEngine,
    HungServer,
    Pause,
    Reply,
    Stall,
    chunk,
    error_reply,
    text_reply,
    tool_reply,
)
from tests.gateway.conftest import (
    AUTH,
    KEY,
    TEST_TIMEOUTS,
    FakeSearch,
    GatewayFactory,
    make_settings,
)
from tests.gateway.http.test_app import chat, content_of, events_of

CHATS = "/v1/chat/completions"


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Wait for a condition the server settles after the client already has its answer."""
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.01)


def outcome(registry: CollectorRegistry, mode: str, result: str) -> float:
    return sample(registry, "tigress_gateway_chat_requests_total", mode=mode, outcome=result)


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
        response = await http.post(f"{url}{CHATS}", content=raw, headers=AUTH)
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
        response = await http.post(f"{url}{CHATS}", content=raw, headers=AUTH)
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


# --- 7. Metrics count what happened --------------------------------------------------------


async def _post(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> httpx.Response:
    return await http.post(f"{url}{CHATS}", json=body, headers=AUTH)


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
        await _post(http, url, body)
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
        await _post(http, url, body)
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
        await _post(http, url, chat(stream=True))
        await until(lambda: outcome(registry, "proxy", "ok") == 1)
    count = sample(registry, "tigress_gateway_time_to_first_token_seconds_count", mode="proxy")
    assert count == 0


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
            response = await _post(http, url, chat())
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
            response = await _post(http, url, body)
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
        response = await _post(http, url, body)
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
        refused = await _post(http, url, chat())
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


# --- Media addresses -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "status"),
    [
        ("https://169.254.169.254/latest/meta-data", 400),
        ("http://127.0.0.1:8080/x.png", 400),
        ("file:///etc/passwd", 400),
        ("data:image/png;base64,iVBORw0KGgo=", 200),
    ],
    ids=["https", "http", "file", "data"],
)
async def test_remote_media_is_refused_before_the_engine(
    engine: FakeEngine,
    gateway_at: GatewayFactory,
    http: httpx.AsyncClient,
    address: str,
    status: int,
) -> None:
    part = {"type": "image_url", "image_url": {"url": address}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "what is this"}, part]}]
    async with gateway_at() as url:
        response = await _post(http, url, chat(messages=messages))
    assert response.status_code == status
    assert len(engine.chats) == (1 if status == 200 else 0)
    if status == 400:
        assert "data: URLs" in response.json()["error"]["message"]


async def test_an_operator_may_let_engines_fetch_media(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    part = {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}}
    messages = [{"role": "user", "content": [part]}]
    settings = make_settings(engine, allow_media_urls=True)
    async with gateway_at(settings=settings) as url:
        response = await _post(http, url, chat(messages=messages))
    assert response.status_code == 200
    assert engine.chats[0]["messages"] == messages
