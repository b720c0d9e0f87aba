"""``python -m gateway`` (the ``tigress-gateway`` command): read the command line
(`gateway.cli`: ``--help``, ``--version``, ``keygen``), else check the settings, then serve
the gateway with uvicorn.

Exits 2 with a message naming a bad setting; 0 after a graceful drain (SIGTERM, SIGINT).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from prometheus_client import CollectorRegistry

from fetcher.logformat import configure_logging
from gateway import cli
from gateway.app import create_app
from gateway.http.serving import (
    AcceptFloodFilter,
    bind_listener,
    connection_cap,
    listen_problem,
    raise_fd_limit,
    uvicorn_config,
)
from gateway.http.uvicorn_seam import GatewayServer
from gateway.metrics import GatewayMetrics
from gateway.settings import SettingsError, load_settings, unknown_variables
from gateway.stream.drain import Drain


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line (`gateway.cli.main`); serving ends up in :func:`serve`."""
    cli.main(argv)


def serve() -> None:
    """Check the settings, then serve the gateway until SIGTERM or SIGINT.

    Raises:
        SystemExit: 2 for a bad setting (the message names it).
    """
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"gateway: bad setting: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    # One format for the gateway, uvicorn and the fetcher: a line on a terminal, journal
    # fields under systemd (uvicorn's loggers propagate: log_config=None).
    configure_logging("gateway", environ=os.environ)
    # httpx logs a line per engine request at INFO: noise on the first-token path.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
    # The MCP SDK logs every session's full id at INFO; an id is half of a session's
    # credentials, so only its warnings go to the log (gateway.mcp.http logs sessions).
    logging.getLogger("mcp").setLevel(logging.WARNING)
    flood = AcceptFloodFilter()
    for name in ("asyncio", "uvicorn.error"):
        logging.getLogger(name).addFilter(flood)
    log = logging.getLogger("gateway")
    unknown = unknown_variables(os.environ)
    if unknown:
        log.warning("unknown variables, not read: %s", ", ".join(unknown))
    try:
        # Bound before the app starts, so a port in use is said at once, naming the
        # setting, instead of after "Application startup complete".
        listener = bind_listener(settings.listen_host, settings.listen_port)
    except OSError as exc:
        print(f"gateway: {listen_problem(settings, exc)}", file=sys.stderr)
        raise SystemExit(2) from None
    if not settings.api_keys:
        log.warning(
            "no access keys configured: the API is open to anyone who can reach %s",
            settings.listen_host,
        )
    cap = connection_cap(settings.limits.max_connections, raise_fd_limit())
    if cap < settings.limits.max_connections:
        log.warning("max_connections lowered to %d by the file descriptor limit", cap)
    metrics = GatewayMetrics(CollectorRegistry())
    drain = Drain()
    app = create_app(settings, metrics=metrics, drain=drain)
    config = uvicorn_config(app, settings, metrics, max_connections=cap)
    GatewayServer(config, drain, settings.timeouts.shutdown_grace).run(sockets=[listener])


if __name__ == "__main__":
    main()
