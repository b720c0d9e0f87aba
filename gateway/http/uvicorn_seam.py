"""The one module on uvicorn's internals (I/O): what no uvicorn setting gives.

`gateway.http.serving.uvicorn_config` takes every limit uvicorn has a setting for
(``timeout_keep_alive``, ``timeout_graceful_shutdown``, ``ws``, ``proxy_headers``, ...).
What is left is here, and only here, and ``tests/gateway/http/test_uvicorn_seam.py``
fails, naming the name, when a uvicorn release changes what it relies on. The pin in
pyproject.toml (``uvicorn<0.NEXT``) is the newest minor that test and the serving tests
passed on; a new minor is let in by running them on it.

`GuardedProtocol` subclasses ``uvicorn.protocols.http.httptools_impl.HttpToolsProtocol``
(its ``http=`` setting takes a class), for:

- **the header timeout** (``client_header``): uvicorn has none (``timeout_keep_alive``
  runs only between requests, and is reset by every byte);
- **the connection cap** (``max_connections``): ``limit_concurrency`` is judged only
  once a head is complete (a silent connection is never refused), answers plain text
  without ``Retry-After``, and logs a warning per request; here the excess is answered
  at once, in the OpenAI shape, and counted, not logged;
- **connections per client** (``connections_per_client``, with ``trusted_proxies``'
  ``X-Forwarded-For``): no setting;
- **malformed HTTP and heads over** `gateway.http.client_limits.MAX_HEAD_BYTES`: uvicorn
  answers plain text, and has no head limit for httptools (``h11_max_incomplete_event_size``
  is h11's alone, and h11 is the slower parser).

It overrides ``__init__``, ``connection_made``, ``connection_lost``, ``data_received``,
``on_message_begin``, ``on_url``, ``on_header``, ``on_headers_complete`` and
``send_400_response`` (each calls uvicorn's own), and reads ``self.transport``,
``self.loop``, ``self.headers`` (lower-case names) and ``self.cycle``
(``response_complete``, ``response_started``, ``disconnected``, ``message_event``). It
relies on uvicorn answering an exception raised in a parser callback (httptools wraps it
in ``HttpParserError``) with ``send_400_response``, after logging "Invalid HTTP request
received." (`gateway.http.serving.AcceptFloodFilter` rate-limits that line).

`GatewayServer` subclasses ``uvicorn.Server`` for the graceful drain: no setting starts
anything at the signal, and uvicorn re-raises the signal after its shutdown (so the
process would not exit 0). It overrides ``startup(sockets)`` and ``handle_exit(sig,
frame)`` (the handler ``capture_signals`` installs) and sets ``should_exit`` and
``force_exit``; not calling uvicorn's ``handle_exit`` keeps the signal out of the list
uvicorn re-raises.
"""

from __future__ import annotations

import asyncio
import signal
from types import FrameType
from typing import Any, ClassVar

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.http.browsers import Head, client_of
from gateway.http.client_limits import (
    BUSY,
    CLIENT_BUSY,
    MALFORMED,
    MAX_HEAD_BYTES,
    ConnectionGuard,
)
from gateway.stream.drain import Drain


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the header timeout, the connection cap and an
    OpenAI-shaped 400 (see the module docstring). Built per server by `protocol_for`.

    # Security
    Rule: a connection must deliver each request head within ``client_header`` seconds
    and within `MAX_HEAD_BYTES` (plus at most one read), and at most
    ``max_connections`` are served at once; the excess is answered 503 and closed
    without a log line.
    Threat: slow-header clients (slowloris), a header line that never ends (held in
    memory by the parser: at loopback speed gigabytes within the header timeout), or a
    flood of connections holding every file descriptor, so real users cannot connect and
    the log drowns.
    One client (`ConnectionGuard.take`) gets at most ``connections_per_client`` of them.
    Callers may rely on: no connection stays open idle or half-sent past the header
    timeout, no request head costs more memory than the cap, and open connections never
    exceed the cap, nor one client's its share. Proved by
    ``test_a_request_head_that_does_not_arrive_in_time_is_closed``,
    ``test_a_header_line_that_never_ends_is_400_at_the_cap`` and
    ``test_connections_past_the_limit_get_503_and_are_closed`` in
    ``tests/gateway/http/test_serving.py``, ``tests/gateway/http/test_fair_share.py``,
    ``tests/gateway/http/test_uvicorn_seam.py``, and
    ``test_at_the_descriptor_limit_the_gateway_keeps_serving_without_a_log_flood`` in
    ``tests/gateway/test_process.py``.
    """

    guard: ClassVar[ConnectionGuard]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refused = False
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        #: A request head is being received (from the connection's start or the first
        #: byte of a request until its headers are complete).
        self._in_head = True
        #: Bytes received while in a head, counted per read (see `data_received`).
        self._head_received = 0
        #: A request began during the read being parsed now.
        self._began = False
        #: The connection was refused a head too large: what it sends is dropped.
        self._discarding = False
        #: The peer address; whose connection this is now (`ConnectionGuard.clients`).
        self._peer: str | None = None
        self._client: str | None = None
        #: The answer to send instead of the malformed-request 400 (a client's share).
        self._refusal = MALFORMED

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        guard = self.guard
        if guard.open >= guard.max_connections:
            self._refused = True
            guard.metrics.client_connections_closed.labels("limit").inc()
            transport.write(BUSY)
            transport.close()
            return
        peer = transport.get_extra_info("peername")
        self._peer = peer[0] if isinstance(peer, tuple) and peer else None
        if self._peer is not None and not guard.proxies.trusts(self._peer):
            if not guard.take(self._peer):
                self._refused = True
                guard.metrics.client_connections_closed.labels("client_limit").inc()
                transport.write(CLIENT_BUSY)
                transport.close()
                return
            self._client = self._peer
        guard.open += 1
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused:
            return
        if self._client is not None:
            self.guard.give_back(self._client)
            self._client = None
        self.guard.open -= 1
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused or self._discarding:
            return
        self._began = False
        super().data_received(data)
        if self._discarding or not self._in_head or self._began or self.transport.is_closing():
            # A read in which a request began may hold the end of the previous one:
            # not counted (at most one read, 256 KiB, goes uncounted).
            return
        # httptools keeps a header line in memory until it ends, and calls on_header only
        # then: a line that never ends is bounded here, by the bytes of the reads.
        self._head_received += len(data)
        if self._head_received > MAX_HEAD_BYTES:
            self._refuse_head()

    def _refuse_head(self) -> None:
        """Answer 400 to a request that is malformed or whose head is too large, and drop
        the rest of what the client sends.

        Closing at once, with the client's bytes unread, would make the kernel reset the
        connection and throw the answer away; so the sending side is shut after the
        answer and what still arrives is dropped unread, until the client closes or the
        header timer (still running: the head never completed) closes the connection.

        When the broken part is the body of a request whose head was whole, the app is
        answering it already: it is told the client left (its reads end, its writes are
        dropped, as for a client that went away), so that nothing it still sends meets a
        closed write side. Before, each such request logged uvicorn's traceback
        ("Cannot call write() after write_eof()"): 50 requests, 2,301 log lines (issue
        22, finding 3; ``tests/gateway/http/test_serving_flood.py``). If the app's answer has
        begun, no 400 can follow it: the connection is closed.
        """
        self._discarding = True
        self._arm_head_timer()
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            cycle.message_event.set()
            if cycle.response_started:
                self.transport.close()
                return
        self.transport.write(self._refusal)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        else:
            self.transport.close()

    def _arm_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.guard.header_seconds, self._head_late)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            if not self._discarding:  # a refused request was answered (and counted) already
                self.guard.metrics.client_connections_closed.labels("header_timeout").inc()
            self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        self._in_head = True
        self._head_received = 0
        self._began = True
        self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value))
        super().on_header(name, value)

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > MAX_HEAD_BYTES:
            # Raised inside the parser: uvicorn answers it as malformed (our JSON 400).
            raise ValueError("request head too large")

    def on_headers_complete(self) -> None:
        self._cancel_head_timer()
        self._in_head = False
        if self._peer is not None and self.guard.proxies.trusts(self._peer):
            self._attribute()
        super().on_headers_complete()

    def _attribute(self) -> None:
        """A trusted proxy's connection belongs to the client its request names."""
        guard = self.guard
        forwarded = tuple(v.decode("latin-1") for n, v in self.headers if n == b"x-forwarded-for")
        client = client_of(Head("", peer=self._peer, forwarded_for=forwarded), guard.proxies)
        if client is None or client == self._client:
            return
        if self._client is not None:
            guard.give_back(self._client)
            self._client = None
        if not guard.take(client):
            guard.metrics.client_connections_closed.labels("client_limit").inc()
            self._refusal = CLIENT_BUSY
            # Raised inside the parser: answered by send_400_response, with the 503.
            raise ValueError("client over its connections")
        self._client = client

    def send_400_response(self, msg: str) -> None:
        if not self._discarding:
            self._refuse_head()


def protocol_for(guard: ConnectionGuard) -> type[GuardedProtocol]:
    """A protocol class bound to one server's guard (uvicorn builds one per connection)."""
    return type("GatewayProtocol", (GuardedProtocol,), {"guard": guard})


class GatewayServer(uvicorn.Server):
    """uvicorn's server, draining on SIGTERM or SIGINT and then exiting 0."""

    def __init__(self, config: uvicorn.Config, drain: Drain, grace: float) -> None:
        super().__init__(config)
        self._drain = drain
        self._grace = grace
        self._loop: asyncio.AbstractEventLoop | None = None

    async def startup(self, sockets: Any = None) -> None:
        """Remember the loop the signal handler hands the drain to."""
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets=sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """The signal handler: start the drain and uvicorn's shutdown. The signal is not
        re-raised afterwards (uvicorn does that by default), so the exit status is 0; a
        second SIGINT (Ctrl-C twice) still forces the exit, a repeated SIGTERM does not."""
        if self.should_exit:
            if sig == signal.SIGINT:
                self.force_exit = True
            return
        self.should_exit = True
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._drain.begin, self._grace)
