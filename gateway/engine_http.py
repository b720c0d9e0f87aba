"""One HTTP/1.1 exchange with an engine, for chat streams (I/O).

Chat answers are the gateway's hot path: every token of every stream passes here. httpx
(still used for ``/models``) parses a chunked body one chunk at a time in Python and scans
its whole connection pool on every request, which cost more CPU per token than the rest of
the gateway together (see ``bench/gateway_stream.py``). This module sends one request on
its own connection with the request head written by hand, parses the answer with
httptools (llhttp, in C) and hands the body on in bulk: whatever arrived since the last
read, many tokens at once when the engine is fast.

One connection per chat, closed after it (``Connection: close``): no pool, so no pool
limit and no stale kept-alive connection to retry; on loopback a connection costs tens of
microseconds, nothing next to an answer. Every failure is raised as a
`gateway.errors.EngineError` naming the engine (never its key).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import cast
from urllib.parse import urlsplit

import httptools

from gateway.errors import EngineError, EngineTimeoutError, EngineUnreachableError
from gateway.settings import EngineSettings

#: Body bytes buffered before the engine connection stops being read (backpressure).
_HIGH_WATER = 1024 * 1024


def _broke(engine: EngineSettings, what: str) -> EngineError:
    error = EngineUnreachableError(f"The {what} the model engine {engine.label} broke.")
    error.engine = engine.label
    return error


class _Exchange(asyncio.Protocol):
    """The connection's protocol: feeds httptools, collects the head and the body."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self.head: asyncio.Future[None] = loop.create_future()
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.complete = False
        self.failure: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A TCP transport (uvloop's is not a subclass of asyncio.Transport).
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(exc)
            return
        if len(self.body) > _HIGH_WATER and self.transport is not None and not self._paused:
            self._paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.complete:
            self._fail(exc or ConnectionResetError("closed before the answer ended"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        if not self.head.done():
            self.head.set_result(None)

    def on_body(self, body: bytes) -> None:
        self.body += body
        self._wake()

    def on_message_complete(self) -> None:
        self.complete = True
        self._wake()

    def _fail(self, exc: BaseException) -> None:
        if self.failure is None and not self.complete:
            self.failure = exc
        if not self.head.done():
            self.head.set_exception(exc)
            # Retrieved by `open_exchange`, or deliberately not (a cancelled opener).
            self.head.exception()
        self._wake()
        if self.transport is not None:
            self.transport.close()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Until body bytes, the end or a failure arrive."""
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def take(self) -> bytes:
        """The body bytes received so far (then resumes reading if paused)."""
        data = bytes(self.body)
        self.body.clear()
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data


class EngineExchange:
    """An engine's answer: status and headers known, the body read as it arrives."""

    def __init__(self, engine: EngineSettings, exchange: _Exchange, read_timeout: float):
        self._engine = engine
        self._exchange = exchange
        self._read_timeout = read_timeout
        self.status = exchange.status
        self.headers = exchange.headers

    async def read(self) -> bytes:
        """Every body byte that arrived since the last read; ``b""`` at the end.

        Raises:
            EngineTimeoutError: Nothing arrived within the read timeout.
            EngineUnreachableError: The connection broke before the answer ended.
        """
        exchange = self._exchange
        while not exchange.body:
            if exchange.complete:
                return b""
            if exchange.failure is not None:
                raise _broke(self._engine, "connection to") from exchange.failure
            try:
                async with asyncio.timeout(self._read_timeout):
                    await exchange.wait()
            except TimeoutError as exc:
                error = EngineTimeoutError(
                    f"The model engine {self._engine.label} did not answer in time."
                )
                error.engine = self._engine.label
                raise error from exc
        return exchange.take()

    async def read_all(self, limit: int) -> bytes:
        """The whole body (at most ``limit`` bytes are kept)."""
        parts: list[bytes] = []
        size = 0
        while part := await self.read():
            if size < limit:
                parts.append(part)
            size += len(part)
        return b"".join(parts)[:limit]

    def close(self) -> None:
        """Close the connection (at once; a cancelled stream leaves nothing behind)."""
        transport = self._exchange.transport
        if transport is not None:
            transport.abort()


def _request_head(engine: EngineSettings, path: str, length: int) -> tuple[str, int, bytes, bool]:
    parts = urlsplit(engine.url)
    tls = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if tls else 80)
    authority = f"[{host}]" if ":" in host else host
    if parts.port:
        authority = f"{authority}:{parts.port}"
    target = f"{parts.path}{path}"
    lines = [
        f"POST {target} HTTP/1.1",
        f"Host: {authority}",
        "Content-Type: application/json",
        f"Content-Length: {length}",
        # The bytes are forwarded as they come in pass-through: no content coding.
        "Accept-Encoding: identity",
        "Accept: text/event-stream, application/json",
        "Connection: close",
        "User-Agent: tigress-gateway",
    ]
    if engine.api_key:
        lines.append(f"Authorization: Bearer {engine.api_key}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return host, port, head, tls


async def open_exchange(
    engine: EngineSettings,
    path: str,
    body: bytes,
    *,
    connect_timeout: float,
    read_timeout: float,
) -> EngineExchange:
    """POST ``body`` to the engine's ``path`` and wait for the answer's head.

    Raises:
        EngineUnreachableError: No connection, or it broke before the head.
        EngineTimeoutError: No connection or no head in time.
    """
    loop = asyncio.get_running_loop()
    host, port, head, tls = _request_head(engine, path, len(body))
    exchange = _Exchange(loop)
    context = ssl.create_default_context() if tls else None
    try:
        async with asyncio.timeout(connect_timeout):
            await loop.create_connection(lambda: exchange, host, port, ssl=context)
    except TimeoutError as exc:
        error: EngineError = EngineTimeoutError(
            f"The model engine {engine.label} did not accept a connection in time."
        )
        error.engine = engine.label
        raise error from exc
    except OSError as exc:
        error = EngineUnreachableError(f"The model engine {engine.label} cannot be reached.")
        error.engine = engine.label
        raise error from exc
    transport = exchange.transport
    assert transport is not None
    try:
        transport.write(head + body)
        async with asyncio.timeout(read_timeout):
            await exchange.head
    except TimeoutError as exc:
        transport.abort()
        error = EngineTimeoutError(f"The model engine {engine.label} did not answer in time.")
        error.engine = engine.label
        raise error from exc
    except (OSError, httptools.HttpParserError) as exc:
        transport.abort()
        raise _broke(engine, "connection to") from exc
    except BaseException:
        transport.abort()
        raise
    return EngineExchange(engine, exchange, read_timeout)
