"""HTTP/1.1 exchanges with engines, for chat streams (I/O).

Chat answers are the gateway's hot path: every token of every stream passes here. httpx
(still used for ``/models``) parses a chunked body one chunk at a time in Python and scans
its whole connection pool on every request, which cost more CPU per token than the rest of
the gateway together (see ``bench/gateway_stream.py``). This module writes the request
head by hand, parses the answer with httptools (llhttp, in C) and hands the body on in
bulk: whatever arrived since the last read, many tokens at once when the engine is fast.

Connections are kept alive for the next chat in an `EnginePool` (idle ones only, a few per
engine, taken last-in first-out): there is no limit on connections in use, so the pool
never makes a chat wait. A kept connection the engine closed meanwhile is noticed when it
is taken (closing) or when its request gets no answer at all; then the request is sent
once more on a new connection (engines close idle connections after a few seconds).
Every failure is raised as a `gateway.errors.EngineError` naming the engine (never its
key).

Framing as RFC 9112 has it, whatever the engine sends: interim 1xx answers are skipped
for the final one; a body without ``Content-Length`` or chunked framing ends when the
engine closes the connection; an answer's head is at most `MAX_HEAD_BYTES`; and any
byte after a whole answer (a second response, a body longer than its framing) retires
the connection, so no later request can read another answer's bytes as its own.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import cast
from urllib.parse import urlsplit

import httptools

from gateway.api import quirks
from gateway.errors import EngineError, EngineTimeoutError, EngineUnreachableError
from gateway.settings import EngineSettings

#: Body bytes buffered before the engine connection stops being read (backpressure).
_HIGH_WATER = 1024 * 1024
#: Idle connections kept per engine address.
_IDLE_PER_ENGINE = 32
#: The most an answer's head (status line and header lines, interim 1xx heads included)
#: may take before the connection is dropped as broken.
MAX_HEAD_BYTES = 64 * 1024
#: Statuses whose answers never have a body (RFC 9110 6.4.1), whatever their headers say.
_NO_BODY = (204, 304)

_Key = tuple[str, int, bool]


def _broke(engine: EngineSettings, what: str) -> EngineError:
    return EngineUnreachableError(
        f"The {what} the model engine {engine.label} broke.", engine=engine.label
    )


class _Connection(asyncio.Protocol):
    """One engine connection: feeds httptools, collects each answer's head and body."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self.begin()

    def begin(self) -> None:
        """Start a new exchange on this connection."""
        self._parser = httptools.HttpResponseParser(self)
        self.head: asyncio.Future[None] = self._loop.create_future()
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.complete = False
        self.keep_alive = False
        self.received = False
        self.failure: BaseException | None = None
        #: Bytes received before the final head was complete (bounded by MAX_HEAD_BYTES).
        self._head_bytes = 0
        #: When bytes last arrived (the read timeout counts from here).
        self.last_activity = self._loop.time()

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A TCP transport (uvloop's is not a subclass of asyncio.Transport).
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.last_activity = self._loop.time()
        if self.complete:
            # Bytes nobody asked for after a whole answer (a second response, a body
            # longer than its framing said): the connection no longer agrees with the
            # engine on where answers start, so it must never carry another request.
            self._retire()
            return
        self.received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(exc)
            return
        if not self.head.done():
            # Counted after parsing: data that ends the head may carry body bytes too.
            # httptools keeps an unfinished header line in memory, so this is its bound.
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._fail(httptools.HttpParserError("the answer's head is too large"))
                return
        if len(self.body) > _HIGH_WATER and self.transport is not None and not self._paused:
            self._paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if not self.complete and exc is None and self._ends_at_close():
            # RFC 9112 6.3: without Content-Length or chunked framing, the body ends
            # when the engine closes the connection (HTTP/1.0-style servers do this).
            self.complete = True
            self._wake()
            return
        if not self.complete:
            self._fail(exc or ConnectionResetError("closed before the answer ended"))

    def _ends_at_close(self) -> bool:
        """Whether the answer being read is delimited by the end of the connection."""
        if not self.head.done() or self.failure is not None or self.status in _NO_BODY:
            return False
        chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        return not chunked and "content-length" not in self.headers

    def _retire(self) -> None:
        """Never use this connection again (it is closed; a later read sees the end)."""
        self.lost = True
        self.keep_alive = False
        if self.transport is not None:
            self.transport.abort()

    # httptools callbacks
    def on_message_begin(self) -> None:
        if self.complete:
            # A second answer in the same bytes as the first one: see data_received.
            self._retire()

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.head.done() or self.complete:
            return  # a retired connection's parser runs on to the end of the data
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        if self.head.done() or self.complete:
            return
        status = self._parser.get_status_code()
        if quirks.is_interim(status):
            # An interim answer (100 Continue, 103 Early Hints; RFC 9110 15.2): the
            # final one follows on the same connection. Its headers are not the answer's.
            self.headers = {}
            return
        self.status = status
        self.head.set_result(None)

    def on_body(self, body: bytes) -> None:
        if self.complete:
            return
        self.body += body
        self._wake()

    def on_message_complete(self) -> None:
        if self.complete or not self.head.done():
            return  # the end of an interim 1xx answer, or of bytes after the answer
        self.complete = True
        self.keep_alive = self._parser.should_keep_alive() and not self.lost
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

    def wake(self) -> None:
        """Wake the reader (the read timeout's way to end a wait)."""
        self._wake()

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

    def abort(self) -> None:
        """Drop the connection at once."""
        if self.transport is not None:
            self.transport.abort()


class EnginePool:
    """Idle kept-alive engine connections, per engine address (one per process)."""

    def __init__(self) -> None:
        self._idle: dict[_Key, list[_Connection]] = {}

    def take(self, key: _Key) -> _Connection | None:
        """The most recently used idle connection still open, if any."""
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            transport = connection.transport
            if not connection.lost and transport is not None and not transport.is_closing():
                return connection
        return None

    def give_back(self, key: _Key, connection: _Connection) -> None:
        """Keep a connection whose answer ended cleanly, or close it if enough are kept."""
        idle = self._idle.setdefault(key, [])
        if len(idle) >= _IDLE_PER_ENGINE or connection.lost:
            connection.abort()
            return
        idle.append(connection)

    def close(self) -> None:
        """Close every idle connection."""
        for idle in self._idle.values():
            for connection in idle:
                connection.abort()
        self._idle.clear()


class EngineExchange:
    """An engine's answer: status and headers known, the body read as it arrives."""

    def __init__(
        self,
        engine: EngineSettings,
        connection: _Connection,
        read_timeout: float,
        pool: EnginePool,
        key: _Key,
    ) -> None:
        self._engine = engine
        self._connection = connection
        self._read_timeout = read_timeout
        self._pool = pool
        self._key = key
        self._watchdog: asyncio.TimerHandle | None = None
        self._silent = False
        self._closed = False
        self.status = connection.status
        self.headers = connection.headers

    async def read(self) -> bytes:
        """Every body byte that arrived since the last read; ``b""`` at the end.

        The read timeout is one timer per exchange, moved on only when it fires (not a
        timer per read: reads happen once per token).

        Raises:
            EngineTimeoutError: Nothing arrived within the read timeout.
            EngineUnreachableError: The connection broke before the answer ended.
        """
        connection = self._connection
        while not connection.body:
            if connection.complete:
                return b""
            if connection.failure is not None:
                raise _broke(self._engine, "connection to") from connection.failure
            if self._silent:
                raise EngineTimeoutError(
                    f"The model engine {self._engine.label} did not answer in time.",
                    engine=self._engine.label,
                )
            if self._watchdog is None:
                self._arm(self._read_timeout)
            await connection.wait()
        return connection.take()

    def _arm(self, delay: float) -> None:
        loop = asyncio.get_running_loop()
        self._watchdog = loop.call_later(delay, self._check)

    def _check(self) -> None:
        """The watchdog: silent past the read timeout, or look again when it could be."""
        self._watchdog = None
        connection = self._connection
        if connection.complete or connection.failure is not None:
            return
        quiet = asyncio.get_running_loop().time() - connection.last_activity
        if quiet >= self._read_timeout:
            self._silent = True
            connection.wake()
        else:
            self._arm(self._read_timeout - quiet)

    async def read_all(self, limit: int) -> bytes:
        """The body, up to ``limit`` bytes: past them the rest is not read (the exchange
        cannot keep its connection then), so an endless body cannot hold the reader."""
        parts: list[bytes] = []
        size = 0
        while size < limit and (part := await self.read()):
            parts.append(part)
            size += len(part)
        return b"".join(parts)[:limit]

    def close(self) -> None:
        """End the exchange: the connection goes back to the pool if the answer ended
        cleanly and the engine keeps it alive, else it is dropped at once (a cancelled
        stream leaves nothing behind)."""
        if self._closed:
            return
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        connection = self._connection
        if connection.complete and connection.keep_alive and not connection.body:
            self._pool.give_back(self._key, connection)
        else:
            connection.abort()


def _request_head(engine: EngineSettings, path: str, length: int) -> tuple[_Key, bytes]:
    parts = urlsplit(engine.url)
    tls = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if tls else 80)
    authority = f"[{host}]" if ":" in host else host
    if parts.port:
        authority = f"{authority}:{parts.port}"
    lines = [
        f"POST {parts.path}{path} HTTP/1.1",
        f"Host: {authority}",
        "Content-Type: application/json",
        f"Content-Length: {length}",
        # The bytes are forwarded as they come in pass-through: no content coding.
        "Accept-Encoding: identity",
        "Accept: text/event-stream, application/json",
        "User-Agent: tigress-gateway",
    ]
    if engine.api_key:
        lines.append(f"Authorization: Bearer {engine.api_key}")
    return (host, port, tls), ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _connect(engine: EngineSettings, key: _Key, connect_timeout: float) -> _Connection:
    loop = asyncio.get_running_loop()
    host, port, tls = key
    connection = _Connection(loop)
    context = ssl.create_default_context() if tls else None
    try:
        async with asyncio.timeout(connect_timeout):
            await loop.create_connection(lambda: connection, host, port, ssl=context)
    except TimeoutError as exc:
        raise EngineTimeoutError(
            f"The model engine {engine.label} did not accept a connection in time.",
            engine=engine.label,
        ) from exc
    except OSError as exc:
        raise EngineUnreachableError(
            f"The model engine {engine.label} cannot be reached.", engine=engine.label
        ) from exc
    return connection


async def open_exchange(
    engine: EngineSettings,
    path: str,
    body: bytes,
    *,
    pool: EnginePool,
    connect_timeout: float,
    read_timeout: float,
) -> EngineExchange:
    """POST ``body`` to the engine's ``path`` and wait for the answer's head.

    Raises:
        EngineUnreachableError: No connection, or it broke before the head.
        EngineTimeoutError: No connection or no head in time.
    """
    key, head = _request_head(engine, path, len(body))
    kept = pool.take(key)
    while True:
        connection = kept or await _connect(engine, key, connect_timeout)
        connection.begin()
        transport = connection.transport
        assert transport is not None
        try:
            transport.write(head + body)
            async with asyncio.timeout(read_timeout):
                await connection.head
        except TimeoutError as exc:
            connection.abort()
            raise EngineTimeoutError(
                f"The model engine {engine.label} did not answer in time.", engine=engine.label
            ) from exc
        except (OSError, httptools.HttpParserError) as exc:
            connection.abort()
            if kept is not None and not connection.received:
                # A kept connection the engine had closed: once more on a new one.
                kept = None
                continue
            raise _broke(engine, "connection to") from exc
        except BaseException:
            connection.abort()
            raise
        return EngineExchange(engine, connection, read_timeout, pool, key)
