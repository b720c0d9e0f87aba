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

from gateway.chunks import UsageCounts
from gateway.drain import Drain
from gateway.errors import AnswerTooLargeError, AnswerTooLongError
from gateway.events import Content, End, Raw, Reasoning, StreamEvent, Usage
from gateway.pump import AnswerLimits, Pump, relayed_size
from gateway.settings import Limits
from tests.gateway.conftest import AUTH, TEST_TIMEOUTS, FakeSearch, GatewayFactory, make_settings
from tests.gateway.fake_engine import Data, FakeEngine, Forever, Reply, chunk

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
        if line.startswith("data: {") and '"error"' in line:
            payload: dict[str, Any] = json.loads(line.removeprefix("data: "))["error"]
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
