"""The gateway over HTTP (uvicorn on loopback) against the fake engine."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from gateway.settings import EngineSettings
from testkit.engine import (
    Data,
    Drop,
    FakeEngine,
    Raw,
    Reply,
    Stall,
    chunk,
    completion_body,
    cut_reply,
    error_reply,
    text_reply,
    tool_reply,
)
from tests.gateway.conftest import (
    AUTH,
    JSON,
    TEST_TIMEOUTS,
    BlockingTool,
    FakeSearch,
    GatewayFactory,
    make_settings,
)
from tests.gateway.servers import serve

QUESTION = [{"role": "user", "content": "hi"}]


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": "test-model", "messages": QUESTION} | fields


def events_of(body: str) -> list[Any]:
    """The data payloads of an SSE body ("[DONE]" kept as a string)."""
    out: list[Any] = []
    for block in body.split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                data = line[len("data: ") :]
                out.append(data if data == "[DONE]" else json.loads(data))
    return out


def content_of(events: list[Any]) -> str:
    return "".join(
        e["choices"][0]["delta"].get("content") or ""
        for e in events
        if isinstance(e, dict) and e.get("choices")
    )


# --- Errors before streaming ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), ({"Authorization": "Bearer wrong-key-0123456789"}, 401), (AUTH, 200)],
    ids=["missing", "wrong", "right"],
)
async def test_api_routes_need_the_key(
    gateway_at: GatewayFactory, http: httpx.AsyncClient, headers: dict[str, str], status: int
) -> None:
    async with gateway_at() as url:
        models = await http.get(f"{url}/v1/models", headers=headers)
        completions = await http.post(f"{url}/v1/chat/completions", json=chat(), headers=headers)
    assert models.status_code == status
    assert completions.status_code == status
    if status == 401:
        assert completions.json()["error"]["code"] == "invalid_api_key"
        assert completions.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:8000", True),
        ("127.0.0.1", True),
        ("localhost:8000", True),
        ("LOCALHOST.:8000", True),
        ("app.localhost:8000", True),
        ("[::1]:8000", True),
        ("10.1.2.3:8000", True),  # an address cannot be rebound: only names can
        ("evil.example:8000", False),
        ("evil.example", False),
        ("localhost.evil.example:8000", False),
        ("127.0.0.1.evil.example", False),
        ("[::1", False),
    ],
)
async def test_without_keys_only_a_loopback_host_reaches_any_route(
    engine: FakeEngine,
    gateway_at: GatewayFactory,
    http: httpx.AsyncClient,
    host: str,
    allowed: bool,
) -> None:
    # DNS rebinding: a page re-points its own name at 127.0.0.1 and calls the keyless API
    # as its own origin; its requests name its host, which a keyless gateway refuses.
    engine.script(text_reply("ok"))
    settings = make_settings(engine, api_keys=())
    async with gateway_at(settings=settings) as url:
        chat_answer = await http.post(
            f"{url}/v1/chat/completions", json=chat(), headers={"Host": host}
        )
        mcp_answer = await http.post(f"{url}/mcp", json={}, headers={"Host": host})
        page = await http.get(f"{url}/healthz", headers={"Host": host})
    if allowed:
        assert page.status_code == 200
        assert chat_answer.status_code == 200
        assert mcp_answer.status_code != 403
    else:
        assert page.status_code == 403  # every route (SPEC 2): /healthz names addresses
        assert chat_answer.status_code == 403
        assert chat_answer.json()["error"]["code"] == "foreign_host"
        assert mcp_answer.status_code == 403
        assert mcp_answer.json()["error"]["code"] == -32600


async def test_with_keys_the_host_is_not_judged(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(text_reply("ok"))
    async with gateway_at() as url:
        answer = await http.post(
            f"{url}/v1/chat/completions", json=chat(), headers={**AUTH, "Host": "tigress.example"}
        )
    assert answer.status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{nope", 400, "invalid_request"),
        (json.dumps({"model": "test-model"}).encode(), 400, "invalid_request"),
        (json.dumps(chat(model="gpt-9")).encode(), 404, "model_not_found"),
        (
            json.dumps(chat(thor_web_search=True, tools=[{"type": "function"}])).encode(),
            400,
            "invalid_request",
        ),
    ],
    ids=["malformed-json", "schema", "unknown-model", "switch-with-tools"],
)
async def test_bad_requests_get_openai_errors(
    gateway_at: GatewayFactory, http: httpx.AsyncClient, body: bytes, status: int, code: str
) -> None:
    async with gateway_at(tools=[FakeSearch()]) as url:
        response = await http.post(
            f"{url}/v1/chat/completions", content=body, headers={**AUTH, **JSON}
        )
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str)
    assert "type" in error


async def test_a_body_over_the_limit_is_413_while_reading(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    settings = replace(make_settings(engine), max_body_bytes=2048)

    async def body() -> Any:
        # Sent in pieces without a length, so only counting while reading can refuse it.
        for _ in range(100):
            yield b" " * 1024

    async with gateway_at(settings=settings) as url:
        response = await http.post(
            f"{url}/v1/chat/completions", content=body(), headers={**AUTH, **JSON}
        )
        declared = await http.post(
            f"{url}/v1/chat/completions", content=b" " * 4096, headers={**AUTH, **JSON}
        )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert declared.status_code == 413
    assert engine.chats == []


async def test_engine_unreachable_is_502(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    async with FakeEngine() as gone:
        dead = gone.url
    settings = make_settings(engine, engines=(EngineSettings(dead, ("test-model",)),))
    registry = CollectorRegistry()
    async with gateway_at(settings=settings, tools=[FakeSearch()], registry=registry) as url:
        proxied = await http.post(f"{url}/v1/chat/completions", json=chat(), headers=AUTH)
        web = await http.post(
            f"{url}/v1/chat/completions",
            json=chat(thor_web_search=True, stream=True),
            headers=AUTH,
        )
    assert proxied.status_code == 502
    assert proxied.json()["error"]["code"] == "engine_unreachable"
    assert web.status_code == 502
    assert (
        registry.get_sample_value("tigress_gateway_engine_errors_total", {"kind": "connect"}) == 2
    )
    assert (
        registry.get_sample_value(
            "tigress_gateway_chat_requests_total", {"mode": "proxy", "outcome": "engine_error"}
        )
        == 1
    )


async def test_engine_timeout_is_504(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    settings = make_settings(engine, timeouts=replace(TEST_TIMEOUTS, engine_read=0.2))
    engine.script(Reply([Stall()]), Reply([Stall()]))
    async with gateway_at(settings=settings, tools=[FakeSearch()]) as url:
        web = await http.post(
            f"{url}/v1/chat/completions", json=chat(thor_web_search=True), headers=AUTH
        )
        streamed = await http.post(
            f"{url}/v1/chat/completions",
            json=chat(thor_web_search=True, stream=True),
            headers=AUTH,
        )
    assert web.status_code == 504
    assert web.json()["error"]["code"] == "engine_timeout"
    assert streamed.status_code == 504


@pytest.mark.parametrize("path", ["/v1/nothing", "/v1/chat/completions/", "/v1/models/x"])
async def test_unknown_api_routes_need_the_key(
    gateway_at: GatewayFactory, http: httpx.AsyncClient, path: str
) -> None:
    # The key is checked before routing: no handler, present or future, runs without it.
    async with gateway_at() as url:
        response = await http.get(f"{url}{path}")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


async def test_unknown_routes_answer_in_the_openai_shape(
    gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    async with gateway_at() as url:
        response = await http.get(f"{url}/v1/nothing", headers=AUTH)
    assert response.status_code == 404
    assert "error" in response.json()


# --- Models, health, metrics ---------------------------------------------------------------


async def test_models_lists_configured_and_discovered(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    settings = make_settings(
        engine,
        engines=(EngineSettings(engine.url), EngineSettings("http://127.0.0.1:9/v1", ("b",))),
    )
    async with gateway_at(settings=settings) as url:
        body = (await http.get(f"{url}/v1/models", headers=AUTH)).json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["test-model", "b"]


async def test_healthz_needs_no_key_and_marks_the_fetcher_unchecked(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    settings = make_settings(
        engine,
        engines=(EngineSettings(engine.url), EngineSettings("http://127.0.0.1:9/v1", ("b",))),
    )
    async with gateway_at(settings=settings) as url:
        response = await http.get(f"{url}/healthz")
    body = response.json()
    assert response.status_code == 200
    # Engines are named by their configured name or address, never by position.
    assert [(e["engine"], e["ok"]) for e in body["engines"]] == [
        (engine.url, True),
        ("http://127.0.0.1:9/v1", False),
    ]
    # Each part says in a sentence what answers, or why not and what to change (SPEC 2).
    assert body["engines"][0]["says"] == f"The engine {engine.url} answers."
    assert body["engines"][1]["says"].startswith(
        "The model engine http://127.0.0.1:9/v1 cannot be reached. Start the model server"
    )
    assert body["fetcher"] == {
        "checked": False,
        "ok": None,
        "detail": "not checked",
        "says": "The fetcher is not checked.",
    }
    assert body["status"] == "degraded"


async def test_metrics_is_a_route_without_redirect(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    registry = CollectorRegistry()
    engine.script(tool_reply(("web_search", '{"query": "a"}')), text_reply("ok"))
    async with gateway_at(registry=registry, tools=[FakeSearch()]) as url:
        await http.post(f"{url}/v1/chat/completions", json=chat(thor_web_search=True), headers=AUTH)
        await http.post(f"{url}/v1/chat/completions", json=chat(), headers={})
        response = await http.get(f"{url}/metrics")
    assert response.status_code == 200
    text = response.text
    assert 'tigress_gateway_chat_requests_total{mode="web",outcome="ok"} 1.0' in text
    assert 'tigress_gateway_chat_requests_total{mode="none",outcome="rejected"} 1.0' in text
    calls = 'tigress_gateway_tool_calls_total{interface="chat",outcome="ok",tool="web_search"}'
    assert f"{calls} 1.0" in text
    assert "tigress_gateway_chat_rounds_count 1.0" in text
    assert "tigress_gateway_inflight_chats 0.0" in text
    assert 'tigress_gateway_time_to_first_token_seconds_count{mode="web"} 1.0' in text
    # A real parser accepts the whole exposition; every family follows the naming rules.
    families = {f.name: f for f in text_string_to_metric_families(text)}
    ours = {
        name: f
        for name, f in families.items()
        if name.startswith("tigress_gateway_") and not name.endswith("_created")
    }
    assert len(ours) == 15  # 11 of the chat API and the routes, 4 of the MCP endpoint
    for family in ours.values():
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples)
        for sample in family.samples:
            # Closed label sets: never an address or user text.
            assert not {"url", "host", "ip", "model", "query"} & set(sample.labels)


# --- Pass-through (Web switch off) -----------------------------------------------------------


async def test_pass_through_streams_the_engines_bytes(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    reply = text_reply("Hel", "lo")
    engine.script(reply)
    own_tools = [{"type": "function", "function": {"name": "mine", "parameters": {}}}]
    body = chat(stream=True, tools=own_tools, tool_choice="auto", top_k=5)
    async with gateway_at() as url:
        response = await http.post(f"{url}/v1/chat/completions", json=body, headers=AUTH)
    expected = (
        "".join(
            f"data: {json.dumps(step.obj)}\n\n" for step in reply.steps if isinstance(step, Data)
        )
        + "data: [DONE]\n\n"
    )
    assert response.text == expected
    assert response.headers["content-type"].startswith("text/event-stream")
    sent = engine.chats[0]
    assert sent["tools"] == own_tools
    assert sent["tool_choice"] == "auto"
    assert sent["top_k"] == 5


async def test_pass_through_non_streaming_and_engine_errors_as_they_are(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(Reply(body=completion_body("hi there")), error_reply(400, "prompt too long"))
    async with gateway_at() as url:
        ok = await http.post(f"{url}/v1/chat/completions", json=chat(), headers=AUTH)
        bad = await http.post(f"{url}/v1/chat/completions", json=chat(stream=True), headers=AUTH)
    assert ok.json() == completion_body("hi there")
    assert bad.status_code == 400
    assert bad.json()["error"]["message"] == "prompt too long"


#: llama-server's own error bodies (tests/llama pins them): extra fields, its key order.
_OVERFLOW_BODY = (
    b'{"error":{"code":400,"message":"request (2250 tokens) exceeds the available context size'
    b' (2048 tokens), try increasing it","type":"exceed_context_size_error",'
    b'"n_prompt_tokens":2250,"n_ctx":2048}}'
)
_NO_JINJA_BODY = (
    b'{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}'
)


@pytest.mark.parametrize(
    ("status", "body", "content_type", "headers", "stream"),
    [
        (400, _OVERFLOW_BODY, "application/json; charset=utf-8", {}, False),
        (400, _OVERFLOW_BODY, "application/json; charset=utf-8", {}, True),
        (500, _NO_JINJA_BODY, "application/json; charset=utf-8", {}, True),
        (503, b"upstream busy\n", "text/plain", {"Retry-After": "3"}, False),
        (502, b"<html><body>Bad Gateway</body></html>", "text/html", {}, True),
        (404, b"", "text/plain", {}, False),
    ],
    ids=["overflow", "overflow-stream", "no-jinja-500", "plain-503", "html-502", "empty-404"],
)
async def test_pass_through_relays_an_engine_error_as_it_came(
    engine: FakeEngine,
    gateway_at: GatewayFactory,
    http: httpx.AsyncClient,
    status: int,
    body: bytes,
    content_type: str,
    headers: dict[str, str],
    stream: bool,
) -> None:
    engine.script(Reply(status=status, raw_body=body, content_type=content_type, headers=headers))
    registry = CollectorRegistry()
    async with gateway_at(registry=registry) as url:
        response = await http.post(
            f"{url}/v1/chat/completions", json=chat(stream=stream), headers=AUTH
        )
    assert response.status_code == status
    assert response.content == body
    assert response.headers["content-type"] == content_type
    for name, value in headers.items():
        assert response.headers[name] == value
    kind = "http_4xx" if status < 500 else "http_5xx"
    assert registry.get_sample_value("tigress_gateway_engine_errors_total", {"kind": kind}) == 1


async def test_the_gateways_own_errors_stay_its_own_in_pass_through(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    # What the gateway decides (an unknown model), and an engine body too long to keep
    # whole (a cut body would be broken JSON): the OpenAI error shape, with the engine's
    # status and the start of its words.
    huge = b'{"error":{"message":"' + b"x" * 70_000 + b'","type":"server_error"}}'
    engine.script(Reply(status=500, raw_body=huge, content_type="application/json"))
    async with gateway_at() as url:
        unknown = await http.post(
            f"{url}/v1/chat/completions", json=chat(model="gpt-4o"), headers=AUTH
        )
        cut = await http.post(f"{url}/v1/chat/completions", json=chat(), headers=AUTH)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model_not_found"
    assert cut.status_code == 500
    error = cut.json()["error"]
    assert error["message"].startswith('The model engine answered 500: {"error":{"message":"xxx')
    assert len(error["message"]) < 300
    assert error["code"] == "engine_error"


async def test_pass_through_repairs_old_errors_and_a_missing_done(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(
        Reply(
            [
                Data(chunk({"content": "a"})),
                Raw('error: {"code":500,"message":"slot lost","type":"server_error"}\n\n'),
            ],
            done=False,
        )
    )
    async with gateway_at() as url:
        response = await http.post(
            f"{url}/v1/chat/completions", json=chat(stream=True), headers=AUTH
        )
    events = events_of(response.text)
    assert events[1] == {"error": {"message": "slot lost", "type": "server_error", "code": 500}}
    assert events[-1] == "[DONE]"


async def test_a_drop_mid_stream_ends_with_an_error_event_then_done(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(Reply([Data(chunk({"content": "a"})), Raw('data: {"cut'), Drop()]))
    async with gateway_at() as url:
        response = await http.post(
            f"{url}/v1/chat/completions", json=chat(stream=True), headers=AUTH
        )
    events = events_of(response.text)
    assert events[0]["choices"][0]["delta"]["content"] == "a"
    assert events[1]["error"]["code"] == "engine_unreachable"
    assert events[2] == "[DONE]"
    assert len(events) == 3


# --- Web switch -------------------------------------------------------------------------------


async def test_web_stream_has_events_stop_and_done(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(tool_reply(("web_search", '{"query": "rust"}')), text_reply("Answer ", "[1]."))
    async with gateway_at(tools=[FakeSearch()]) as url:
        response = await http.post(
            f"{url}/v1/chat/completions",
            json=chat(thor_web_search=True, stream=True),
            headers=AUTH,
        )
    events = events_of(response.text)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    tool_events = [c for c in chunks if "thor_event" in c]
    assert [c["choices"][0]["delta"] for c in tool_events] == [{}] * 5
    assert [c["thor_event"]["type"] for c in tool_events] == [
        "working",
        "searched",
        "working",
        "sources",
        "citations",
    ]
    assert content_of(chunks) == "Answer [1]."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert all(c["choices"][0]["finish_reason"] in (None, "stop") for c in chunks)
    assert not any(c.get("usage") for c in chunks)
    assert "thor_web_search" not in engine.chats[0]


async def test_a_required_round_cut_by_length_reaches_the_client_as_the_retrys_answer(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(
        cut_reply("Let me think about ", "which search to run"),
        tool_reply(("web_search", '{"query": "rust"}')),
        text_reply("Answer ", "[1]."),
    )
    async with gateway_at(tools=[FakeSearch()]) as url:
        response = await http.post(
            f"{url}/v1/chat/completions",
            json=chat(thor_web_search=True, stream=True),
            headers=AUTH,
        )
    assert response.status_code == 200
    events = events_of(response.text)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert content_of(chunks) == "Answer [1]."  # not the preamble
    assert [c["thor_event"]["type"] for c in chunks if "thor_event" in c][1] == "searched"
    # The engine's "length" is its own round's end, not the client's answer's.
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert all(c["choices"][0]["finish_reason"] in (None, "stop") for c in chunks)
    assert [c["tool_choice"] for c in engine.chats] == ["required", "auto", "auto"]


async def test_usage_chunk_only_when_asked(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(tool_reply(("web_search", '{"query": "rust"}')), text_reply("ok"))
    body = chat(thor_web_search=True, stream=True, stream_options={"include_usage": True})
    async with gateway_at(tools=[FakeSearch()]) as url:
        response = await http.post(f"{url}/v1/chat/completions", json=body, headers=AUTH)
    events = events_of(response.text)
    assert events[-2]["choices"] == []
    assert events[-2]["usage"]["total_tokens"] == 30


async def test_web_without_stream_returns_message_and_events(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(tool_reply(("web_search", '{"query": "rust"}')), text_reply("Answer [1]."))
    async with gateway_at(tools=[FakeSearch()]) as url:
        response = await http.post(
            f"{url}/v1/chat/completions", json=chat(thor_web_search=True), headers=AUTH
        )
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Answer [1]."}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["thor_events"][0]["type"] == "searched"
    assert body["usage"]["total_tokens"] == 30


async def test_an_engine_error_after_streaming_began_is_a_final_event(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(
        tool_reply(("web_search", '{"query": "rust"}')),
        Reply([Data(chunk({"content": "Partial"})), Data({"error": {"message": "KV cache full"}})]),
    )
    async with gateway_at(tools=[FakeSearch()]) as url:
        response = await http.post(
            f"{url}/v1/chat/completions",
            json=chat(thor_web_search=True, stream=True),
            headers=AUTH,
        )
    assert response.status_code == 200
    events = events_of(response.text)
    assert events[-2]["error"]["message"] == "KV cache full"
    assert events[-1] == "[DONE]"
    assert content_of(events[:-2]) == "Partial"


async def test_keep_alive_comments_during_tool_work(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    tool = FakeSearch()
    tool.gate = asyncio.Event()
    tool.open_at = 99
    settings = make_settings(engine, timeouts=replace(TEST_TIMEOUTS, keepalive=0.01))
    engine.script(tool_reply(("web_search", '{"query": "rust"}')), text_reply("ok"))
    async with (
        gateway_at(settings=settings, tools=[tool]) as url,
        http.stream(
            "POST",
            f"{url}/v1/chat/completions",
            json=chat(thor_web_search=True, stream=True),
            headers=AUTH,
        ) as response,
    ):
        seen = ""
        async for text in response.aiter_text():
            seen += text
            if seen.count(": keep-alive") >= 2:
                tool.gate.set()
    assert seen.endswith("data: [DONE]\n\n")


# --- Client disconnect ---------------------------------------------------------------------


async def _disconnect_after_first_bytes(
    http: httpx.AsyncClient, url: str, body: dict[str, Any]
) -> None:
    async with http.stream(
        "POST", f"{url}/v1/chat/completions", json=body, headers=AUTH
    ) as response:
        async for _ in response.aiter_raw():
            break


async def test_disconnect_cancels_the_proxied_engine_request(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(Reply([Data(chunk({"content": "a"})), Stall()]))
    async with gateway_at() as url:
        await _disconnect_after_first_bytes(http, url, chat(stream=True))
        await asyncio.wait_for(engine.closed_early.wait(), 10)


async def test_disconnect_cancels_the_engine_round_of_the_loop(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(
        tool_reply(("web_search", '{"query": "a"}')),
        Reply([Data(chunk({"content": "a"})), Stall()]),
    )
    async with gateway_at(tools=[FakeSearch()]) as url:
        await _disconnect_after_first_bytes(http, url, chat(stream=True, thor_web_search=True))
        await asyncio.wait_for(engine.closed_early.wait(), 10)


async def test_disconnect_cancels_tool_work(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    slow = BlockingTool()
    engine.script(tool_reply(("slow", "{}")))
    async with gateway_at(tools=[slow]) as url:
        request = asyncio.create_task(
            http.post(
                f"{url}/v1/chat/completions",
                json=chat(stream=True, thor_web_search=True),
                headers=AUTH,
            )
        )
        await slow.started.wait()
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        await asyncio.wait_for(slow.cancelled.wait(), 10)


async def test_disconnect_cancels_a_non_streaming_proxied_request(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(Reply([Stall()]))
    async with gateway_at() as url:
        request = asyncio.create_task(
            http.post(f"{url}/v1/chat/completions", json=chat(), headers=AUTH)
        )
        await engine.chat_received.wait()
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        await asyncio.wait_for(engine.closed_early.wait(), 10)


async def test_disconnect_cancels_a_non_streaming_web_turn(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(Reply([Data(chunk({"content": "a"})), Stall()]))
    async with gateway_at(tools=[FakeSearch()]) as url:
        request = asyncio.create_task(
            http.post(f"{url}/v1/chat/completions", json=chat(thor_web_search=True), headers=AUTH)
        )
        await engine.chat_received.wait()
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        await asyncio.wait_for(engine.closed_early.wait(), 10)


async def test_web_switch_without_configured_tools_is_refused_clearly(
    gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    async with gateway_at() as url:
        response = await http.post(
            f"{url}/v1/chat/completions", json=chat(thor_web_search=True), headers=AUTH
        )
    assert response.status_code == 400
    assert "no tools are configured" in response.json()["error"]["message"]


async def test_streamed_web_answer_has_the_event_stream_type(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(tool_reply(("web_search", '{"query": "a"}')), text_reply("ok"))
    async with gateway_at(tools=[FakeSearch()]) as url:
        response = await http.post(
            f"{url}/v1/chat/completions",
            json=chat(thor_web_search=True, stream=True),
            headers=AUTH,
        )
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"


async def test_a_chat_to_a_server_that_is_no_engine_says_so(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    # A newcomer's engine_url pointing at SearXNG: the chat's error says what the server
    # is, as /healthz does, not that it cannot be reached.
    async def page(request: Request) -> Response:
        return HTMLResponse("<html><body>Not here</body></html>", status_code=404)

    other = Starlette(routes=[Route("/{path:path}", page)])
    async with serve(other) as address:
        settings = make_settings(engine, engines=(EngineSettings(f"{address}/v1"),))
        async with gateway_at(settings=settings, tools=[FakeSearch()]) as url:
            answer = await http.post(f"{url}/v1/chat/completions", json=chat(), headers=AUTH)
    assert answer.status_code == 502
    error = answer.json()["error"]
    assert error["code"] == "engine_unreachable"
    assert "answers, but not as an OpenAI-compatible engine" in error["message"]
    assert "cannot be reached" not in error["message"]
