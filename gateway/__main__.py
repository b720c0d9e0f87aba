"""``python -m gateway``: check the settings, then serve the gateway with uvicorn."""

from __future__ import annotations

import logging
import sys

import uvicorn

from gateway.app import create_app
from gateway.fetcher_health import FetcherHealth
from gateway.settings import SettingsError, load_settings


def main() -> None:
    """Start the gateway; exit with status 2 and a message naming a bad setting."""
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"gateway: bad setting: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not settings.api_keys:
        logging.getLogger("gateway").warning(
            "no access keys configured: the API is open to anyone who can reach %s",
            settings.listen_host,
        )
    uvicorn.run(
        create_app(settings, fetcher_probe=FetcherHealth(settings.fetcher)),
        host=settings.listen_host,
        port=settings.listen_port,
        workers=1,
        server_header=False,
        timeout_graceful_shutdown=20,
        log_level="info",
        # No access log: a line per request costs a write on the first-token path, and
        # client addresses are not needed (the metrics count requests).
        access_log=False,
    )


if __name__ == "__main__":
    main()
