"""Prometheus metrics of the fetcher, and the small HTTP endpoint that serves them.

Names follow Prometheus' rules: one prefix (``tigress_fetcher_``), base units
(seconds, bytes), ``_total`` on counters, and labels whose values come from closed sets
(outcome words, the reason vocabulary, gRPC method and status names). No address, host,
IP or request id is ever a label value: those belong to the fetch log.

All metrics live in a :class:`~prometheus_client.CollectorRegistry` that the composition
root creates and passes in; nothing touches the library's global registry.

Exposition in production: the fetcher's sandbox blocks loopback, ingress included, so a
port opened by the fetcher itself cannot be scraped. systemd creates the listener instead
(``deploy/systemd/fetcher-metrics.socket``, 127.0.0.1:9464) and passes it in as a file
descriptor; connections accepted on it are not filtered by the service's
``IPAddressDeny=``. :func:`serve_metrics` answers ``GET /metrics`` on such a socket, or,
in development, on a loopback port of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import socket

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder

from fetcher.outcome import HopRecord
from fetcher.reasons import Reason
from fetcher.report import Report

PREFIX = "tigress_fetcher"
HOP_OUTCOMES = ("ok", "redirect", "refused", "failed")
NO_REASON = "none"
RPC_METHODS = ("Read", "ReadStream")

DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0)
BYTES_BUCKETS = (1024, 4096, 16384, 65536, 262144, 1048576, 2097152)
PAGES_BUCKETS = (0, 1, 2, 3, 4, 5, 6)
CALL_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _version() -> str:
    try:
        return importlib.metadata.version("tigress")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class Metrics:
    """The fetcher's metrics, registered in one registry.

    Attributes:
        registry: Where every metric below is registered.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        """Creates and registers the metrics in ``registry``."""
        self.registry = registry
        self.fetches = Counter(
            f"{PREFIX}_fetches_total",
            "Hops of page downloads by outcome (ok, redirect, refused, failed) and reason.",
            ["outcome", "reason"],
            registry=registry,
        )
        self.fetch_duration = Histogram(
            f"{PREFIX}_fetch_duration_seconds",
            "Time one hop of a download took, by outcome.",
            ["outcome"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.response_bytes = Histogram(
            f"{PREFIX}_response_bytes",
            "Decoded body size of pages read (hops with outcome ok).",
            buckets=BYTES_BUCKETS,
            registry=registry,
        )
        self.redirects = Counter(
            f"{PREFIX}_redirects_total",
            "Redirects followed.",
            registry=registry,
        )
        self.pages_per_read = Histogram(
            f"{PREFIX}_pages_per_read",
            "Pages read (not failed) by one completed read.",
            buckets=PAGES_BUCKETS,
            registry=registry,
        )
        self.reads_in_flight = Gauge(
            f"{PREFIX}_reads_in_flight",
            "Reads being handled now.",
            registry=registry,
        )
        self.grpc_handled = Counter(
            f"{PREFIX}_grpc_handled_total",
            "gRPC calls of the fetcher service completed, by method and status code.",
            ["method", "code"],
            registry=registry,
        )
        self.grpc_handling = Histogram(
            f"{PREFIX}_grpc_handling_seconds",
            "Time from a gRPC call's start to its end, by method.",
            ["method"],
            buckets=CALL_BUCKETS,
            registry=registry,
        )
        self.build_info = Gauge(
            f"{PREFIX}_build_info",
            "Always 1; the version label names the running build.",
            ["version"],
            registry=registry,
        )
        self.build_info.labels(version=_version()).set(1)
        # Series that exist from the start, so rate() has a zero to start from.
        for outcome in ("ok", "redirect"):
            self.fetches.labels(outcome=outcome, reason=NO_REASON)
            self.fetch_duration.labels(outcome=outcome)
        for method in RPC_METHODS:
            self.grpc_handled.labels(method=method, code="OK")
            self.grpc_handling.labels(method=method)

    def observe_hop(self, hop: HopRecord) -> None:
        """Counts one hop of a download (the downloader's observer calls this)."""
        outcome = hop.outcome
        reason = str(Reason(hop.reason)) if hop.reason is not None else NO_REASON
        self.fetches.labels(outcome=outcome, reason=reason).inc()
        self.fetch_duration.labels(outcome=outcome).observe(hop.elapsed_ms / 1000)
        if outcome == "ok":
            self.response_bytes.observe(hop.bytes)
        elif outcome == "redirect":
            self.redirects.inc()

    def observe_report(self, report: Report) -> None:
        """Counts the pages of one completed read."""
        self.pages_per_read.observe(len(report.pages))

    def observe_call(self, method: str, code: str, seconds: float) -> None:
        """Counts one finished gRPC call.

        Args:
            method: ``Read`` or ``ReadStream``.
            code: The gRPC status name (``OK``, ``RESOURCE_EXHAUSTED``...).
            seconds: How long the call took.
        """
        self.grpc_handled.labels(method=method, code=code).inc()
        self.grpc_handling.labels(method=method).observe(seconds)


def exposition(registry: CollectorRegistry, accept: str = "") -> tuple[bytes, str]:
    """Renders the registry in the format the scraper asked for.

    Args:
        registry: The metrics.
        accept: The request's ``Accept`` header (OpenMetrics when it asks for it).

    Returns:
        The body and its content type.
    """
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type


MAX_REQUEST_HEAD = 8192
REQUEST_TIMEOUT = 5.0


async def _answer(
    registry: CollectorRegistry, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Answers one HTTP/1.x request and closes the connection.

    # Security
    The request head is read within 5 seconds and 8 KiB, or the connection is dropped;
    only ``GET``/``HEAD /metrics`` is answered, with nothing but the exposition. A slow
    or oversized client cannot hold the fetcher's loop. Proved by
    ``tests/fetcher/test_metrics.py::test_metrics_endpoint_drops_a_client_that_never_sends_a_request``.
    """
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT):
            head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, *_ = [*lines[0].split(" "), "", ""]
        accept = ""
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "accept":
                accept = value.strip()
        if method not in ("GET", "HEAD"):
            status, content_type, body = "405 Method Not Allowed", "text/plain", b"GET only\n"
        elif target.partition("?")[0] != "/metrics":
            status, content_type, body = "404 Not Found", "text/plain", b"see /metrics\n"
        else:
            body, content_type = exposition(registry, accept)
            status = "200 OK"
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1")
        )
        if method != "HEAD":
            writer.write(body)
        await writer.drain()
    except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def serve_metrics(registry: CollectorRegistry, listener: socket.socket) -> asyncio.Server:
    """Serves ``GET /metrics`` on a listening socket that was opened elsewhere.

    Args:
        registry: The metrics to expose.
        listener: A listening TCP socket (systemd's, or one bound for development).

    Returns:
        The running server; close it to stop.
    """

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _answer(registry, reader, writer)

    return await asyncio.start_server(handle, sock=listener, limit=MAX_REQUEST_HEAD)
