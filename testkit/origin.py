"""A real HTTPS origin on 127.0.0.1 for tests and benchmarks.

It speaks HTTP/1.1 over TLS with a ``trustme`` certificate, serves scripted replies per
path, keeps connections alive like a real server, and records every request exactly as
it arrived (raw bytes, and the SNI name the client sent), so tests can assert on what
the fetcher put on the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable

import trustme

#: Names the origin's certificate is valid for. Test resolvers map them to 127.0.0.1.
NAMES = ("origin.test", "www.origin.test", "docs.origin.test", "other.test")


@dataclasses.dataclass(frozen=True)
class Request:
    """One request as received."""

    raw: bytes
    method: str
    target: str
    headers: dict[str, str]
    sni: str | None
    connection: int


@dataclasses.dataclass(frozen=True)
class Reply:
    """What the origin answers.

    Attributes:
        status: HTTP status.
        headers: Extra headers (Content-Length is added for byte bodies).
        body: Bytes, or an async iterator of chunks (sent until it ends, then the
            connection closes).
        delay: Seconds to wait before answering at all.
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "text/html; charset=utf-8"),)
    body: bytes | Callable[[], AsyncIterator[bytes]] = b""
    delay: float = 0.0
    close_after: bool = False  # hang up after answering, without saying so
    hang_up: bool = False  # close the connection without answering at all


Handler = Reply | Callable[[Request], Awaitable[Reply]]


def html(body: str, *, status: int = 200, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    """A UTF-8 HTML reply."""
    return Reply(
        status=status,
        headers=(("Content-Type", "text/html; charset=utf-8"), *headers),
        body=body.encode(),
    )


def redirect(
    location: str, *, status: int = 302, headers: tuple[tuple[str, str], ...] = ()
) -> Reply:
    """A redirect reply."""
    return Reply(status=status, headers=(("Location", location), *headers), body=b"")


class Origin:
    """An HTTPS server on 127.0.0.1 with routes set by the test."""

    def __init__(self, ca: trustme.CA, names: tuple[str, ...] = NAMES) -> None:
        self.routes: dict[str, Handler] = {}
        self.requests: list[Request] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(*names, "127.0.0.1").configure_cert(self._context)
        self._sni: dict[int, str | None] = {}
        self.connections = 0
        self._context.sni_callback = self._remember_sni

    def _remember_sni(self, sslobj: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        self._sni[id(sslobj)] = name

    def url(self, path: str = "/", host: str = "origin.test") -> str:
        """The address of ``path`` on this origin under ``host``."""
        return f"https://{host}:{self.port}{path}"

    async def start(self, port: int = 0) -> None:
        """Listen on 127.0.0.1, on ``port`` or an ephemeral one."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port, ssl=self._context)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening and drop every open connection."""
        if self._server is not None:
            self._server.close()
        # Abort the connections and cancel their handlers (a handler may be sleeping in a
        # scripted delay); handlers end quietly on cancellation, see _serve.
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(Exception):
                await task
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._writers.add(writer)
        ssl_object = writer.get_extra_info("ssl_object")
        sni = self._sni.get(id(ssl_object))
        self.connections += 1
        connection = self.connections
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
                    return
                request = _parse_request(head, sni, connection)
                self.requests.append(request)
                keep_alive = await self._answer(request, writer)
                if not keep_alive:
                    return
        except (ConnectionError, ssl.SSLError):
            return
        except asyncio.CancelledError:
            # Only stop() cancels handlers; ending normally keeps asyncio from logging
            # the cancelled task as an error.
            return
        finally:
            self._connections.discard(task)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        handler = self.routes.get(request.target.split("?")[0]) or self.routes.get(request.target)
        if handler is None:
            reply = Reply(status=404, body=b"not found")
        elif isinstance(handler, Reply):
            reply = handler
        else:
            reply = await handler(request)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.hang_up:
            return False
        lines = [f"HTTP/1.1 {reply.status} Status"]
        lines += [f"{name}: {value}" for name, value in reply.headers]
        if isinstance(reply.body, bytes):
            lines.append(f"Content-Length: {len(reply.body)}")
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + reply.body)
            await writer.drain()
            return not reply.close_after
        lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        async for chunk in reply.body():
            writer.write(chunk)
            await writer.drain()
        return False


def _parse_request(head: bytes, sni: str | None, connection: int) -> Request:
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return Request(
        raw=head, method=method, target=target, headers=headers, sni=sni, connection=connection
    )


@contextlib.asynccontextmanager
async def running_origin(ca: trustme.CA, port: int = 0) -> AsyncIterator[Origin]:
    """Start an :class:`Origin` (on ``port``, or an ephemeral one) and stop it afterwards."""
    origin = Origin(ca)
    await origin.start(port)
    try:
        yield origin
    finally:
        await origin.stop()
