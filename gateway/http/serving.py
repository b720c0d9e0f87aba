"""The HTTP server around the app: uvicorn's settings, the log and descriptor limits (I/O).

`uvicorn_config` uses uvicorn's own setting for every limit it has one for:

- **Idle kept-alive connections** (``client_idle``): ``timeout_keep_alive``.
- **Shutdown**: ``timeout_graceful_shutdown`` bounds a stuck clean-up after the drain.
- **WebSocket upgrades**: ``ws="none"``; the gateway serves no WebSocket, and uvicorn's
  hand-over of an upgraded connection to a WebSocket protocol never gave its connection
  back to the guard (each upgrade request held a slot of ``max_connections`` for good).
- **Forwarded headers**: ``proxy_headers=False``; who the client is comes from the
  gateway's own ``trusted_proxies`` rule (`gateway.http.browsers.client_of`: the last
  entry, from a trusted peer). uvicorn's default believed ``X-Forwarded-For`` from
  loopback and rewrote the peer, so behind a proxy on loopback the trusted peer was no
  longer seen (its ``X-Forwarded-Host`` was ignored and browsers were refused), and a
  local client could pose as any address.
- ``server_header=False``, ``access_log=False``, ``log_config=None`` (uvicorn's lines in
  the gateway's one format), ``lifespan="on"``, one worker.

What no setting gives is in `gateway.http.uvicorn_seam`, the one module on uvicorn's
internals (its docstring names each internal and why): the header timeout
(``client_header``), the connection cap (``limits.max_connections``) and connections per
client (``limits.connections_per_client``) answered 503 in the OpenAI shape with
``Retry-After`` and counted, never logged one by one, a 400 OpenAI error for malformed
HTTP and for a request head over 64 KiB (`gateway.http.client_limits`), and the graceful
drain on SIGTERM or SIGINT (`GatewayServer`: answers in flight get ``shutdown_grace``
seconds, then an error chunk; the process exits 0). The body timeout (``client_body``)
is the chat handler's, where the request is known (408 in the OpenAI shape).

Here too, on the standard library only:

- **Descriptor limit**: start-up raises the soft ``RLIMIT_NOFILE`` to the hard limit,
  and keeps ``max_connections`` under half of it (each chat also holds an engine
  connection); if the limit is still reached, `AcceptFloodFilter` lets asyncio's
  "accept() out of system resource" error through once per ten seconds with a count,
  instead of a traceback per attempt, and the same for the lines uvicorn logs per
  malformed or upgrade request.
- **The listener** (`bind_listener`), bound before the app starts, and what to tell an
  operator when it cannot be (`listen_problem`).
"""

from __future__ import annotations

import errno
import logging
import resource
import socket
import time
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from gateway.http.browsers import TrustedProxies
from gateway.http.client_limits import ConnectionGuard
from gateway.http.uvicorn_seam import protocol_for
from gateway.metrics import GatewayMetrics
from gateway.settings import Settings

#: File descriptors kept free for everything that is not a client connection.
_FD_RESERVE = 64
#: Seconds between two log lines of one flooding kind.
_FLOOD_INTERVAL = 10.0
#: Log messages a client can cause at will, let through once per interval.
FLOODING = (
    "out of system resource",
    "Too many open files",
    "Invalid HTTP request",
    "Unsupported upgrade request",
    "No supported WebSocket library",
)


class AcceptFloodFilter(logging.Filter):
    """Lets log records a client can cause at will (asyncio's "accept() out of system
    resource" at the descriptor limit, uvicorn's "Invalid HTTP request received." and its
    two lines per upgrade request) through once per period per kind, with how many were
    held back, and without a traceback."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        kind = next((k for k in FLOODING if k in message), None)
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
        # No WebSocket: an upgrade request is an HTTP request like any other (answered
        # by the app), and its connection stays the guard's.
        ws="none",
        # Who the client is: the gateway's trusted_proxies rule, not uvicorn's.
        proxy_headers=False,
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

    ``TCP_NODELAY`` is set on it, so every accepted connection has it whatever the event
    loop does (asyncio sets it only on sockets made with ``IPPROTO_TCP``, and
    ``create_server`` makes them with protocol 0): tokens leave as they are written.

    Raises:
        OSError: The address cannot be bound (in use, not this machine's, a privileged
            port).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, port), family=family)
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
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
