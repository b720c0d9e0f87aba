"""A streaming engine at full speed: the scripted engine of the stand-in benchmarks.

Unlike :class:`testkit.engine.FakeEngine`, which lets a test control every byte and
records what it was sent, this one only answers: one request read after another on each
connection, ``GET`` answered with one model, a chat streamed as the events a script gives,
each drained as it goes (the way llama-server flushes per token). ``bench/research.py``
and ``bench/gateway_stream.py`` run it in processes of their own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

__all__ = [
    "SSE_END",
    "SSE_HEAD",
    "Answer",
    "chunk",
    "engine_handler",
    "framed",
    "models_answer",
    "read_request",
]

#: The head of a streamed answer: SSE in HTTP chunks.
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def framed(data: bytes) -> bytes:
    """``data`` as one HTTP chunk."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


#: The end of a streamed answer: ``[DONE]``, then the last chunk.
SSE_END = framed(b"data: [DONE]\n\n") + b"0\r\n\r\n"


def chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One ``chat.completion.chunk`` event, framed as an HTTP chunk."""
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return framed(b"data: " + json.dumps(body).encode() + b"\n\n")


def models_answer(model: str) -> bytes:
    """The whole answer to ``GET /models``: ``model`` alone."""
    models = json.dumps({"object": "list", "data": [{"id": model}]}).encode()
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(models)}\r\n\r\n".encode()
        + models
    )


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, dict[str, Any]]:
    """One request to the engine: its head and its JSON body (``{}`` without one).

    Raises:
        asyncio.IncompleteReadError: The client closed the connection.
    """
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head, json.loads(await reader.readexactly(length)) if length else {}


#: A scripted engine's answer to one chat request: the SSE events to stream, in order.
Answer = Callable[[dict[str, Any]], Awaitable[Sequence[bytes]]]


def engine_handler(
    model: str, answer: Answer
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    """A scripted engine's connection handler for :func:`asyncio.start_server`: requests
    read one after another on the connection, ``GET`` answered with ``model`` as the one
    model, a chat request streamed as ``answer(body)``'s events, each drained as it goes."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head, body = await read_request(reader)
                if head.startswith(b"GET"):
                    writer.write(models_answer(model))
                    await writer.drain()
                    continue
                events = await answer(body)
                writer.write(SSE_HEAD)
                for event in events:
                    writer.write(event)
                    await writer.drain()
                writer.write(SSE_END)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return serve
