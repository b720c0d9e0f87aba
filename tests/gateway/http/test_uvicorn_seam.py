"""What `gateway.http.uvicorn_seam` relies on inside uvicorn (its docstring names each part),
checked on the uvicorn installed: each test fails naming what a uvicorn release changed,
so the pin in pyproject.toml follows what was tested (try a new minor by running this
file and ``tests/gateway/http`` on it)."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import signal
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import uvicorn
from prometheus_client import CollectorRegistry
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gateway.http.client_limits import MAX_HEAD_BYTES, ConnectionGuard
from gateway.http.serving import FLOODING
from gateway.http.uvicorn_seam import GatewayServer, GuardedProtocol, protocol_for
from gateway.metrics import GatewayMetrics
from gateway.stream.drain import Drain
from tests.gateway.conftest import until
from tests.gateway.servers import serve

#: HttpToolsProtocol's methods the seam overrides, with the parameters it calls them with.
PROTOCOL_OVERRIDES = {
    "__init__": ("self", "config", "server_state", "app_state", "_loop"),
    "connection_made": ("self", "transport"),
    "connection_lost": ("self", "exc"),
    "data_received": ("self", "data"),
    "on_message_begin": ("self",),
    "on_url": ("self", "url"),
    "on_header": ("self", "name", "value"),
    "on_headers_complete": ("self",),
    "send_400_response": ("self", "msg"),
}
#: uvicorn.Server's methods GatewayServer overrides.
SERVER_OVERRIDES = {
    "__init__": ("self", "config"),
    "startup": ("self", "sockets"),
    "handle_exit": ("self", "sig", "frame"),
}


def uvicorns(theirs: type, name: str) -> Any:
    """uvicorn's own method: sse_starlette (which the MCP SDK imports) replaces
    ``Server.handle_exit`` at import with a wrapper, keeping uvicorn's in
    ``AppStatus.original_handler`` (GatewayServer's override stands in front of both)."""
    method = getattr(theirs, name, None)
    wrapped = theirs is uvicorn.Server and name == "handle_exit"
    if wrapped and method is not None and method.__module__ == "sse_starlette.sse":
        from sse_starlette.sse import AppStatus

        method = AppStatus.original_handler
    return method


def overridden(ours: type, theirs: type) -> set[str]:
    return {n for n, v in vars(ours).items() if inspect.isfunction(v) and hasattr(theirs, n)}


@pytest.mark.parametrize(
    ("theirs", "name", "parameters"),
    [(HttpToolsProtocol, n, p) for n, p in PROTOCOL_OVERRIDES.items()]
    + [(uvicorn.Server, n, p) for n, p in SERVER_OVERRIDES.items()],
    ids=[f"protocol.{n}" for n in PROTOCOL_OVERRIDES] + [f"server.{n}" for n in SERVER_OVERRIDES],
)
def test_each_method_the_seam_overrides_is_uvicorns_with_the_same_parameters(
    theirs: type, name: str, parameters: tuple[str, ...]
) -> None:
    method = uvicorns(theirs, name)
    assert inspect.isfunction(method), (
        f"uvicorn {uvicorn.__version__}: {theirs.__name__}.{name} is gone; the seam's "
        "override of it is never called (gateway/http/uvicorn_seam.py)"
    )
    found = tuple(inspect.signature(method).parameters)
    assert found == parameters, (
        f"uvicorn {uvicorn.__version__}: {theirs.__name__}.{name}{found}, the seam "
        f"expects {parameters} (gateway/http/uvicorn_seam.py)"
    )


@pytest.mark.parametrize(
    ("ours", "theirs", "expected"),
    [
        (GuardedProtocol, HttpToolsProtocol, set(PROTOCOL_OVERRIDES)),
        (GatewayServer, uvicorn.Server, set(SERVER_OVERRIDES)),
    ],
    ids=["protocol", "server"],
)
def test_the_seam_overrides_no_other_uvicorn_method(
    ours: type, theirs: type, expected: set[str]
) -> None:
    # A uvicorn method named like one of the seam's helpers would be replaced unseen.
    assert overridden(ours, theirs) == expected, (
        f"uvicorn {uvicorn.__version__}: {theirs.__name__} now also has "
        f"{sorted(overridden(ours, theirs) - expected)}, which the seam replaces; or the "
        "tables here miss an override"
    )


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers every request 200 with its body's length, after reading the body."""
    if scope["type"] != "http":
        return
    size = 0
    more = True
    while more:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False) and message["type"] == "http.request"
    body = str(size).encode()
    headers = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def a_guard(max_connections: int = 8) -> ConnectionGuard:
    return ConnectionGuard(
        max_connections=max_connections,
        header_seconds=30.0,
        metrics=GatewayMetrics(CollectorRegistry()),
    )


@asynccontextmanager
async def seam_server(
    guard: ConnectionGuard, **settings: Any
) -> AsyncIterator[tuple[int, list[GuardedProtocol]]]:
    """A uvicorn on 127.0.0.1 with the seam's protocol; yields its port and every protocol
    instance uvicorn built."""
    built: list[GuardedProtocol] = []
    base = protocol_for(guard)

    def recording_init(self: GuardedProtocol, *args: Any, **kwargs: Any) -> None:
        base.__init__(self, *args, **kwargs)
        built.append(self)

    recorded = type("Recorded", (base,), {"__init__": recording_init})
    config = uvicorn.Config(
        app, http=recorded, ws="none", log_level="warning", log_config=None, lifespan="off"
    )
    async with serve(app, config) as url:
        yield int(url.rsplit(":", 1)[1]), built


async def exchange(port: int, sent: bytes) -> bytes:
    """Send ``sent`` on a new connection; everything until the server closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(sent)
    try:
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


class Lines(logging.Handler):
    """The lines logged to uvicorn's "uvicorn.error" (whether it propagates or not)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def uvicorn_lines() -> Iterator[list[str]]:
    handler = Lines()
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(handler)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)


GET = b"GET /x HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n"


async def test_the_state_the_seam_reads_is_where_uvicorn_keeps_it() -> None:
    guard = a_guard()
    async with seam_server(guard) as (port, built):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /x HTTP/1.1\r\nHost: gw\r\nX-Seen: Yes\r\nContent-Length: 2\r\n\r\nab")
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n2"), 10)
        assert answer.startswith(b"HTTP/1.1 200")
        (protocol,) = built
        why = f"uvicorn {uvicorn.__version__}: HttpToolsProtocol"
        assert protocol.loop is asyncio.get_running_loop(), f"{why}.loop is not the loop"
        assert isinstance(protocol.transport, asyncio.Transport), f"{why}.transport unset"
        assert protocol.transport.get_extra_info("peername") is not None
        assert (b"x-seen", b"Yes") in protocol.headers, f"{why}.headers: {protocol.headers!r}"
        cycle = protocol.cycle
        assert cycle is not None, f"{why}.cycle is not the request's cycle"
        state = {
            "response_started": cycle.response_started,
            "response_complete": cycle.response_complete,
            "disconnected": cycle.disconnected,
            "message_event": type(cycle.message_event),
        }
        assert state == {
            "response_started": True,
            "response_complete": True,
            "disconnected": False,
            "message_event": asyncio.Event,
        }, f"uvicorn {uvicorn.__version__}: RequestResponseCycle's state is now {state}"
        assert guard.open == 1
        writer.close()
        # connection_lost is still uvicorn's call when the client leaves.
        await until(lambda: guard.open == 0)
        assert guard.clients == {}


@pytest.mark.parametrize(
    ("sent", "why"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", "a parser error"),
        (
            b"GET /x HTTP/1.1\r\nHost: gw\r\nX-Pad: " + b"a" * (MAX_HEAD_BYTES + 1) + b"\r\n\r\n",
            "an exception raised in on_header",
        ),
        (b"GET /" + b"a" * (MAX_HEAD_BYTES + 1) + b" HTTP/1.1\r\n\r\n", "one raised in on_url"),
    ],
    ids=["malformed", "header-too-large", "target-too-large"],
)
async def test_uvicorn_answers_a_parser_failure_with_send_400_response(
    sent: bytes, why: str, uvicorn_lines: list[str]
) -> None:
    guard = a_guard()
    async with seam_server(guard) as (port, _):
        answer = await exchange(port, sent)
        await until(lambda: guard.open == 0)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), (
        f"uvicorn {uvicorn.__version__}: {why} no longer reaches send_400_response: {answer[:80]!r}"
    )
    assert json.loads(body)["error"]["code"] == "invalid_request"
    assert any("Invalid HTTP request" in line for line in uvicorn_lines), (
        f"uvicorn {uvicorn.__version__} logs {uvicorn_lines} for it; AcceptFloodFilter limits "
        "'Invalid HTTP request' (gateway/http/serving.py FLOODING)"
    )


async def test_an_upgrade_request_without_websockets_is_http_and_its_lines_are_the_flood_filters(
    uvicorn_lines: list[str],
) -> None:
    upgrade = (
        b"GET /x HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    guard = a_guard()
    async with seam_server(guard) as (port, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(upgrade)
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        writer.close()
        await until(lambda: guard.open == 0)
    assert answer.startswith(b"HTTP/1.1 200"), answer
    unlimited = [line for line in uvicorn_lines if not any(kind in line for kind in FLOODING)]
    assert unlimited == [], (
        f"uvicorn {uvicorn.__version__} logs {unlimited} per upgrade request, which "
        "AcceptFloodFilter does not limit (gateway/http/serving.py FLOODING)"
    )


async def test_a_connection_past_the_cap_never_reaches_uvicorn() -> None:
    guard = a_guard(max_connections=1)
    async with seam_server(guard) as (port, built):
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /x HTTP/1.1\r\nHost: gw\r\n")  # half a head: held open
        await until(lambda: guard.open == 1)
        refused = await exchange(port, GET)
        assert refused.startswith(b"HTTP/1.1 503")
        assert len(built) == 2
        assert [p in p.server_state.connections for p in built] == [True, False], (
            f"uvicorn {uvicorn.__version__}: server_state.connections is filled elsewhere "
            "than HttpToolsProtocol.connection_made"
        )
        writer.close()
        await until(lambda: guard.open == 0)


def test_uvicorn_installs_the_servers_handle_exit_and_re_raises_no_signal_it_did_not_see() -> None:
    # capture_signals installs handlers only from the main thread (pytest's).
    assert threading.current_thread() is threading.main_thread()
    received: list[int] = []
    recorder: Callable[[int, Any], None] = lambda sig, _frame: received.append(sig)  # noqa: E731
    previous = signal.signal(signal.SIGTERM, recorder)
    try:
        server = GatewayServer(uvicorn.Config(app), Drain(), 1.0)
        assert (server.should_exit, server.force_exit) == (False, False)
        with server.capture_signals():
            assert signal.getsignal(signal.SIGTERM) == server.handle_exit, (
                f"uvicorn {uvicorn.__version__}: Server.capture_signals no longer installs "
                "handle_exit; SIGTERM would not start the drain"
            )
            server.handle_exit(signal.SIGTERM, None)
        assert server.should_exit
        assert signal.getsignal(signal.SIGTERM) == recorder
        # uvicorn re-raises the signals its own handle_exit recorded; the seam's records none.
        assert received == [], (
            f"uvicorn {uvicorn.__version__} re-raised SIGTERM after the seam handled it: "
            "the gateway would not exit 0 after its drain"
        )
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_the_protocol_setting_takes_the_seams_class() -> None:
    cls = protocol_for(a_guard())
    config = uvicorn.Config(app, http=cls)
    config.load()
    assert config.http_protocol_class is cls
