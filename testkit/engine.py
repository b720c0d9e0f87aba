"""A fake model engine: a real HTTP/1.1 server on 127.0.0.1 speaking the OpenAI protocol.

Each test scripts the replies (one per chat request, in order) and reads back what the
engine received. Written on raw asyncio streams so a test controls every byte: chunk
boundaries, stalls, a connection dropped mid-stream, old error fields, a missing
``[DONE]``. It also records when a client closed its connection before a reply ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections import deque
from dataclasses import dataclass, field
from typing import Any

MODEL = "test-model"


@dataclass(frozen=True)
class Data:
    """One ``data:`` event holding a JSON object."""

    obj: dict[str, Any]


@dataclass(frozen=True)
class Raw:
    """Bytes written as they are (comment lines, old error fields, broken framing)."""

    text: str


@dataclass(frozen=True)
class Stall:
    """Send nothing more until the client goes away (or the engine is stopped)."""


@dataclass(frozen=True)
class Drop:
    """Close the connection at once, leaving the chunked body unfinished."""


@dataclass(frozen=True)
class Pause:
    """Wait until the test calls `FakeEngine.release`."""


Step = Data | Raw | Stall | Drop | Pause


@dataclass
class Reply:
    """The engine's answer to one chat request.

    Attributes:
        steps: Stream events (streaming requests).
        status: HTTP status.
        body: A JSON body instead of a stream (errors, ``stream: false`` answers).
        done: End the stream with ``data: [DONE]``.
    """

    steps: list[Step] = field(default_factory=list)
    status: int = 200
    body: dict[str, Any] | None = None
    done: bool = True
    #: Extra response headers (``Retry-After`` with a 429, say).
    headers: dict[str, str] = field(default_factory=dict)
    #: Wait for `FakeEngine.release` before sending even the response head.
    hold_head: bool = False
    #: A body sent as these bytes, with ``content_type`` (an engine's error as it writes it).
    raw_body: bytes | None = None
    content_type: str = "application/json"


@dataclass
class Received:
    """A request the engine received."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def chunk(
    delta: dict[str, Any],
    finish: str | None = None,
    *,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` as llama-server and vLLM send it."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
    }


def usage_chunk(prompt: int = 10, completion: int = 5) -> dict[str, Any]:
    """The usage-only chunk with empty ``choices``."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": MODEL,
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def text_reply(*pieces: str, usage: bool = True, reasoning: tuple[str, ...] = ()) -> Reply:
    """A plain answer streamed as ``pieces``."""
    steps: list[Step] = [Data(chunk({"role": "assistant", "content": ""}))]
    steps += [Data(chunk({"reasoning_content": r})) for r in reasoning]
    steps += [Data(chunk({"content": p})) for p in pieces]
    steps.append(Data(chunk({}, "stop")))
    if usage:
        steps.append(Data(usage_chunk()))
    return Reply(steps)


def cut_reply(*pieces: str) -> Reply:
    """Text streamed as ``pieces`` and ended by the token limit (``finish_reason:
    "length"``), with no call: how llama-server can end a ``tool_choice: "required"``
    round, its grammar allowing free text before the call (issue 14)."""
    steps: list[Step] = [Data(chunk({"role": "assistant", "content": ""}))]
    steps += [Data(chunk({"content": p})) for p in pieces]
    steps += [Data(chunk({}, "length")), Data(usage_chunk())]
    return Reply(steps)


def tool_reply(
    *calls: tuple[str, str],
    split: int = 3,
    ids: bool = True,
    content: str | None = None,
) -> Reply:
    """Structured tool calls, each call's arguments split into ``split`` fragments.

    Args:
        calls: (name, arguments JSON text) pairs.
        split: Fragments per call's arguments.
        ids: Give ids (llama-server sometimes sends empty ones).
        content: Content sent before the calls (``"\\n\\n"`` like llama-server).
    """
    steps: list[Step] = [Data(chunk({"role": "assistant", "content": content}))]
    for index, (name, arguments) in enumerate(calls):
        steps.append(
            Data(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": f"call_{index}" if ids else "",
                                "type": "function",
                                "function": {"name": name, "arguments": ""},
                            }
                        ]
                    }
                )
            )
        )
        size = max(1, -(-len(arguments) // split))
        for start in range(0, len(arguments), size):
            piece = arguments[start : start + size]
            steps.append(
                Data(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
            )
    steps.append(Data(chunk({}, "tool_calls")))
    steps.append(Data(usage_chunk()))
    return Reply(steps)


def error_reply(
    status: int,
    message: str,
    kind: str = "invalid_request_error",
    headers: dict[str, str] | None = None,
) -> Reply:
    """An error status with an OpenAI error body."""
    return Reply(
        status=status,
        body={"error": {"message": message, "type": kind, "code": status}},
        headers=headers or {},
    )


class HungServer:
    """Accepts connections and reads requests, and never answers: a hung engine.

    ``requests`` counts request heads received; every connection stays open until the
    server stops.
    """

    def __init__(self) -> None:
        self.requests = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> HungServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                self.requests += 1
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()


def completion_body(text: str) -> dict[str, Any]:
    """A ``stream: false`` answer."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1767225600,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


class FakeEngine:
    """The server. Use ``async with FakeEngine() as engine``; ``engine.url`` is the base."""

    def __init__(self, models: list[str] | None = None) -> None:
        self.models = [MODEL] if models is None else models
        #: Status of ``/models`` answers (500: the look-up fails).
        self.models_status = 200
        self.replies: deque[Reply] = deque()
        self.received: list[Received] = []
        #: Set when a client closed its connection before its reply was finished.
        self.closed_early = asyncio.Event()
        #: Set when a chat request arrives.
        self.chat_received = asyncio.Event()
        self._released = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0
        #: Connections accepted so far.
        self.connections = 0

    def drop_connections(self) -> None:
        """Close every open connection (an engine closing idle kept-alive ones)."""
        for writer in list(self._writers):
            writer.transport.abort()

    @property
    def url(self) -> str:
        """The OpenAI base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next chat requests."""
        self.replies.extend(replies)

    def release(self) -> None:
        """Let a paused reply go on."""
        self._released.set()

    @property
    def chats(self) -> list[dict[str, Any]]:
        """Bodies of the chat requests received."""
        return [r.body for r in self.received if r.path.endswith("/chat/completions")]

    async def __aenter__(self) -> FakeEngine:
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on such sockets.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._server = await asyncio.start_server(self._serve, sock=sock)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self._released.set()
        for writer in list(self._writers):
            writer.transport.abort()
        await self._server.wait_closed()
        # Let the handlers see their connections end.
        for _ in range(3):
            await asyncio.sleep(0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        self.connections += 1
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            self.closed_early.set()
        except asyncio.CancelledError:
            # Stopped with the test: end quietly (asyncio logs handler tasks that end
            # cancelled).
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return False
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        raw = await reader.readexactly(length) if length else b""
        body = json.loads(raw) if raw else {}
        self.received.append(Received(method, path, headers, body))
        if method == "GET" and path.endswith("/models"):
            await self._json(
                writer,
                self.models_status,
                {"object": "list", "data": [{"id": m} for m in self.models]},
            )
            return True
        if not path.endswith("/chat/completions"):
            await self._json(writer, 404, {"error": {"message": "no route"}})
            return True
        self.chat_received.set()
        reply = self.replies.popleft() if self.replies else text_reply("(unscripted)")
        if not body.get("stream") and reply.steps and isinstance(reply.steps[0], Stall):
            # A non-streaming answer that never comes: wait for the client to give up.
            await reader.read(1)
            self.closed_early.set()
            return False
        if reply.hold_head:
            await self._released.wait()
            self._released.clear()
        if reply.raw_body is not None:
            await self._bytes(
                writer, reply.status, reply.raw_body, reply.content_type, reply.headers
            )
            return True
        if reply.body is not None or not body.get("stream"):
            payload = reply.body if reply.body is not None else completion_body("(unscripted)")
            await self._json(writer, reply.status, payload, reply.headers)
            return True
        return await self._stream(reader, writer, reply)

    async def _json(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        payload: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> None:
        await self._bytes(writer, status, json.dumps(payload).encode(), "application/json", headers)

    async def _bytes(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        data: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n{extra}"
            f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await writer.drain()

    async def _stream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reply: Reply
    ) -> bool:
        writer.write(
            f"HTTP/1.1 {reply.status} X\r\nContent-Type: text/event-stream\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )

        def send(data: bytes) -> None:
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        for step in reply.steps:
            if isinstance(step, Data):
                send(b"data: " + json.dumps(step.obj).encode() + b"\n\n")
            elif isinstance(step, Raw):
                send(step.text.encode())
            elif isinstance(step, Drop):
                await writer.drain()
                writer.transport.abort()
                return False
            elif isinstance(step, Pause):
                await writer.drain()
                await self._released.wait()
                self._released.clear()
            elif isinstance(step, Stall):
                await writer.drain()
                # The client closing its end shows up as end of input here.
                await reader.read(1)
                self.closed_early.set()
                return False
            await writer.drain()
        if reply.done:
            send(b"data: [DONE]\n\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True
