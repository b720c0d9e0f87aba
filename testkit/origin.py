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

from testkit.server import LoopbackServer, parse_head

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


class Origin(LoopbackServer):
    """An HTTPS server on 127.0.0.1 with routes set by the test."""

    def __init__(self, ca: trustme.CA, names: tuple[str, ...] = NAMES) -> None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(*names, "127.0.0.1").configure_cert(context)
        context.sni_callback = self._remember_sni
        super().__init__(ssl_context=context)
        self.routes: dict[str, Handler] = {}
        self.requests: list[Request] = []
        self._sni: dict[int, str | None] = {}

    def _remember_sni(self, sslobj: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        self._sni[id(sslobj)] = name

    def url(self, path: str = "/", host: str = "origin.test") -> str:
        """The address of ``path`` on this origin under ``host``."""
        return f"https://{host}:{self.port}{path}"

    async def answer(
        self,
        head: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        connection: int,
    ) -> bool:
        method, target, headers = parse_head(head)
        sni = self._sni.get(id(writer.get_extra_info("ssl_object")))
        request = Request(head, method, target, headers, sni, connection)
        self.requests.append(request)
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


@contextlib.asynccontextmanager
async def running_origin(ca: trustme.CA, port: int = 0) -> AsyncIterator[Origin]:
    """Start an :class:`Origin` (on ``port``, or an ephemeral one) and stop it afterwards."""
    origin = Origin(ca)
    await origin.start(port)
    try:
        yield origin
    finally:
        await origin.stop()
