"""Fair share (issue 22, finding 9): an answer that never ends is cut off, one client
cannot take every connection, and a keyless client cannot take every MCP session."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from gateway.api.chunks import UsageCounts
from gateway.errors import AnswerTooLargeError, AnswerTooLongError
from gateway.http.client_limits import ConnectionGuard
from gateway.metrics import GatewayMetrics
from gateway.settings import Limits
from gateway.stream.drain import Drain
from gateway.stream.events import Content, End, Raw, Reasoning, StreamEvent, Usage
from gateway.stream.pump import AnswerLimits, Pump, relayed_size
from testkit.engine import Data, FakeEngine, Forever, Reply, chunk
from tests.gateway.conftest import AUTH, TEST_TIMEOUTS, FakeSearch, GatewayFactory, make_settings

BODY = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}


# --- The answer's caps, on the pump ---------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "size"),
    [
        (Raw(b"data: {}\n\n", 0), 10),
        (Content("héllo"), 5),
        (Reasoning("abc"), 3),
        (Usage(UsageCounts(1, 2, 3)), 0),
        (End(), 0),
    ],
    ids=["raw-bytes", "content", "reasoning", "usage", "end"],
)
def test_what_an_event_counts_against_the_answers_bytes(event: StreamEvent, size: int) -> None:
    assert relayed_size(event) == size


async def pieces(count: int, size: int) -> AsyncGenerator[StreamEvent, None]:
    for _ in range(count):
        yield Content("x" * size)


async def drained(pump: Pump) -> list[StreamEvent]:
    pump.start()
    try:
        return await pump.collect()
    finally:
        await pump.close()


@pytest.mark.parametrize(
    ("relayed", "cut"), [(1000, False), (999, True)], ids=["at-the-cap", "one-byte-over"]
)
async def test_an_answer_is_cut_one_byte_past_its_cap(relayed: int, cut: bool) -> None:
    events = await drained(Pump(pieces(10, 100), Drain(), AnswerLimits(60.0, relayed)))
    end = events[-1]
    assert isinstance(end, End)
    if cut:
        assert isinstance(end.error, AnswerTooLargeError)
        assert f"{relayed} bytes" in end.error.message
        assert sum(relayed_size(e) for e in events) <= relayed
    else:
        assert end.error is None
        assert sum(relayed_size(e) for e in events) == 1000


async def test_an_answer_is_cut_at_its_time_and_its_source_cancelled() -> None:
    stopped = asyncio.Event()

    async def forever() -> AsyncGenerator[StreamEvent, None]:
        try:
            while True:
                yield Content("x")
                await asyncio.sleep(0.01)
        finally:
            stopped.set()

    events = await drained(Pump(forever(), Drain(), AnswerLimits(0.2, 1 << 30)))
    end = events[-1]
    assert isinstance(end, End)
    assert isinstance(end.error, AnswerTooLongError)
    assert end.error.status == 504
    assert stopped.is_set()


async def test_an_answer_within_its_time_is_not_cut() -> None:
    events = await drained(Pump(pieces(3, 1), Drain(), AnswerLimits(5.0, 1 << 30)))
    end = events[-1]
    assert isinstance(end, End)
    assert end.error is None


# --- The answer's caps, over HTTP against an engine that never stops ------------------------


def endless(size: int = 10) -> Reply:
    opening = Data(chunk({"role": "assistant", "content": ""}))
    return Reply([opening, Forever(chunk({"content": "x" * size}))])


def error_of(answer: httpx.Response) -> dict[str, Any]:
    """The error an answer ended with: its status's body (nothing was streamed yet), or
    the stream's error event."""
    if answer.status_code != 200:
        body: dict[str, Any] = answer.json()["error"]
        return body
    for line in answer.text.splitlines():
        if line.startswith("data: {"):
            # Tool events carry an "error" field of their own (a search's): only the
            # stream's error event has it at the top.
            event = json.loads(line.removeprefix("data: "))
            if isinstance(event.get("error"), dict):
                payload: dict[str, Any] = event["error"]
                return payload
    raise AssertionError(f"no error event in {answer.text[-500:]!r}")


def cut(registry: CollectorRegistry, mode: str) -> float:
    labels = {"mode": mode, "outcome": "cut"}
    return registry.get_sample_value("tigress_gateway_chat_requests_total", labels) or 0.0


@pytest.mark.parametrize("web", [False, True], ids=["pass-through", "web"])
async def test_an_engine_that_streams_forever_is_cut_at_the_answers_time(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient, web: bool
) -> None:
    engine.script(endless(), endless())
    registry = CollectorRegistry()
    settings = make_settings(engine, timeouts=replace(TEST_TIMEOUTS, answer=0.5))
    body = BODY | ({"thor_web_search": True} if web else {})
    async with gateway_at(settings=settings, registry=registry, tools=[FakeSearch()]) as url:
        answer = await http.post(f"{url}/v1/chat/completions", json=body, headers=AUTH)
        await asyncio.wait_for(engine.closed_early.wait(), 5)
    # The Web loop holds a round's text until it knows the round calls no tool: the
    # cut may come before anything was streamed (504), or as the stream's last event.
    assert answer.status_code == (504 if web else 200)
    error = error_of(answer)
    assert error["code"] == "answer_too_long"
    assert "0.5 s" in error["message"]
    assert cut(registry, "web" if web else "proxy") == 1


@pytest.mark.parametrize("web", [False, True], ids=["pass-through", "web"])
async def test_an_engine_that_streams_forever_is_cut_at_the_answers_bytes(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient, web: bool
) -> None:
    # Round one asks for "required"; an engine answering text is asked again ("auto").
    engine.script(endless(size=4096), endless(size=4096))
    registry = CollectorRegistry()
    cap = 64 * 1024
    settings = make_settings(engine, limits=Limits(max_answer_bytes=cap))
    body = BODY | ({"thor_web_search": True} if web else {})
    async with gateway_at(settings=settings, registry=registry, tools=[FakeSearch()]) as url:
        answer = await http.post(f"{url}/v1/chat/completions", json=body, headers=AUTH)
        await asyncio.wait_for(engine.closed_early.wait(), 5)
    assert error_of(answer)["code"] == "answer_too_large"
    # What came before the error is at most the cap, and SSE's framing around it.
    assert len(answer.content) < 2 * cap
    assert cut(registry, "web" if web else "proxy") == 1


async def test_a_whole_answer_cut_at_its_time_is_an_error_status(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(endless())
    settings = make_settings(engine, timeouts=replace(TEST_TIMEOUTS, answer=0.5))
    async with gateway_at(settings=settings, tools=[FakeSearch()]) as url:
        answer = await http.post(
            f"{url}/v1/chat/completions",
            json=BODY | {"stream": False, "thor_web_search": True},
            headers=AUTH,
        )
    assert answer.status_code == 504
    assert answer.json()["error"]["code"] == "answer_too_long"


# --- Connections per client -----------------------------------------------------------------


def test_a_client_takes_connections_up_to_its_share_and_gives_them_back() -> None:
    guard = ConnectionGuard(
        max_connections=100,
        header_seconds=1.0,
        metrics=GatewayMetrics(CollectorRegistry()),
        per_client=2,
    )
    assert guard.take("192.0.2.1")
    assert guard.take("192.0.2.1")  # at the share
    assert not guard.take("192.0.2.1")  # one past it
    assert guard.take("192.0.2.2")  # another client is not affected
    guard.give_back("192.0.2.1")
    assert guard.take("192.0.2.1")
    assert guard.clients == {"192.0.2.1": 2, "192.0.2.2": 1}
    guard.give_back("192.0.2.2")
    assert guard.clients == {"192.0.2.1": 2}


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def closed(registry: CollectorRegistry, reason: str) -> float:
    labels = {"reason": reason}
    value = registry.get_sample_value("tigress_gateway_client_connections_closed_total", labels)
    return value or 0.0


async def connect(
    url: str, source: str = "127.0.0.1"
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the gateway from ``source`` (any address of 127.0.0.0/8 is this
    machine: a second client without a second machine)."""
    return await asyncio.open_connection("127.0.0.1", port_of(url), local_addr=(source, 0))


HEALTH = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
#: The same, naming a client (as a proxy would).
HEALTH_FOR_OTHER = HEALTH.replace(b"\r\n\r\n", b"\r\nX-Forwarded-For: 203.0.113.8\r\n\r\n")


async def ask(url: str, head: bytes = HEALTH, source: str = "127.0.0.1") -> bytes:
    reader, writer = await connect(url, source)
    writer.write(head)
    try:
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


async def test_one_client_holding_silent_connections_locks_nobody_else_out(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    registry = CollectorRegistry()
    settings = make_settings(engine, limits=Limits(max_connections=10, connections_per_client=3))
    async with gateway_at(settings=settings, registry=registry) as url:
        held = [await connect(url) for _ in range(3)]  # silent: no byte sent
        refused = await ask(url)
        other = await ask(url, source="127.0.0.2")
        for _, writer in held:
            writer.close()
        await asyncio.sleep(0.1)
        again = await ask(url)
    assert refused.startswith(b"HTTP/1.1 503")
    assert b"as many connections open to the gateway as one client may" in refused
    assert b"retry-after: 1" in refused
    assert other.startswith(b"HTTP/1.1 200")
    assert again.startswith(b"HTTP/1.1 200")  # the share came back with the connections
    assert closed(registry, "client_limit") == 1
    assert closed(registry, "limit") == 0


def held_chat(forwarded_for: str) -> bytes:
    # A request whose body never comes: the connection stays with its client.
    return (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
        f"X-Forwarded-For: {forwarded_for}\r\nContent-Type: application/json\r\n"
        "Content-Length: 100\r\n\r\n"
    ).encode()


async def test_behind_a_trusted_proxy_the_share_is_the_forwarded_clients(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    registry = CollectorRegistry()
    settings = make_settings(
        engine,
        limits=Limits(max_connections=20, connections_per_client=2),
        trusted_proxies=("127.0.0.1",),
    )
    async with gateway_at(settings=settings, registry=registry) as url:
        # The proxy's own connections are not one client's: five open, none refused.
        idle = [await connect(url) for _ in range(5)]
        held = []
        for _ in range(2):
            reader, writer = await connect(url)
            writer.write(held_chat("198.51.100.7"))
            held.append((reader, writer))
        await asyncio.sleep(0.1)
        third = await ask(url, held_chat("198.51.100.7"))
        other = await ask(
            url, HEALTH.replace(b"\r\n\r\n", b"\r\nX-Forwarded-For: 203.0.113.8\r\n\r\n")
        )
        for _, writer in idle + held:
            writer.close()
    assert third.startswith(b"HTTP/1.1 503")
    assert other.startswith(b"HTTP/1.1 200")
    assert closed(registry, "client_limit") == 1


async def test_an_untrusted_peers_forwarded_address_is_not_believed(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    settings = make_settings(engine, limits=Limits(max_connections=20, connections_per_client=2))
    async with gateway_at(settings=settings) as url:
        held = [await connect(url) for _ in range(2)]
        # Naming another client does not give this peer another share.
        posing = await ask(
            url, HEALTH.replace(b"\r\n\r\n", b"\r\nX-Forwarded-For: 203.0.113.8\r\n\r\n")
        )
        for _, writer in held:
            writer.close()
    assert posing.startswith(b"HTTP/1.1 503")


@pytest.mark.parametrize(
    "forever",
    [
        {"tool_calls": [{"index": 0, "function": {"arguments": "a" * 4096}}]},
        {"content": "b" * 4096},  # held back: round one waits for the call it asked for
    ],
    ids=["call-arguments", "text-after-a-call"],
)
async def test_what_the_web_loop_holds_back_counts_against_the_answers_bytes(
    engine: FakeEngine,
    gateway_at: GatewayFactory,
    http: httpx.AsyncClient,
    forever: dict[str, Any],
) -> None:
    # A call begun, then endless arguments (or text) the loop joins or holds without
    # sending any of it to the client: bounded by the answer's bytes all the same.
    start = {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "web_search"}}]}
    engine.script(Reply([Data(chunk(start)), Forever(chunk(forever))]))
    registry = CollectorRegistry()
    settings = make_settings(engine, limits=Limits(max_answer_bytes=64 * 1024))
    async with gateway_at(settings=settings, registry=registry, tools=[FakeSearch()]) as url:
        answer = await http.post(
            f"{url}/v1/chat/completions", json=BODY | {"thor_web_search": True}, headers=AUTH
        )
        await asyncio.wait_for(engine.closed_early.wait(), 5)
    assert error_of(answer)["code"] == "answer_too_large"
    assert cut(registry, "web") == 1
