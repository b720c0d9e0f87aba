"""The client connection limits of the gateway's server (issue 8, finding 6), over raw
sockets against the real uvicorn configuration (`gateway.http.serving.uvicorn_config`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry

from gateway.http.client_limits import MAX_HEAD_BYTES
from gateway.http.serving import AcceptFloodFilter, bind_listener, connection_cap
from gateway.settings import Limits
from testkit.engine import FakeEngine
from tests.gateway.conftest import KEY, TEST_TIMEOUTS, GatewayFactory, make_settings

SHORT = replace(TEST_TIMEOUTS, client_header=0.3, client_body=0.3, client_idle=1.0)


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (10 s at most)."""
    return await asyncio.wait_for(reader.read(), 10)


def closed(registry: CollectorRegistry, reason: str) -> float:
    labels = {"reason": reason}
    value = registry.get_sample_value("tigress_gateway_client_connections_closed_total", labels)
    return value or 0.0


@pytest.mark.parametrize(
    "sent",
    [b"", b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"],
    ids=["nothing", "half-a-head"],
)
async def test_a_request_head_that_does_not_arrive_in_time_is_closed(
    engine: FakeEngine, gateway_at: GatewayFactory, sent: bytes
) -> None:
    registry = CollectorRegistry()
    async with gateway_at(settings=make_settings(engine, timeouts=SHORT), registry=registry) as url:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url))
        writer.write(sent)
        assert await closed_by_server(reader) == b""
        writer.close()
    assert closed(registry, "header_timeout") == 1


async def test_a_body_that_does_not_arrive_in_time_is_408(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
        f"Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
        "Content-Length: 100\r\n\r\n"
    ).encode()
    async with gateway_at(settings=make_settings(engine, timeouts=SHORT)) as url:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url))
        writer.write(head + b'{"model"')
        status = await asyncio.wait_for(reader.readline(), 10)
        rest = await asyncio.wait_for(reader.read(4096), 10)
        writer.close()
    assert status.startswith(b"HTTP/1.1 408")
    assert json.loads(rest.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "request_timeout"


async def test_an_idle_kept_alive_connection_is_closed(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    async with gateway_at(settings=make_settings(engine, timeouts=SHORT)) as url:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url))
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
        answer = await closed_by_server(reader)
        writer.close()
    assert answer.startswith(b"HTTP/1.1 200")


async def test_connections_past_the_limit_get_503_and_are_closed(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    settings = make_settings(engine, limits=Limits(max_connections=2))
    registry = CollectorRegistry()
    async with gateway_at(settings=settings, registry=registry) as url:
        held = [await asyncio.open_connection("127.0.0.1", port_of(url)) for _ in range(2)]
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url))
        answer = await closed_by_server(reader)
        writer.close()
        for _, kept in held:
            kept.close()
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 503")
    assert b"retry-after: 1" in head
    assert json.loads(body)["error"]["code"] == "overloaded"
    assert closed(registry, "limit") == 1


async def test_malformed_http_gets_an_openai_shaped_400(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    async with gateway_at() as url:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url))
        writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        answer = await closed_by_server(reader)
        writer.close()
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 400")
    assert b"application/json" in head
    assert json.loads(body)["error"]["code"] == "invalid_request"


@pytest.mark.parametrize(
    ("extra", "status"),
    [(MAX_HEAD_BYTES + 1, b"HTTP/1.1 400"), (MAX_HEAD_BYTES // 2, b"HTTP/1.1 200")],
    ids=["over", "under"],
)
async def test_a_request_head_over_the_limit_is_400(
    engine: FakeEngine, gateway_at: GatewayFactory, extra: int, status: bytes
) -> None:
    async with gateway_at() as url:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url))
        writer.write(
            b"GET /healthz HTTP/1.1\r\nHost: gw\r\nConnection: close\r\nX-Pad: "
            + b"a" * extra
            + b"\r\n\r\n"
        )
        answer = await closed_by_server(reader)
        writer.close()
    assert answer.startswith(status)


@pytest.mark.parametrize("where", ["target", "header"])
async def test_a_header_line_that_never_ends_is_400_at_the_cap(
    engine: FakeEngine, gateway_at: GatewayFactory, where: str
) -> None:
    # The header timeout is far off: the 400 comes from the size, and nothing waits for
    # the line's end (httptools would hold all of it in memory until then).
    slow = replace(TEST_TIMEOUTS, client_header=60.0)
    start = b"GET /healthz?" if where == "target" else b"GET /healthz HTTP/1.1\r\nX-Pad: "
    async with gateway_at(settings=make_settings(engine, timeouts=slow)) as url:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url))
        writer.write(start)
        sent = 0
        with contextlib.suppress(ConnectionError):
            while not reader.at_eof() and sent < 64 * MAX_HEAD_BYTES:
                writer.write(b"a" * 16384)
                await writer.drain()
                sent += 16384
                await asyncio.sleep(0)  # let the answer in
        answer = await closed_by_server(reader)
        writer.close()
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 400")
    assert json.loads(body)["error"]["code"] == "invalid_request"


def test_the_connection_cap_stays_under_the_descriptor_limit() -> None:
    assert connection_cap(1024, 20000) == 1024
    assert connection_cap(1024, 1024) == (1024 - 64) // 2
    assert connection_cap(1024, 10) == 1


def test_accept_errors_at_the_descriptor_limit_are_logged_once_per_period() -> None:
    now = [0.0]
    flood = AcceptFloodFilter(clock=lambda: now[0])
    logger = logging.getLogger("test.flood")

    def record() -> logging.LogRecord:
        try:
            raise OSError(24, "Too many open files")
        except OSError:
            import sys

            exc_info = sys.exc_info()
        return logger.makeRecord(
            "asyncio",
            logging.ERROR,
            __file__,
            1,
            "socket.accept() out of system resource",
            (),
            exc_info,
        )

    kept = [flood.filter(record()) for _ in range(1000)]
    now[0] = 11.0
    later = record()
    assert kept.count(True) == 1
    assert flood.filter(later)
    assert "999 more held back" in later.getMessage()
    assert later.exc_info is None
    # uvicorn's line per malformed request is another kind, limited on its own.
    invalid = [
        flood.filter(
            logger.makeRecord(
                "u", logging.WARNING, "f", 1, "Invalid HTTP request received.", (), None
            )
        )
        for _ in range(50)
    ]
    assert invalid.count(True) == 1
    other = logger.makeRecord("asyncio", logging.ERROR, __file__, 1, "something else", (), None)
    assert flood.filter(other)


UPGRADE = (
    b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


async def test_websocket_upgrade_requests_give_their_connections_back(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    # uvicorn's default (ws="auto") handed an upgraded connection to a WebSocket protocol,
    # and the guard never saw it close: max_connections upgrades locked everyone out.
    settings = make_settings(engine, limits=Limits(max_connections=2))
    async with gateway_at(settings=settings) as url:
        for _ in range(3):
            reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url))
            writer.write(UPGRADE)
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            writer.close()
            await writer.wait_closed()
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url))
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        answer = await closed_by_server(reader)
        writer.close()
    assert answer.startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("forwarded_for", [b"", b"X-Forwarded-For: 203.0.113.5\r\n"])
async def test_a_trusted_proxy_on_loopback_is_seen_whatever_it_forwards(
    engine: FakeEngine, gateway_at: GatewayFactory, forwarded_for: bytes
) -> None:
    # uvicorn's proxy_headers (on by default, trusting loopback) replaced the peer with
    # the forwarded address: the proxy was no longer trusted and its X-Forwarded-Host
    # ignored, so a browser behind nginx on the same machine was refused 403.
    settings = replace(make_settings(engine), trusted_proxies=("127.0.0.1",))
    async with gateway_at(settings=settings) as url:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(url))
        writer.write(
            b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: https://chat.example\r\n"
            b"X-Forwarded-Host: chat.example\r\nAuthorization: Bearer %s\r\n%s"
            b"Connection: close\r\n\r\n" % (port_of(url), KEY.encode(), forwarded_for)
        )
        answer = await closed_by_server(reader)
        writer.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


def test_accepted_connections_send_at_once() -> None:
    # Nagle's algorithm would hold a token's small write until the previous one is acked.
    listener = bind_listener("127.0.0.1", 0)
    with listener, socket.create_connection(listener.getsockname()[:2]):
        accepted, _ = listener.accept()
        with accepted:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
