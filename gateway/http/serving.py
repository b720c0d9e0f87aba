"""The HTTP server around the app: uvicorn, with the client limits it lacks (I/O).

uvicorn closes an idle kept-alive connection (``timeout_keep_alive``: our
``client_idle``), but has no limit on how long a request's head may take to arrive, no
cap on connections that closes the excess without a log line per request, and answers
malformed HTTP with a plain-text 400. `GuardedProtocol` adds these to uvicorn's
httptools protocol (its documented ``http=`` class setting):

- **Header timeout** (``client_header``): from the connection's start, and from the
  first byte of each later request, the whole head must arrive in time; else the
  connection is closed (slow-header clients hold nothing for long).
- **Body timeout** (``client_body``): enforced by the chat handler while it reads the
  body (408 in the OpenAI shape), where the request is known.
- **Maximum connections** (``limits.max_connections``): a connection past the limit gets
  a 503 OpenAI error with ``Retry-After`` and is closed at once, counted in a metric,
  never logged one by one.
- **Connections per client** (``limits.connections_per_client``): the same, for one
  client past its share, so that one client holding silent connections cannot take them
  all. The client is the peer address, judged when the connection opens; a connection
  from a trusted proxy (``trusted_proxies``) belongs to the client its ``X-Forwarded-For``
  names, judged as each request head completes (`gateway.http.browsers.client_of`).
- **Malformed HTTP** gets a 400 OpenAI error body, and so does a request head (URL and
  header lines) over 64 KiB, also one whose header line never ends (httptools holds an
  unfinished line in memory until its end); uvicorn's warning per malformed request goes
  through the same rate limit as the accept errors below.
- **Descriptor limit**: start-up raises the soft ``RLIMIT_NOFILE`` to the hard limit,
  and keeps ``max_connections`` under half of it (each chat also holds an engine
  connection); if the limit is still reached, `AcceptFloodFilter` lets asyncio's
  "accept() out of system resource" error through once per ten seconds with a count,
  instead of a traceback per attempt.

`GatewayServer` is uvicorn's server with a graceful drain: SIGTERM or SIGINT starts
`gateway.stream.drain.Drain` (answers in flight get ``shutdown_grace`` seconds, then an error
chunk) and uvicorn's own shutdown (listeners closed, idle connections closed); the
process then exits 0 instead of re-raising the signal.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import resource
import signal
import socket
import time
from types import FrameType
from typing import Any, ClassVar

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.http.browsers import Head, TrustedProxies, client_of
from gateway.metrics import GatewayMetrics
from gateway.settings import Settings
from gateway.stream.drain import Drain

#: File descriptors kept free for everything that is not a client connection.
_FD_RESERVE = 64
#: Seconds between two log lines of one flooding kind.
_FLOOD_INTERVAL = 10.0
#: The most a request head (target and header lines) may take.
MAX_HEAD_BYTES = 64 * 1024
#: Log messages a client can cause at will, let through once per interval.
_FLOODING = ("out of system resource", "Too many open files", "Invalid HTTP request")


def _error_response(status: int, reason: bytes, message: str, code: str, extra: bytes) -> bytes:
    body = json.dumps(
        {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    ).encode()
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
        b"connection: close\r\n%s\r\n" % (status, reason, len(body), extra)
    ) + body


_BUSY = _error_response(
    503,
    b"Service Unavailable",
    "The gateway has as many connections open as it may; try again shortly.",
    "overloaded",
    b"retry-after: 1\r\n",
)
_CLIENT_BUSY = _error_response(
    503,
    b"Service Unavailable",
    "This client has as many connections open to the gateway as one client may; close "
    "some or try again shortly.",
    "overloaded",
    b"retry-after: 1\r\n",
)
_MALFORMED = _error_response(400, b"Bad Request", "Invalid HTTP request.", "invalid_request", b"")


class ConnectionGuard:
    """The connection count and limits shared by every connection of one server."""

    def __init__(
        self,
        *,
        max_connections: int,
        header_seconds: float,
        metrics: GatewayMetrics,
        per_client: int = 256,
        proxies: TrustedProxies | None = None,
    ):
        self.max_connections = max_connections
        self.header_seconds = header_seconds
        self.metrics = metrics
        self.per_client = per_client
        self.proxies = proxies if proxies is not None else TrustedProxies()
        self.open = 0
        #: Open connections of each client (connections not yet known to a client, from
        #: a trusted proxy before their first head, are not in it).
        self.clients: dict[str, int] = {}

    def take(self, client: str) -> bool:
        """Count one more connection of ``client``; False (nothing counted) past its share.

        # Security
        Rule: one client (`gateway.http.browsers.client_of`) has at most
        ``connections_per_client`` connections open; one more is answered 503 and closed.
        Threat: one client holding the whole ``max_connections`` with silent connections
        (1,024 by default), locking every other client out until the header timeout.
        Callers may rely on: the count of a client never passing the share. Proved by
        ``tests/gateway/http/test_fair_share.py``.
        """
        count = self.clients.get(client, 0)
        if count >= self.per_client:
            return False
        self.clients[client] = count + 1
        return True

    def give_back(self, client: str) -> None:
        """One connection of ``client`` closed, or moved to another client."""
        count = self.clients.get(client, 0) - 1
        if count > 0:
            self.clients[client] = count
        else:
            self.clients.pop(client, None)


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
    ``tests/gateway/http/test_serving.py``, ``tests/gateway/http/test_fair_share.py``, and
    ``tests/gateway/http/test_serving.py``, and
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
        self._refusal = _MALFORMED

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        guard = self.guard
        if guard.open >= guard.max_connections:
            self._refused = True
            guard.metrics.client_connections_closed.labels("limit").inc()
            transport.write(_BUSY)
            transport.close()
            return
        peer = transport.get_extra_info("peername")
        self._peer = peer[0] if isinstance(peer, tuple) and peer else None
        if self._peer is not None and not guard.proxies.trusts(self._peer):
            if not guard.take(self._peer):
                self._refused = True
                guard.metrics.client_connections_closed.labels("client_limit").inc()
                transport.write(_CLIENT_BUSY)
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
            self._refusal = _CLIENT_BUSY
            # Raised inside the parser: answered by send_400_response, with the 503.
            raise ValueError("client over its connections")
        self._client = client

    def send_400_response(self, msg: str) -> None:
        if not self._discarding:
            self._refuse_head()


def protocol_for(guard: ConnectionGuard) -> type[GuardedProtocol]:
    """A protocol class bound to one server's guard (uvicorn builds one per connection)."""
    return type("GatewayProtocol", (GuardedProtocol,), {"guard": guard})


class AcceptFloodFilter(logging.Filter):
    """Lets log records a client can cause at will (asyncio's "accept() out of system
    resource" at the descriptor limit, uvicorn's "Invalid HTTP request received.")
    through once per period per kind, with how many were held back, and without a
    traceback."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        kind = next((k for k in _FLOODING if k in message), None)
        if kind is None:
            return True
        now = self._clock()
        if now - self._last.get(kind, float("-inf")) < _FLOOD_INTERVAL:
            self._held[kind] = self._held.get(kind, 0) + 1
            return False
        self._last[kind] = now
        record.msg = f"{message} ({self._held.pop(kind, 0)} more held back)"
        record.args = ()
        record.exc_info = None
        record.exc_text = None
        return True


def raise_fd_limit() -> int:
    """Raise the soft descriptor limit to the hard one; return the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def connection_cap(configured: int, fd_limit: int) -> int:
    """``max_connections`` kept under half the descriptors left (each chat also holds an
    engine connection)."""
    return max(1, min(configured, (fd_limit - _FD_RESERVE) // 2))


def uvicorn_config(
    app: ASGIApp,
    settings: Settings,
    metrics: GatewayMetrics,
    *,
    max_connections: int | None = None,
    log_level: str = "info",
) -> uvicorn.Config:
    """The uvicorn settings of the gateway (production and tests alike).

    Args:
        app: The application.
        settings: Checked settings (timeouts, limits).
        metrics: Where the connection guard counts what it closes.
        max_connections: The cap, when it must differ from the settings (the descriptor
            limit may lower it).
        log_level: uvicorn's own log level.
    """
    timeouts = settings.timeouts
    guard = ConnectionGuard(
        max_connections=max_connections or settings.limits.max_connections,
        header_seconds=timeouts.client_header,
        metrics=metrics,
        per_client=settings.limits.connections_per_client,
        proxies=TrustedProxies.of(settings.trusted_proxies),
    )
    return uvicorn.Config(
        app,
        host=settings.listen_host,
        port=settings.listen_port,
        http=protocol_for(guard),
        lifespan="on",
        workers=1,
        server_header=False,
        # An idle kept-alive connection is closed after this (uvicorn's own timer).
        timeout_keep_alive=max(1, round(timeouts.client_idle)),
        # The drain ends every answer by then; this only bounds a stuck clean-up.
        timeout_graceful_shutdown=round(timeouts.shutdown_grace) + 10,
        log_level=log_level,
        # uvicorn's loggers propagate to the process's one handler (fetcher.logformat),
        # so its lines take the same form as the gateway's.
        log_config=None,
        # No access log: a line per request costs a write on the first-token path, and
        # client addresses are not needed (the metrics count requests).
        access_log=False,
    )


def bind_listener(host: str, port: int) -> socket.socket:
    """The gateway's listening socket, bound (``SO_REUSEADDR``, as uvicorn does).

    Raises:
        OSError: The address cannot be bound (in use, not this machine's, a privileged
            port).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, port), family=family)
    listener.set_inheritable(True)
    return listener


def listen_problem(settings: Settings, error: OSError) -> str:
    """What to tell an operator whose listen address cannot be bound, naming the setting."""
    host = f"[{settings.listen_host}]" if ":" in settings.listen_host else settings.listen_host
    address = f"{host}:{settings.listen_port}"
    if error.errno == errno.EADDRINUSE:
        why = f"{address} is already in use (another Tigress gateway, or another server?)"
    else:
        why = f"cannot listen on {address} ({error.strerror or error})"
    return f"{why}; set TIGRESS_LISTEN (or listen in the TIGRESS_CONFIG file) to another address"


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
