"""A recording loopback proxy between the gateway and a real llama-server.

The gateway talks to it as to its engine; it records every request body it forwards and
relays the engine's answer byte for byte as it arrives (a stream stays a stream), keeping
a copy. Each request goes to the engine on a connection of its own with ``Connection:
close``, so the end of the engine's answer is the end of the connection, and the gateway
sees the same header and opens a new connection for its next round. What the tests read
here is what was on the wire: the message list of every round the Web loop sent, what the
engine answered each time, and whether the gateway hung up before the engine was done.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Forwarded:
    """One request the proxy forwarded, and the answer so far.

    Attributes:
        method: The HTTP method.
        path: The request target.
        body: The JSON body (an empty dict when there was none).
        response: The engine's answer as relayed (head and body, chunked as it came).
        hung_up: The gateway closed its connection before the engine's answer ended.
    """

    method: str
    path: str
    body: dict[str, Any]
    response: bytearray = field(default_factory=bytearray)
    hung_up: bool = False

    def status(self) -> int:
        """The engine's status code."""
        return int(self.response.split(b" ", 2)[1])

    def events(self) -> list[dict[str, Any]]:
        """The JSON ``data:`` events of a streamed answer (what arrived of them)."""
        head, _, body = bytes(self.response).partition(b"\r\n\r\n")
        if b"transfer-encoding: chunked" in head.lower():
            body = _dechunk(body)
        out: list[dict[str, Any]] = []
        for line in body.decode("utf-8", "replace").splitlines():
            if line.startswith("data: {"):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line[len("data: ") :]))
        return out

    def content(self) -> str:
        """The text the engine streamed (its ``delta.content`` joined)."""
        return "".join(
            event["choices"][0]["delta"].get("content") or ""
            for event in self.events()
            if event.get("choices")
        )


def _dechunk(body: bytes) -> bytes:
    """A chunked body's data, as far as it arrived."""
    out = bytearray()
    while body:
        size_line, sep, rest = body.partition(b"\r\n")
        if not sep:
            break
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return bytes(out)


class Recorder:
    """The proxy: ``async with Recorder(engine_v1_url) as proxy``; ``proxy.url`` is the
    OpenAI base URL to give the gateway."""

    def __init__(self, engine: str) -> None:
        parts = urlsplit(engine)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._prefix = parts.path
        self.forwarded: list[Forwarded] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        """The OpenAI base URL (the engine's path kept)."""
        return f"http://127.0.0.1:{self.port}{self._prefix}"

    @property
    def chats(self) -> list[Forwarded]:
        """The chat requests, in the order they arrived."""
        return [f for f in self.forwarded if f.path.endswith("/chat/completions")]

    def clear(self) -> None:
        """Forget what was recorded so far."""
        self.forwarded.clear()

    async def settled(self) -> None:
        """Wait until every exchange has ended (a relay the gateway hung up on ends when
        the next write finds the connection closed)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    async def __aenter__(self) -> Recorder:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._server = await asyncio.start_server(self._serve, sock=sock)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._one(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, version = lines[0].split(" ", 2)
        length = 0
        kept: list[str] = []
        for line in lines[1:]:
            if not line:
                continue
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
            if name.strip().lower() != "connection":
                kept.append(line)
        body = await reader.readexactly(length) if length else b""
        record = Forwarded(method, path, json.loads(body) if body else {})
        self.forwarded.append(record)
        upstream_reader, upstream = await asyncio.open_connection(self._host, self._port)
        try:
            request = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close"])
            upstream.write(request.encode("latin-1") + b"\r\n\r\n" + body)
            await upstream.drain()
            while part := await upstream_reader.read(65536):
                if writer.transport.is_closing() or reader.at_eof():
                    record.hung_up = True
                    return
                record.response += part
                writer.write(part)
                await writer.drain()
        except ConnectionError:
            record.hung_up = True
        finally:
            upstream.close()
