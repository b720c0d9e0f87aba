"""Hostile servers: raw bytes over real TLS on loopback, against the real download.

Each server reads the request head and then writes what its script says, byte for byte,
whatever HTTP allows: endless bodies and headers, broken framing, smuggling-shaped
lengths, informational floods, trickles. The download must end each one within its
limits with the vocabulary word a person would expect, having held at most the body
limit, and never hang past the page time limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from ipaddress import ip_network

import pytest
import trustme

from fetcher.net.download import Downloader, Limits
from fetcher.net.policy import Policy
from fetcher.net.resolver import StaticResolver
from fetcher.outcome import Downloaded, Failed, HopRecord
from fetcher.reasons import Reason

Script = Callable[[asyncio.StreamWriter], Awaitable[None]]
LIMIT = 64 * 1024
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"


async def send(writer: asyncio.StreamWriter, data: bytes) -> None:
    """Write and let the client run: the server shares the test's event loop."""
    writer.write(data)
    await writer.drain()
    await asyncio.sleep(0)


async def endless_chunks(writer: asyncio.StreamWriter) -> None:
    await send(writer, HEAD + b"Transfer-Encoding: chunked\r\n\r\n")
    while True:
        await send(writer, b"4000\r\n" + b"a" * 0x4000 + b"\r\n")


async def endless_header_lines(writer: asyncio.StreamWriter) -> None:
    await send(writer, b"HTTP/1.1 200 OK\r\n")
    while True:
        await send(writer, b"X-Filler: " + b"b" * 1000 + b"\r\n")


async def endless_header_value(writer: asyncio.StreamWriter) -> None:
    await send(writer, b"HTTP/1.1 200 OK\r\nX-Filler: ")
    while True:
        await send(writer, b"b" * 65536)


async def endless_http10_body(writer: asyncio.StreamWriter) -> None:
    await send(writer, b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n")
    while True:
        await send(writer, b"a" * 65536)


async def endless_continue(writer: asyncio.StreamWriter) -> None:
    while True:
        await send(writer, b"HTTP/1.1 100 Continue\r\n\r\n")


async def trickled_head(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\n")
    while True:
        writer.write(b"X")
        await writer.drain()
        await asyncio.sleep(0.1)


async def trickled_body(writer: asyncio.StreamWriter) -> None:
    writer.write(HEAD + b"Content-Length: 1000\r\n\r\n")
    while True:
        writer.write(b"a")
        await writer.drain()
        await asyncio.sleep(0.1)


def _zeros_gzip() -> tuple[bytes, bytes]:
    """A gzip stream's start, and a block that may follow itself forever: each block
    inflates to 1 MiB of zeros from about a kilobyte."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\0" * (1 << 20)
    start = compressor.compress(zeros) + compressor.flush(zlib.Z_SYNC_FLUSH)
    again = compressor.compress(zeros) + compressor.flush(zlib.Z_SYNC_FLUSH)
    return start, again


GZIP_START, GZIP_AGAIN = _zeros_gzip()


async def gzip_bomb(writer: asyncio.StreamWriter) -> None:
    await send(writer, HEAD + b"Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n")
    await send(writer, b"%x\r\n%s\r\n" % (len(GZIP_START), GZIP_START))
    while True:
        await send(writer, b"%x\r\n%s\r\n" % (len(GZIP_AGAIN), GZIP_AGAIN))


async def switching_protocols(writer: asyncio.StreamWriter) -> None:
    await send(
        writer, b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n"
    )
    while True:
        await send(writer, b"a" * 65536)


def fixed(data: bytes, *, close: bool = False) -> Script:
    async def script(writer: asyncio.StreamWriter) -> None:
        writer.write(data)
        await writer.drain()
        if close:
            writer.close()

    return script


MANY_HEADERS = b"".join(b"X-%d: y\r\n" % n for n in range(4000))

HOSTILE: list[tuple[str, Script, Reason | None]] = [
    ("endless-chunked-body", endless_chunks, Reason.TOO_LARGE),
    ("endless-http10-body", endless_http10_body, Reason.TOO_LARGE),
    ("gzip-bomb", gzip_bomb, Reason.TOO_LARGE),
    ("endless-header-lines", endless_header_lines, Reason.CONNECT),
    ("endless-header-value", endless_header_value, Reason.CONNECT),
    ("endless-100-continue", endless_continue, Reason.TIMEOUT),
    ("trickled-head", trickled_head, Reason.TIMEOUT),
    ("trickled-body", trickled_body, Reason.TIMEOUT),
    ("switching-protocols", switching_protocols, Reason.CONNECT),
    (
        "invalid-status-line",
        fixed(b"HTTP/1.1 abc OK\r\nContent-Length: 2\r\n\r\nhi"),
        Reason.CONNECT,
    ),
    ("http09-no-status-line", fixed(b"<html>hi</html>", close=True), Reason.CONNECT),
    ("status-999", fixed(b"HTTP/1.1 999 X\r\nContent-Length: 0\r\n\r\n"), Reason.HTTP_STATUS),
    (
        "conflicting-content-lengths",
        fixed(HEAD + b"Content-Length: 2\r\nContent-Length: 5\r\n\r\nhello"),
        Reason.CONNECT,
    ),
    ("negative-content-length", fixed(HEAD + b"Content-Length: -1\r\n\r\nhi"), Reason.CONNECT),
    (
        "huge-content-length",
        fixed(HEAD + b"Content-Length: 99999999999999999999\r\n\r\nhi", close=True),
        Reason.TOO_LARGE,
    ),
    (
        "content-length-past-any-number",
        fixed(HEAD + b"Content-Length: " + b"9" * 40 + b"\r\n\r\nhi", close=True),
        Reason.CONNECT,
    ),
    (
        "declared-over-the-limit",
        fixed(HEAD + b"Content-Length: %d\r\n\r\n" % (LIMIT + 1)),
        Reason.TOO_LARGE,
    ),
    (
        "transfer-coding-other-than-chunked",
        fixed(HEAD + b"Transfer-Encoding: gzip, chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"),
        Reason.CONNECT,
    ),
    (
        "chunk-size-overflow",
        fixed(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"f" * 40 + b"\r\n"),
        Reason.CONNECT,
    ),
    ("nul-in-a-header", fixed(HEAD + b"X-A: a\x00b\r\nContent-Length: 0\r\n\r\n"), Reason.CONNECT),
    ("closed-mid-body", fixed(HEAD + b"Content-Length: 100\r\n\r\nhi", close=True), Reason.CONNECT),
    (
        "no-content-type",
        fixed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"),
        Reason.CONTENT_TYPE,
    ),
    (
        "two-content-types-in-one-line",
        fixed(b"HTTP/1.1 200 OK\r\nContent-Type: text/html, image/svg+xml\r\n\r\n", close=True),
        Reason.CONTENT_TYPE,
    ),
    (
        "folded-content-type",
        fixed(
            b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n text/html\r\nContent-Length: 0\r\n\r\n"
        ),
        Reason.CONTENT_TYPE,
    ),
    ("many-small-headers", fixed(HEAD + MANY_HEADERS + b"Content-Length: 2\r\n\r\nhi"), None),
    ("http10-without-length", fixed(HEAD.replace(b"1.1", b"1.0") + b"\r\nhi", close=True), None),
    # Transfer-Encoding wins over Content-Length (RFC 9112 6.3): the chunked body is read.
    (
        "content-length-and-chunked",
        fixed(
            HEAD + b"Content-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"
        ),
        None,
    ),
]


@contextlib.asynccontextmanager
async def raw_server(context: ssl.SSLContext, script: Script) -> AsyncIterator[int]:
    """A TLS server on 127.0.0.1 that answers every request with ``script``."""
    handlers: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await reader.readuntil(b"\r\n\r\n")
            await script(writer)
            await asyncio.sleep(60)
        writer.transport.abort()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()


def server_context(
    ca: trustme.CA,
    *names: str,
    not_before: datetime.datetime | None = None,
    not_after: datetime.datetime | None = None,
) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(*names, not_before=not_before, not_after=not_after).configure_cert(context)
    return context


async def fetch(
    port: int, client_ssl_context: ssl.SSLContext, hops: list[HopRecord]
) -> Downloaded | Failed:
    policy = Policy(ports=frozenset({443, port}), exempt=(ip_network("127.0.0.1/32"),))
    async with Downloader(
        policy=policy,
        resolver=StaticResolver({"origin.test": ["127.0.0.1"]}),
        ssl_context=client_ssl_context,
        limits=Limits(page_timeout=1.5, max_bytes=LIMIT),
        observer=hops.append,
    ) as downloader:
        return await downloader.download(
            f"https://origin.test:{port}/", allowed_hosts=["origin.test"]
        )


@pytest.mark.parametrize(("name", "script", "reason"), HOSTILE, ids=[n for n, _, _ in HOSTILE])
async def test_a_hostile_server_ends_within_the_limits_with_its_word(
    ca: trustme.CA,
    client_ssl_context: ssl.SSLContext,
    name: str,
    script: Script,
    reason: Reason | None,
) -> None:
    hops: list[HopRecord] = []
    async with raw_server(server_context(ca, "origin.test"), script) as port:
        outcome = await fetch(port, client_ssl_context, hops)
    if reason is None:
        assert isinstance(outcome, Downloaded), outcome
        assert outcome.body == b"hi"
    else:
        assert isinstance(outcome, Failed), outcome
        assert outcome.reason is reason, outcome
    assert len(hops) == 1
    assert hops[0].bytes <= LIMIT + 1  # one byte past the limit is how it is seen


NOW = datetime.datetime.now(datetime.UTC)
CERTIFICATES = [
    pytest.param(("origin.test",), {"not_after": NOW - datetime.timedelta(days=1)}, id="expired"),
    pytest.param(("origin.test",), {"not_before": NOW + datetime.timedelta(days=1)}, id="not-yet"),
    pytest.param(("other.test",), {}, id="another-name"),
    pytest.param(("*.test",), {}, id="wildcard-over-a-public-suffix-like-label"),
]


@pytest.mark.parametrize(("names", "dates"), CERTIFICATES)
async def test_a_certificate_that_does_not_prove_the_name_is_tls(
    ca: trustme.CA,
    client_ssl_context: ssl.SSLContext,
    names: tuple[str, ...],
    dates: dict[str, datetime.datetime],
) -> None:
    hops: list[HopRecord] = []
    async with raw_server(server_context(ca, *names, **dates), fixed(HEAD + b"\r\n")) as port:
        outcome = await fetch(port, client_ssl_context, hops)
    assert isinstance(outcome, Failed), outcome
    assert outcome.reason is Reason.TLS


async def test_a_self_signed_certificate_is_tls(client_ssl_context: ssl.SSLContext) -> None:
    hops: list[HopRecord] = []
    own = trustme.CA()  # a CA nobody trusts: its certificate proves nothing
    async with raw_server(server_context(own, "origin.test"), fixed(HEAD + b"\r\n")) as port:
        outcome = await fetch(port, client_ssl_context, hops)
    assert isinstance(outcome, Failed), outcome
    assert outcome.reason is Reason.TLS
