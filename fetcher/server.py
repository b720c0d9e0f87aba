"""The fetcher process: composition root, gRPC server lifecycle, signals (``fetcher serve``).

:func:`serve` builds the real parts once (settings, metrics registry, fetch log, render
worker pool, PDF reader, downloader, crawler) and hands them to :class:`FetcherServer`,
which owns the ``grpc.aio`` server, the standard health service and the service's
lifecycle:

1. start: listen on every address (a Unix socket by default, mode 0660 in a folder of
   mode 0750 whatever the umask), health ``SERVING``, tell systemd ``READY=1``
   (``fetcher.systemd``), serve ``/metrics`` on the listener systemd passed in (if any);
2. while running: the service's own health name (``tigress.fetcher.v1.FetcherService``)
   says ``NOT_SERVING`` while the render pool is saturated (every worker busy and as many
   pages again waiting) and ``SERVING`` again once it is not; the overall name ``""``
   stays ``SERVING`` (the process is up and takes reads, which wait their turn);
3. SIGTERM or SIGINT: health ``NOT_SERVING`` (load balancers and the gateway see it), new
   reads get ``UNAVAILABLE``, reads in flight get ``shutdown_grace_seconds`` to finish,
   then the server stops (cancelling what is left), the render workers and the lookups
   still running are stopped, and the process exits 0.

The command line (``python -m fetcher serve``) uses :func:`add_serve_arguments` and
:func:`run_serve`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import stat
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import grpc
import prometheus_client
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry

from fetcher.crawl import WORKER_PRELOAD, WORKER_WARM_UP, Crawler
from fetcher.errors import ConfigError
from fetcher.isolation.workers import WorkerPool
from fetcher.journal import FetchLog, choose_sink
from fetcher.logformat import configure_logging
from fetcher.metrics import Metrics, MetricsEndpoint, bind_metrics_listener
from fetcher.net.download import Downloader, Limits
from fetcher.net.transport import default_ssl_context
from fetcher.outcome import CacheRecord, HopRecord, TextRecord
from fetcher.pagecache import PageCache
from fetcher.pdf.reader import PdfReader
from fetcher.service import FetcherServicer, Reader
from fetcher.settings import (
    SETTING_NAMES,
    Listen,
    Settings,
    changes,
    flag_help,
    load_settings,
    unknown_variables,
)
from fetcher.systemd import sd_notify, systemd_listeners
from fetcher.v1 import fetcher_pb2, fetcher_pb2_grpc

logger = logging.getLogger("fetcher")

SERVICE_NAME: str = fetcher_pb2.DESCRIPTOR.services_by_name["FetcherService"].full_name
#: Seconds between two looks at the render pool's saturation (for health).
SATURATION_CHECK_SECONDS = 0.5
SOCKET_MODE = 0o660
#: PDF bodies held in memory per PDF worker: one being read, one downloaded or waiting.
PDFS_HELD_PER_WORKER = 2
SOCKET_FOLDER_MODE = 0o750


def grpc_options(settings: Settings) -> list[tuple[str, int]]:
    """Server channel options, each chosen on purpose.

    Message size: a report is at most 24,000 characters of text plus metadata, far below
    the default 4 MiB; both directions are capped at ``max_message_bytes`` (1 MiB) so a
    runaway reply fails loudly instead of being shipped. Keepalive: accept the client's
    pings every 20 s or more, even between calls (TCP replicas behind NAT or firewalls).
    Connection age: channels are re-established every 5 minutes so new replicas get calls;
    the grace covers the longest read. ``so_reuseport`` is off so two fetchers cannot
    silently share one TCP port.
    """
    return [
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.http2.min_ping_interval_without_data_ms", 20_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.max_connection_age_ms", 300_000),
        ("grpc.max_connection_age_grace_ms", int(settings.read_deadline_seconds * 1000) + 5_000),
        ("grpc.so_reuseport", 0),
    ]


def _prepare_unix_path(path: Path) -> None:
    """Makes the socket's folder (mode 0750) and refuses a folder others may write to, or
    anything but a socket at the path.

    # Security
    Only the fetcher's user and group (the gateway) may reach the socket: the folder a
    new socket goes into is made 0750 whatever the umask, and a folder others can write
    to is refused unless it is sticky (anyone could replace the socket with their own and
    read what the gateway asks). Proved by ``tests/fetcher/test_service_settings.py``
    (``test_socket_and_folder_modes_hold_under_umask_000``,
    ``test_a_folder_others_can_write_to_is_refused``).
    """
    folder = path.parent
    if not folder.exists():
        folder.mkdir(mode=SOCKET_FOLDER_MODE, parents=True)
        os.chmod(folder, SOCKET_FOLDER_MODE)
    mode = folder.stat().st_mode
    # A sticky folder (/tmp) lets others add files but not replace ours.
    if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
        raise ConfigError(
            f"bad value for listen: the folder {str(folder)!r} is writable by others; "
            "make it 0750 (systemd: RuntimeDirectoryMode=0750)"
        )
    with contextlib.suppress(FileNotFoundError):
        mode = os.lstat(path).st_mode
        if not stat.S_ISSOCK(mode):
            raise ConfigError(f"bad value for listen: {str(path)!r} exists and is not a socket")
        if _socket_answers(path):
            # grpc would unlink it and take the address over from the running fetcher.
            raise ConfigError(
                f"bad value for listen: another process serves on {str(path)!r} (another "
                "fetcher?); stop it or choose another --listen / TIGRESS_FETCHER_LISTEN"
            )
        path.unlink()  # a dead socket a killed fetcher left behind


def _socket_answers(path: Path) -> bool:
    """Whether a process accepts connections on the Unix socket at ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def _server_credentials(settings: Settings) -> grpc.ServerCredentials:
    """Mutual TLS for TCP listeners: clients must show a certificate the given CA signed.

    # Security
    The fetcher reaches the web for whoever can call it; over TCP that must be only the
    gateway, so the TLS handshake requires a client certificate (``require_client_auth``).
    Settings refuse plain TCP beyond loopback. Proved by
    ``tests/fetcher/test_service_tls.py`` and ``test_service_settings.py``
    (``plain-tcp-beyond-loopback``).
    """
    assert settings.tls_cert_file is not None
    assert settings.tls_key_file is not None
    assert settings.tls_client_ca_file is not None
    return grpc.ssl_server_credentials(
        [(settings.tls_key_file.read_bytes(), settings.tls_cert_file.read_bytes())],
        root_certificates=settings.tls_client_ca_file.read_bytes(),
        require_client_auth=True,
    )


class FetcherServer:
    """The running gRPC server with health checking and graceful shutdown."""

    def __init__(
        self,
        settings: Settings,
        *,
        reader: Reader,
        metrics: Metrics,
        pool: WorkerPool | None = None,
    ) -> None:
        """Prepares the server; nothing listens until :meth:`start`.

        Args:
            settings: Listen addresses, limits and the shutdown grace period.
            reader: What reads an address (the crawl in production).
            metrics: The metrics the servicer updates.
            pool: The render worker pool whose saturation health reports.
        """
        self.settings = settings
        self.metrics = metrics
        self.pool = pool
        self._watch: asyncio.Task[None] | None = None
        self.health = health.aio.HealthServicer()
        self.servicer = FetcherServicer(
            reader=reader,
            metrics=metrics,
            max_concurrent_reads=settings.max_concurrent_reads,
            read_deadline=settings.read_deadline_seconds,
            deadline_margin=settings.deadline_margin_seconds,
            max_message_bytes=settings.max_message_bytes,
        )
        self.ports: dict[str, int] = {}
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        """Listens on every address and reports ``SERVING``.

        Raises:
            ConfigError: An address cannot be used (the message names it).
        """
        server = grpc.aio.server(options=grpc_options(self.settings))
        fetcher_pb2_grpc.add_FetcherServiceServicer_to_server(self.servicer, server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        for listen in self.settings.listen:
            self.ports[listen.target] = self._add_port(server, listen)
        await server.start()
        self._server = server
        for name in ("", SERVICE_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        if self.pool is not None:
            self._watch = asyncio.create_task(self._watch_saturation(self.pool))

    async def _watch_saturation(self, pool: WorkerPool) -> None:
        """Keeps the service's health name ``NOT_SERVING`` while the render pool is saturated."""
        saturated = False
        while True:
            await asyncio.sleep(SATURATION_CHECK_SECONDS)
            if pool.saturated != saturated:
                saturated = pool.saturated
                status = health_pb2.HealthCheckResponse
                await self.health.set(
                    SERVICE_NAME, status.NOT_SERVING if saturated else status.SERVING
                )
                logger.warning(
                    "render pool %s: %d busy, %d waiting",
                    "saturated" if saturated else "no longer saturated",
                    pool.busy,
                    pool.waiting,
                )

    def _add_port(self, server: grpc.aio.Server, listen: Listen) -> int:
        try:
            if listen.unix_path is not None:
                _prepare_unix_path(listen.unix_path)
                # grpc binds here; the umask makes the socket 0660 from its first moment.
                with _umask(0o777 & ~SOCKET_MODE):
                    port = server.add_insecure_port(listen.target)
                os.chmod(listen.unix_path, SOCKET_MODE)
                return port
            if self.settings.tls:
                return server.add_secure_port(listen.target, _server_credentials(self.settings))
            return server.add_insecure_port(listen.target)
        except RuntimeError as exc:  # grpcio's way of saying "bind failed"
            raise ConfigError(f"bad value {listen.target!r} for listen: {exc}") from exc

    async def stop(self, grace: float | None = None) -> None:
        """Shuts down gracefully: NOT_SERVING, refuse new reads, let reads finish, stop.

        Args:
            grace: Seconds reads in flight may still take (``shutdown_grace_seconds``
                when ``None``); reads still running after it are cancelled.
        """
        grace = self.settings.shutdown_grace_seconds if grace is None else grace
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        await self.health.enter_graceful_shutdown()
        self.servicer.drain()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        if not await self.servicer.wait_idle(grace):
            logger.warning(
                "shutdown: %d reads still running after the grace period", self.servicer.in_flight
            )
        if self._server is not None:
            # Streams may still be sending their last message; health watches never end.
            await self._server.stop(grace=max(0.0, min(1.0, deadline - loop.time())))
            self._server = None
        for listen in self.settings.listen:
            if listen.unix_path is not None:
                with contextlib.suppress(FileNotFoundError):
                    if stat.S_ISSOCK(os.lstat(listen.unix_path).st_mode):
                        listen.unix_path.unlink()


def fetch_observer(
    fetch_log: FetchLog, metrics: Metrics
) -> Callable[[HopRecord | TextRecord | CacheRecord], None]:
    """The downloader's and the crawl's observer: each hop, each page given to a reader
    and each page had from the cache goes to the fetch log and the metrics."""

    def observe(record: HopRecord | TextRecord | CacheRecord) -> None:
        if isinstance(record, HopRecord):
            fetch_log.hop(record)
            metrics.observe_hop(record)
        elif isinstance(record, CacheRecord):
            fetch_log.cache(record)
            metrics.observe_cache(record)
        else:
            fetch_log.text(record)
            metrics.observe_text(record)

    return observe


async def serve(settings: Settings, *, environ: Mapping[str, str]) -> int:
    """Runs the fetcher until SIGTERM or SIGINT, then shuts down gracefully.

    Args:
        settings: The checked settings.
        environ: The process environment (systemd's variables, the journal).

    Returns:
        The exit status: 0 after a graceful shutdown.
    """
    # *_created series double every counter and histogram for no use here (process-wide).
    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
    metrics = Metrics(CollectorRegistry(auto_describe=True))
    fetch_log = FetchLog(choose_sink(settings.log_sink, environ=environ))
    pool = WorkerPool(
        workers=settings.render_workers,
        limits=settings.page_limits,
        preload=WORKER_PRELOAD,
        warm_up=WORKER_WARM_UP,
    )
    metrics.watch_pool(pool)
    pdfs = PdfReader(workers=settings.pdf_workers, limits=settings.pdf_limits)
    metrics.watch_pdfs(pdfs)
    observer = fetch_observer(fetch_log, metrics)
    extra_ca = settings.extra_ca_file
    downloader = Downloader(
        observer=observer,
        lists=settings.lists,
        ssl_context=default_ssl_context(extra_cadata=extra_ca.pem if extra_ca else None),
        limits=Limits(
            pdf_max_bytes=settings.pdf_max_bytes, pdfs_held=PDFS_HELD_PER_WORKER * pdfs.workers
        ),
    )
    cache = PageCache(max_bytes=settings.cache_bytes, seconds=settings.cache_seconds)
    metrics.watch_cache(cache)
    crawler = Crawler(
        downloader=downloader,
        pool=pool,
        pdfs=pdfs,
        concurrency=settings.crawl_concurrency,
        observer=observer,
        cache=cache,
        cache_observer=observer,
    )
    server = FetcherServer(settings, reader=crawler, metrics=metrics, pool=pool)
    listeners = systemd_listeners(environ)
    if settings.metrics_listen:
        listeners.append(bind_metrics_listener(settings.metrics_listen))
    endpoint = MetricsEndpoint(metrics.registry, listeners) if listeners else None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await server.start()
        if endpoint is not None:
            await endpoint.start()
        logger.info("%s", changes(settings))
        unknown = unknown_variables(environ)
        if unknown:
            logger.warning("unknown variables, not read: %s", ", ".join(unknown))
        logger.info(
            "serving on %s; TLS trust: %s",
            ", ".join(server.ports),
            f"system store + extra_ca_file {extra_ca}" if extra_ca else "system store",
        )
        sd_notify("READY=1\nSTATUS=serving", environ)
        await stop.wait()
        sd_notify("STOPPING=1\nSTATUS=draining reads", environ)
        logger.info(
            "stopping: waiting up to %.1fs for reads in flight", settings.shutdown_grace_seconds
        )
        await server.stop()
    finally:
        if endpoint is not None:
            await endpoint.stop()
        await downloader.aclose()
        await pool.aclose()
        await pdfs.aclose()
    logger.info("stopped")
    return 0


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the ``serve`` subcommand's flags: ``--config`` and one flag per setting
    (``--<name>``, overriding the setting of that name)."""
    parser.add_argument("--config", metavar="PATH", help="TOML file with a [fetcher] table")
    for name in SETTING_NAMES:
        text, metavar, choices = flag_help(name)
        if choices:
            parser.add_argument(f"--{name.replace('_', '-')}", choices=choices, help=text)
        else:
            parser.add_argument(f"--{name.replace('_', '-')}", metavar=metavar, help=text)


def run_serve(args: argparse.Namespace, *, environ: Mapping[str, str] | None = None) -> int:
    """Runs ``fetcher serve`` with parsed arguments; returns the exit status.

    A bad setting stops start-up with exit status 2 and a message naming it.
    """
    environ = os.environ if environ is None else environ
    configure_logging("fetcher", environ=environ)
    overrides = {name: getattr(args, name, None) for name in SETTING_NAMES}
    try:
        settings = load_settings(
            environ=environ,
            config_file=_path(getattr(args, "config", None)),
            overrides=overrides,
        )
        return asyncio.run(serve(settings, environ=environ))
    except ConfigError as exc:
        print(f"fetcher: {exc}", file=sys.stderr)
        return 2


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None
