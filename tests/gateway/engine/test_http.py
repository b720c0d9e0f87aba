"""The engine connection against engines that bend HTTP/1.1: interim answers, bodies that
end with the connection, bytes after an answer, endless heads and error bodies.

Each test runs a raw server on 127.0.0.1 that writes exactly the bytes the test gives it,
so every framing case is reproduced byte for byte (the fake engine always frames its
answers correctly).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager

import httpx
import pytest

from gateway.api.chunks import EngineChunk
from gateway.engine.client import EngineClient
from gateway.engine.http import MAX_HEAD_BYTES
from gateway.engine.proxy import relay
from gateway.errors import (
    EngineError,
    EngineStatusError,
    EngineStreamError,
    EngineUnreachableError,
)
from gateway.settings import EngineSettings

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

BODY = json.dumps(
    {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
).encode()


def event(content: str) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def sse_answer(*contents: str) -> bytes:
    """A whole, correctly framed streaming answer."""
    body = b"".join(chunked(event(c)) for c in contents) + chunked(b"data: [DONE]\n\n")
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + body + b"0\r\n\r\n"
    )


async def read_request(reader: asyncio.StreamReader) -> bool:
    """Read one request (head and Content-Length body); False at the end of input."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return False
    length = 0
    for line in head.decode("latin-1").split("\r\n"):
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    await reader.readexactly(length)
    return True


@asynccontextmanager
async def raw_engine(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A server running ``handler`` per connection; yields its base URL and a list that
    counts connections accepted."""
    accepted: list[int] = []
    tasks: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(len(accepted))
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # Stopped with the test: end quietly (asyncio logs handler tasks that end
            # cancelled).
            pass
        finally:
            tasks.discard(task)
            writer.transport.abort()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", accepted
    finally:
        server.close()
        running = list(tasks)
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)
        await server.wait_closed()


@pytest.fixture
async def client() -> AsyncIterator[EngineClient]:
    async with httpx.AsyncClient(trust_env=False) as http:
        engines = EngineClient(http, connect_timeout=5.0, read_timeout=60.0)
        yield engines
        engines.close()


async def contents(client: EngineClient, url: str) -> list[str]:
    chunks: list[EngineChunk] = []
    stream = client.chat_chunks(EngineSettings(url), BODY)
    async with aclosing(stream):
        async for chunk in stream:
            chunks.append(chunk)
    return [c.content for c in chunks]


async def test_interim_1xx_answers_are_skipped_for_the_final_one(client: EngineClient) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 100 Continue\r\n\r\n"
            b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
            + sse_answer("Hel", "lo")
        )
        await writer.drain()
        await reader.read()

    async with raw_engine(handler) as (url, _):
        async with client.open(EngineSettings(url), "/chat/completions", BODY) as exchange:
            assert exchange.status == 200
            assert exchange.headers["content-type"] == "text/event-stream"
            assert "link" not in exchange.headers  # the interim answer's header
        assert await contents(client, url) == ["Hel", "lo"]


@pytest.mark.parametrize("version", ["HTTP/1.1", "HTTP/1.0"])
async def test_an_answer_that_ends_with_the_connection_is_complete(
    client: EngineClient, version: str
) -> None:
    # RFC 9112 6.3: no Content-Length and no chunked framing: the body ends at close.
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            f"{version} 200 OK\r\nContent-Type: text/event-stream\r\n"
            "Connection: close\r\n\r\n".encode()
            + event("one ")
            + event("two")
        )
        await writer.drain()
        writer.close()

    async with raw_engine(handler) as (url, _):
        assert await contents(client, url) == ["one ", "two"]


async def test_a_counted_body_cut_by_the_close_is_still_broken(client: EngineClient) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        data = event("one ")
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            + f"Content-Length: {len(data) + 100}\r\n\r\n".encode()
            + data
        )
        await writer.drain()
        writer.close()

    async with raw_engine(handler) as (url, _):
        with pytest.raises(EngineUnreachableError):
            await contents(client, url)


async def test_a_second_answer_in_the_same_bytes_is_never_read_as_the_next_ones(
    client: EngineClient,
) -> None:
    smuggled = sse_answer("SMUGGLED")

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answers = iter([sse_answer("first") + smuggled, sse_answer("second")])
        while await read_request(reader):
            writer.write(next(answers, sse_answer("later")))
            await writer.drain()

    async with raw_engine(handler) as (url, accepted):
        assert await contents(client, url) == ["first"]
        assert await contents(client, url) != ["SMUGGLED"]
        # The first connection was dropped: the second request went on a new one.
        assert len(accepted) == 2


async def test_bytes_sent_to_an_idle_connection_retire_it(client: EngineClient) -> None:
    retired = asyncio.Event()
    smuggled = sse_answer("SMUGGLED")

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(accepted) > 1:
            while await read_request(reader):
                writer.write(sse_answer("second"))
                await writer.drain()
            return
        await read_request(reader)
        writer.write(sse_answer("first"))
        await writer.drain()
        await asyncio.sleep(0)  # the client reads the answer and keeps the connection
        writer.write(smuggled)
        await writer.drain()
        # The gateway closes the connection it can no longer trust.
        await reader.read()
        retired.set()

    async with raw_engine(handler) as (url, accepted):
        assert await contents(client, url) == ["first"]
        async with asyncio.timeout(30):  # a hang guard, not a speed claim
            await retired.wait()
        assert await contents(client, url) == ["second"]
        assert len(accepted) == 2


async def test_an_endless_answer_head_is_a_broken_connection(client: EngineClient) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nX-Filler: ")
        while True:  # until the gateway drops the connection
            writer.write(b"a" * 16384)
            await writer.drain()

    async with raw_engine(handler) as (url, _):
        with pytest.raises(EngineUnreachableError) as raised:
            await contents(client, url)
    assert "too large" in str(raised.value.__cause__)
    assert MAX_HEAD_BYTES == 64 * 1024


async def test_an_endless_error_body_is_read_only_up_to_its_limit(client: EngineClient) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        while True:  # until the gateway stops reading and drops the connection
            writer.write(chunked(b"x" * 16384))
            await writer.drain()

    async with raw_engine(handler) as (url, _):
        with pytest.raises(EngineStatusError) as raised:
            await contents(client, url)
    assert raised.value.status == 500


@pytest.mark.parametrize(
    "answer",
    [b'{"data": 5}', b'{"data": "x"}', b"[1, 2]", b'{"data": {"id": "m"}}', b"null"],
    ids=["number", "string", "array", "object", "null"],
)
async def test_a_model_list_of_another_shape_is_an_engine_error(
    client: EngineClient, answer: bytes
) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await read_request(reader):
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(answer)}\r\n\r\n".encode()
                + answer
            )
            await writer.drain()

    async with raw_engine(handler) as (url, _):
        with pytest.raises(EngineError, match="not a model list"):
            await client.list_models(EngineSettings(url))


#: What an endless event is made of: one line that never ends (after nothing, or after a
#: line of the event), or short ``data:`` lines with never the blank line that ends an event.
ENDLESS = [
    pytest.param(b"data: ", b"a" * 65536, id="one-line"),
    pytest.param(b"data: x\ndata: ", b"a" * 65536, id="after-lines"),
    pytest.param(b"", b"data: x\n" * 8192, id="lines-without-a-blank-line"),
]


def endless_engine(start: bytes, unit: bytes) -> Handler:
    """An engine that sends one whole event, then ``start`` and ``unit`` until the gateway
    drops the connection."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + chunked(event("ok") + start)
        )
        while True:
            writer.write(chunked(unit))
            await writer.drain()

    return handler


@pytest.mark.parametrize(("start", "unit"), ENDLESS)
async def test_an_endless_event_is_an_engine_error_not_held_in_memory(
    client: EngineClient, start: bytes, unit: bytes
) -> None:
    async with raw_engine(endless_engine(start, unit)) as (url, _):
        with pytest.raises(EngineStreamError, match="larger than 1 MiB"):
            await contents(client, url)


@pytest.mark.parametrize(("start", "unit"), ENDLESS)
async def test_pass_through_refuses_an_endless_event_after_relaying_the_whole_ones(
    client: EngineClient, start: bytes, unit: bytes
) -> None:
    relayed: list[bytes] = []

    async def pass_through(url: str) -> None:
        engine = EngineSettings(url)
        async with client.open(engine, "/chat/completions", BODY) as exchange:
            async for piece in relay(exchange, engine):
                relayed.append(piece.data)

    async with raw_engine(endless_engine(start, unit)) as (url, _):
        with pytest.raises(EngineStreamError, match="larger than 1 MiB"):
            await pass_through(url)
    assert relayed == [event("ok")]
