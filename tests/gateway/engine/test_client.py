"""The engine client against the fake engine: what real engines do, tolerated."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import aclosing

import httpx
import pytest

from gateway.api.chunks import EngineChunk, UsageCounts
from gateway.engine.client import EngineClient
from gateway.engine.models import ModelDirectory
from gateway.errors import (
    EngineStatusError,
    EngineStreamError,
    EngineTimeoutError,
    EngineUnreachableError,
    UnknownModelError,
)
from gateway.settings import EngineSettings
from testkit.engine import (
    Data,
    Drop,
    FakeEngine,
    Raw,
    Reply,
    Stall,
    chunk,
    error_reply,
    text_reply,
    usage_chunk,
)


@pytest.fixture
async def client() -> AsyncIterator[EngineClient]:
    timeout = httpx.Timeout(2.0, read=0.3)
    async with httpx.AsyncClient(timeout=timeout, trust_env=False) as http:
        engines = EngineClient(http, connect_timeout=2.0, read_timeout=timeout.read or 5.0)
        yield engines
        engines.close()


async def collect(client: EngineClient, engine: FakeEngine) -> list[EngineChunk]:
    body = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    encoded = json.dumps(body).encode()
    return [c async for c in client.chat_chunks(EngineSettings(engine.url), encoded)]


async def test_chunks_arrive_decoded(engine: FakeEngine, client: EngineClient) -> None:
    engine.script(text_reply("Hel", "lo"))
    chunks = await collect(client, engine)
    assert [c.content for c in chunks] == ["", "Hel", "lo", "", ""]
    assert chunks[-1].usage is not None  # the usage chunk is handed on, typed


async def test_comments_and_a_missing_done_are_tolerated(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(
        Reply(
            [Raw(": ping\n\n"), Data(chunk({"content": "a"})), Raw('data:{"choices": []}\n\n')],
            done=False,
        )
    )
    chunks = await collect(client, engine)
    assert len(chunks) == 2


async def test_a_last_event_without_blank_line_is_read(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(Reply([Raw('data: {"choices": [], "usage": {"total_tokens": 1}}')], done=False))
    assert await collect(client, engine) == [EngineChunk(usage=UsageCounts(0, 0, 1))]


async def test_events_without_separating_blank_lines_are_split(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(
        Reply(
            [Raw('data: {"usage": {"total_tokens": 1}}\ndata: {"usage": {"total_tokens": 2}}\n\n')]
        )
    )
    chunks = await collect(client, engine)
    assert [c.usage.total_tokens if c.usage else None for c in chunks] == [1, 2]


async def test_standard_error_event_raises(engine: FakeEngine, client: EngineClient) -> None:
    engine.script(
        Reply([Data(chunk({"content": "a"})), Data({"error": {"message": "context full"}})])
    )
    with pytest.raises(EngineStreamError, match="context full"):
        await collect(client, engine)


async def test_old_llama_server_error_field_raises(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(
        Reply([Raw('error: {"code":400,"message":"too long","type":"invalid_request_error"}\n\n')])
    )
    with pytest.raises(EngineStreamError, match="too long"):
        await collect(client, engine)


async def test_error_status_keeps_the_engines_body(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(error_reply(400, "tool_choice required is not supported"))
    with pytest.raises(EngineStatusError) as caught:
        await collect(client, engine)
    assert caught.value.status == 400
    assert caught.value.body()["error"]["message"] == "tool_choice required is not supported"


async def test_a_dropped_stream_is_unreachable(engine: FakeEngine, client: EngineClient) -> None:
    engine.script(Reply([Data(chunk({"content": "a"})), Drop()]))
    with pytest.raises(EngineUnreachableError):
        await collect(client, engine)


async def test_a_stalled_stream_times_out(engine: FakeEngine, client: EngineClient) -> None:
    engine.script(Reply([Data(chunk({"content": "a"})), Stall()]))
    with pytest.raises(EngineTimeoutError):
        await collect(client, engine)


async def test_no_engine_listening_is_unreachable(client: EngineClient) -> None:
    async with FakeEngine() as gone:
        url = gone.url
    body = json.dumps({"model": "m", "messages": [], "stream": True}).encode()
    with pytest.raises(EngineUnreachableError):
        [c async for c in client.chat_chunks(EngineSettings(url), body)]


async def test_models_come_from_configuration_or_the_engine(
    engine: FakeEngine, client: EngineClient
) -> None:
    configured = EngineSettings("http://127.0.0.1:9/v1", ("named",))
    directory = ModelDirectory((configured, EngineSettings(engine.url)), client)
    assert (await directory.resolve("named")).engine.url == configured.url
    assert (await directory.resolve("test-model")).engine.url == engine.url
    with pytest.raises(UnknownModelError):
        await directory.resolve("gpt-9")
    entries, errors = await directory.entries()
    assert [e.model for e in entries] == ["named", "test-model"]
    assert errors == []


def _frames(error: BaseException | None) -> int:
    count, tb = 0, error.__traceback__ if error is not None else None
    while tb is not None:
        count, tb = count + 1, tb.tb_next
    return count


async def test_a_remembered_failure_does_not_grow_with_each_look_up(client: EngineClient) -> None:
    # An engine down for its failure-cache time is answered from memory; each look-up
    # re-raising the one stored error must not add its frames to it (nor keep them).
    async with FakeEngine() as gone:
        url = gone.url
    directory = ModelDirectory((EngineSettings(url),), client, failure_seconds=60.0)
    depths = []
    for _ in range(20):
        _, errors = await directory.entries()  # what each GET /v1/models asks
        assert [type(e) for e in errors] == [EngineUnreachableError]
        depths.append(_frames(errors[0]))
    assert depths[-1] == depths[1]


async def test_engine_usage_chunk_is_decoded(engine: FakeEngine, client: EngineClient) -> None:
    engine.script(Reply([Data(usage_chunk(7, 3))]))
    usage = (await collect(client, engine))[0].usage
    assert usage is not None
    assert usage.total_tokens == 10


async def test_chat_connections_are_kept_alive_and_a_closed_one_is_replaced(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(text_reply("a"), text_reply("b"), text_reply("c"))
    await collect(client, engine)
    await collect(client, engine)
    assert engine.connections == 1
    # The engine closes its idle connection; the next chat goes out on a new one.
    engine.drop_connections()
    for _ in range(3):
        await asyncio.sleep(0)
    chunks = await collect(client, engine)
    assert [c.content for c in chunks][1] == "c"
    assert engine.connections == 2


async def test_a_stream_cut_short_does_not_keep_its_connection(
    engine: FakeEngine, client: EngineClient
) -> None:
    engine.script(Reply([Data(chunk({"content": "a"})), Stall()]), text_reply("c"))
    body = json.dumps({"model": "m", "messages": [], "stream": True}).encode()
    async with aclosing(client.chat_chunks(EngineSettings(engine.url), body)) as chunks:
        async for _ in chunks:
            break
    await collect(client, engine)
    assert engine.connections == 2
