"""The fetcher's real gRPC service on a Unix socket, reading the local HTTPS origin.

Wired as in production (``fetcher.server.crawl_reader`` over a real ``Downloader``, the
fetch log and metrics), except for what a test must own: the explicit test Policy that
lets 127.0.0.1 and the origin's port through, a static resolver, the test CA, and small
limits. The gateway side talks to it through ``fetcher.client.FetcherClient``, as in
production.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import ssl
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from fetcher.client import FetcherClient
from fetcher.download import Downloader, Limits
from fetcher.journal import FetchLog, JsonLinesSink
from fetcher.metrics import Metrics, exposition
from fetcher.policy import Policy
from fetcher.resolver import StaticResolver
from fetcher.server import FetcherServer, crawl_reader, hop_observer
from fetcher.settings import Settings, parse_listen
from testkit.origin import NAMES

#: Names the test resolver knows besides the origin's: each breaks one rule.
EXTRA_NAMES: dict[str, Sequence[str]] = {"private.test": ["10.0.0.7"]}


class FetcherService:
    """A running fetcher service and what a test may look at."""

    def __init__(self, server: FetcherServer, target: str, log: io.StringIO) -> None:
        self.server = server
        self.target = target
        self.log = log

    def client(self, **options: Any) -> FetcherClient:
        """A new client of this service (close it, or use ``async with``)."""
        return FetcherClient(self.target, **options)

    def records(self) -> list[dict[str, object]]:
        """The fetch log's records so far."""
        return [json.loads(line) for line in self.log.getvalue().splitlines()]

    def metric(self, family_name: str, labels: Mapping[str, str]) -> float:
        """The value of one sample of the fetcher's metrics (0 when absent)."""
        body, _ = exposition(self.server.metrics.registry)
        for family in text_string_to_metric_families(body.decode()):
            if family.name == family_name:
                for sample in family.samples:
                    if sample.name.endswith("_total") and sample.labels == dict(labels):
                        return sample.value
        return 0.0

    async def kill(self) -> None:
        """Stop at once, cancelling reads in flight (as a crash would, for the caller)."""
        await self.server.stop(grace=0)


@contextlib.contextmanager
def socket_folder() -> Iterator[Path]:
    """A short folder for a socket (a Unix socket path must fit in 108 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="tgr", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.asynccontextmanager
async def running_fetcher(
    folder: Path,
    *,
    policy: Policy,
    ssl_context: ssl.SSLContext,
    limits: Limits | None = None,
    **settings: Any,
) -> AsyncIterator[FetcherService]:
    """Start the fetcher service on ``folder/f.sock``; stop it afterwards.

    Args:
        folder: Where the socket goes.
        policy: The explicit test policy (``tests.support.fixtures.policy_for``).
        ssl_context: A client context trusting the test CA.
        limits: Download limits (small by default).
        settings: ``fetcher.settings.Settings`` fields to change.
    """
    log = io.StringIO()
    metrics = Metrics(CollectorRegistry())
    resolver = StaticResolver({**{name: ["127.0.0.1"] for name in NAMES}, **EXTRA_NAMES})
    target = f"unix:{folder / 'f.sock'}"
    async with Downloader(
        policy=policy,
        resolver=resolver,
        ssl_context=ssl_context,
        limits=limits or Limits(page_timeout=2.0, max_bytes=64 * 1024),
        observer=hop_observer(FetchLog(JsonLinesSink(log)), metrics),
    ) as downloader:
        defaults: dict[str, Any] = {
            "listen": (parse_listen(target),),
            "deadline_margin_seconds": 0.05,
            "shutdown_grace_seconds": 1.0,
        }
        server = FetcherServer(
            Settings(**(defaults | settings)),
            reader=crawl_reader(downloader, concurrency=4),
            metrics=metrics,
        )
        await server.start()
        try:
            yield FetcherService(server, target, log)
        finally:
            await server.stop(grace=0)
