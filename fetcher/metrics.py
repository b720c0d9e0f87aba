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
``IPAddressDeny=``. :class:`MetricsEndpoint` serves prometheus_client's own ASGI app on
such a socket with uvicorn, or, in development, on a loopback port of its own.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import socket
from collections.abc import Iterator

import prometheus_client
import uvicorn
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from fetcher.errors import ConfigError
from fetcher.isolation.workers import WorkerPool
from fetcher.outcome import READERS, HopRecord, TextRecord
from fetcher.pdf.reader import PdfReader
from fetcher.reasons import Reason
from fetcher.report import Report
from fetcher.settings import parse_listen

PREFIX = "tigress_fetcher"
HOP_OUTCOMES = ("ok", "redirect", "refused", "failed")
NO_REASON = "none"
RPC_METHODS = ("Read", "ReadStream")
STOP_REASONS = ("cpu", "memory", "wall", "crashed")

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
        self.internal_errors = Counter(
            f"{PREFIX}_internal_errors_total",
            "Pages that failed through a bug of the fetcher (reason internal; logged).",
            registry=registry,
        )
        self.texts = Counter(
            f"{PREFIX}_texts_total",
            "Downloaded pages given to a reader (html, pdf), by the reason no text came of "
            "it (none when text was made).",
            ["reader", "reason"],
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
        for reader in READERS:
            self.texts.labels(reader=reader, reason=NO_REASON)

    def watch_pool(self, pool: WorkerPool) -> None:
        """Exports the render worker pool's state, read at each scrape."""
        self._watch_workers(
            pool,
            "render",
            busy="Render workers turning a page into text now.",
            waiting="Pages waiting for a render worker (saturation when it stays above zero).",
            workers="Render worker processes in the pool.",
        )
        self.registry.register(_StopsCollector(pool))

    def watch_pdfs(self, pdfs: PdfReader) -> None:
        """Exports the PDF reader's state, read at each scrape."""
        self._watch_workers(
            pdfs,
            "pdf",
            busy="PDF worker processes reading a PDF now.",
            waiting="PDFs waiting for a PDF worker.",
            workers="PDF worker processes that may run at once.",
        )

    def _watch_workers(
        self, source: WorkerPool | PdfReader, kind: str, *, busy: str, waiting: str, workers: str
    ) -> None:
        """``{kind}_workers_busy`` and ``{kind}_waiting`` read from ``source`` at each
        scrape, and its fixed ``{kind}_workers``; the arguments are their help texts."""
        Gauge(f"{PREFIX}_{kind}_workers_busy", busy, registry=self.registry).set_function(
            lambda: source.busy
        )
        Gauge(f"{PREFIX}_{kind}_waiting", waiting, registry=self.registry).set_function(
            lambda: source.waiting
        )
        Gauge(f"{PREFIX}_{kind}_workers", workers, registry=self.registry).set(source.workers)

    def observe_text(self, text: TextRecord) -> None:
        """Counts one downloaded page given to a reader (the crawl's observer calls this)."""
        reason = str(Reason(text.reason)) if text.reason is not None else NO_REASON
        self.texts.labels(reader=text.reader, reason=reason).inc()

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
        """Counts the pages of one completed read, and its pages lost to bugs."""
        self.pages_per_read.observe(len(report.pages))
        self.internal_errors.inc(report.internal_errors)

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


#: The most connections the endpoint holds at once; one more gets 503 (uvicorn's limit).
MAX_CONNECTIONS = 16
#: The most bytes of a request head before it is refused (h11's limit, via uvicorn).
MAX_REQUEST_HEAD = 8192


class MetricsEndpoint:
    """``GET /metrics`` served by prometheus_client's ASGI app on uvicorn.

    The listeners are opened elsewhere: by systemd (``fetcher-metrics.socket``), or by
    :func:`bind_metrics_listener` in development. While it serves, uvicorn holds SIGTERM
    and SIGINT; on one it stops, puts the previous handlers back and raises the signal
    again (uvicorn's documented behaviour), so the fetcher's own shutdown follows.
    """

    def __init__(self, registry: CollectorRegistry, listeners: list[socket.socket]) -> None:
        """Prepares the server; nothing is served until :meth:`start`.

        # Security
        Only the exposition of ``registry`` is served (prometheus_client's app answers
        every path with it, ``HEAD`` without a body); no lifespan, no access log, no
        server header. A request head over 8 KiB is refused and at most 16 connections
        are held at once, so a client cannot grow the fetcher's memory; the listener is
        reachable from loopback only (the socket unit's ``IPAddressAllow=localhost``).
        Proved by ``tests/fetcher/test_metrics.py``
        (``test_metrics_endpoint_refuses_an_oversized_request``).
        """
        config = uvicorn.Config(
            prometheus_client.make_asgi_app(registry),
            lifespan="off",
            access_log=False,
            log_level="warning",
            server_header=False,
            limit_concurrency=MAX_CONNECTIONS,
            # h11 explicitly: the head-size cap below is h11's setting, and uvicorn would
            # pick httptools (installed for the gateway), which has no such cap.
            http="h11",
            h11_max_incomplete_event_size=MAX_REQUEST_HEAD,
        )
        self._server = uvicorn.Server(config)
        self._listeners = listeners
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Starts answering on the listeners."""
        self._task = asyncio.create_task(self._server.serve(sockets=self._listeners))
        # uvicorn says it has started through a flag, not an event.
        while not self._server.started and not self._task.done():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        if self._task.done():
            self._task.result()  # start-up failed: say why

    async def stop(self) -> None:
        """Stops answering and closes the connections."""
        if self._task is None:
            return
        self._server.should_exit = True
        await self._task
        self._task = None


def bind_metrics_listener(target: str) -> socket.socket:
    """A listening socket on a loopback ``HOST:PORT`` (development's ``metrics_listen``).

    Raises:
        ConfigError: The address cannot be bound (the message names it).
    """
    listen = parse_listen(target)
    assert listen.host is not None
    port = int(listen.target.rpartition(":")[2])
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((listen.host, port))
    except OSError as exc:
        listener.close()
        raise ConfigError(f"bad value {target!r} for metrics_listen: {exc.strerror}") from exc
    listener.listen(16)
    return listener


class _StopsCollector(Collector):
    """``tigress_fetcher_render_stops_total{why}``: tasks the pool stopped, by limit."""

    def __init__(self, pool: WorkerPool) -> None:
        self._pool = pool

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            f"{PREFIX}_render_stops",
            "Page renders stopped at a limit (cpu, memory, wall) or by a worker crash.",
            labels=["why"],
        )
        for why in STOP_REASONS:
            family.add_metric([why], self._pool.stopped[why])
        yield family
