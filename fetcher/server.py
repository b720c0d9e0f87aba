"""The fetcher process: composition root, gRPC server lifecycle, signals (``fetcher serve``).

:func:`serve` builds the real parts once (settings, metrics registry, fetch log,
downloader, crawl) and hands them to :class:`FetcherServer`, which owns the ``grpc.aio``
server, the standard health service and the service's lifecycle:

1. start: listen on every address (a Unix socket by default), health ``SERVING``, tell
   systemd ``READY=1``, serve ``/metrics`` on the listener systemd passed in (if any);
2. SIGTERM or SIGINT: health ``NOT_SERVING`` (load balancers and the gateway see it), new
   reads get ``UNAVAILABLE``, reads in flight get ``shutdown_grace_seconds`` to finish,
   then the server stops (cancelling what is left) and the process exits 0.

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
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

import grpc
import prometheus_client
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry

from fetcher.crawl import crawl
from fetcher.download import Downloader
from fetcher.errors import ConfigError
from fetcher.journal import FetchLog, choose_sink
from fetcher.metrics import Metrics, serve_metrics
from fetcher.outcome import HopRecord
from fetcher.report import Report
from fetcher.service import FetcherServicer, OnPage, Reader
from fetcher.settings import Listen, Settings, describe, load_settings, parse_listen
from fetcher.transport import default_ssl_context
from fetcher.v1 import fetcher_pb2, fetcher_pb2_grpc

logger = logging.getLogger("fetcher")

SERVICE_NAME: str = fetcher_pb2.DESCRIPTOR.services_by_name["FetcherService"].full_name
#: systemd passes inherited sockets from this descriptor on (sd_listen_fds(3)).
LISTEN_FDS_START = 3


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
    """Makes the socket's folder (development) and refuses to replace anything but a socket."""
    path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        mode = os.lstat(path).st_mode
        if not stat.S_ISSOCK(mode):
            raise ConfigError(f"bad value for listen: {str(path)!r} exists and is not a socket")


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

    def __init__(self, settings: Settings, *, reader: Reader, metrics: Metrics) -> None:
        """Prepares the server; nothing listens until :meth:`start`.

        Args:
            settings: Listen addresses, limits and the shutdown grace period.
            reader: What reads an address (the crawl in production).
            metrics: The metrics the servicer updates.
        """
        self.settings = settings
        self.metrics = metrics
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

    def _add_port(self, server: grpc.aio.Server, listen: Listen) -> int:
        try:
            if listen.unix_path is not None:
                _prepare_unix_path(listen.unix_path)
                return server.add_insecure_port(listen.target)
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


def systemd_listeners(
    environ: Mapping[str, str], *, first_fd: int = LISTEN_FDS_START
) -> list[socket.socket]:
    """The listening sockets systemd passed to this process (``LISTEN_FDS``), if any.

    # Security
    Only when ``LISTEN_PID`` names this process: a child that inherited the variables
    must not adopt descriptors meant for its parent. Adopted descriptors are made
    non-inheritable. Proved by
    ``tests/fetcher/test_metrics.py::test_systemd_listeners_adopt_passed_sockets_only_for_this_process``.
    """
    if environ.get("LISTEN_PID") != str(os.getpid()):
        return []
    try:
        count = int(environ.get("LISTEN_FDS", "0"))
    except ValueError:
        return []
    listeners = []
    for fd in range(first_fd, first_fd + count):
        os.set_inheritable(fd, False)
        listeners.append(socket.socket(fileno=fd))
    return listeners


def _bind_metrics(target: str) -> socket.socket:
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


def sd_notify(message: str, environ: Mapping[str, str]) -> None:
    """Tells systemd about the service's state (``Type=notify``); a no-op elsewhere."""
    address = environ.get("NOTIFY_SOCKET", "")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with (
        contextlib.suppress(OSError),
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as notify,
    ):
        notify.sendto(message.encode(), address)


def crawl_reader(downloader: Downloader, *, concurrency: int) -> Reader:
    """Adapts ``fetcher.crawl.crawl`` with the process's downloader to :class:`Reader`."""

    async def read(
        url: str,
        *,
        allowed_hosts: Collection[str],
        page_limit: int,
        deadline: float,
        request_id: str,
        on_page: OnPage | None = None,
    ) -> Report:
        return await crawl(
            url,
            allowed_hosts=allowed_hosts,
            downloader=downloader,
            page_limit=page_limit,
            deadline=deadline,
            concurrency=concurrency,
            request_id=request_id,
            on_page=on_page,
        )

    return read


def hop_observer(fetch_log: FetchLog, metrics: Metrics) -> Callable[[HopRecord], None]:
    """The downloader's observer: one fetch log record and the fetch metrics per hop."""

    def observe(hop: HopRecord) -> None:
        fetch_log.hop(hop)
        metrics.observe_hop(hop)

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
    extra_ca = settings.extra_ca_file
    downloader = Downloader(
        observer=hop_observer(fetch_log, metrics),
        ssl_context=default_ssl_context(extra_cadata=extra_ca.pem if extra_ca else None),
    )
    server = FetcherServer(
        settings,
        reader=crawl_reader(downloader, concurrency=settings.crawl_concurrency),
        metrics=metrics,
    )
    listeners = systemd_listeners(environ)
    if settings.metrics_listen:
        listeners.append(_bind_metrics(settings.metrics_listen))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    metrics_servers = []
    try:
        await server.start()
        for listener in listeners:
            metrics_servers.append(await serve_metrics(metrics.registry, listener))
        for line in describe(settings):
            logger.info("setting %s", line)
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
        for metrics_server in metrics_servers:
            metrics_server.close()
        await downloader.aclose()
    logger.info("stopped")
    return 0


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the ``serve`` subcommand's flags (each overrides the setting of its name)."""
    parser.add_argument(
        "--listen",
        metavar="unix:PATH|HOST:PORT",
        help="where to serve gRPC, comma-separated (default: unix:run/fetcher.sock)",
    )
    parser.add_argument("--config", metavar="PATH", help="TOML file with a [fetcher] table")
    parser.add_argument(
        "--metrics-listen", metavar="HOST:PORT", help="a /metrics port of its own (development)"
    )
    parser.add_argument("--max-concurrent-reads", metavar="N", help="reads handled at once")
    parser.add_argument("--log-sink", choices=("auto", "journal", "json"), help="fetch log sink")


def run_serve(args: argparse.Namespace, *, environ: Mapping[str, str] | None = None) -> int:
    """Runs ``fetcher serve`` with parsed arguments; returns the exit status.

    A bad setting stops start-up with exit status 2 and a message naming it.
    """
    environ = os.environ if environ is None else environ
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    overrides = {
        name: getattr(args, name, None)
        for name in ("listen", "metrics_listen", "max_concurrent_reads", "log_sink")
    }
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


def main(argv: Sequence[str] | None = None) -> int:
    """``fetcher serve`` as a function: parses ``argv`` (flags only) and runs."""
    parser = argparse.ArgumentParser(prog="fetcher serve", description="Run the fetcher service.")
    add_serve_arguments(parser)
    return run_serve(parser.parse_args(argv))
