"""The fetcher's real gRPC service on a Unix socket, reading the local HTTPS origin.

Wired as in production (a ``fetcher.crawl.Crawler`` over a real ``Downloader`` and the
render worker pool, the fetch log and metrics; started by ``testkit.fetcher``), except for
what a test must own: the explicit test Policy that lets 127.0.0.1 and the origin's port
through, a static resolver, the test CA, and small limits. The gateway side talks to it
through ``fetcher.client.FetcherClient``, as in production.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from fetcher.client import FetcherClient
from fetcher.crawl import WORKER_PRELOAD, Crawler
from fetcher.isolation.workers import WorkerPool
from fetcher.journal import FetchLog, JsonLinesSink
from fetcher.metrics import Metrics, exposition
from fetcher.net.download import Downloader, Limits
from fetcher.net.policy import Policy
from fetcher.net.resolver import StaticResolver
from fetcher.server import FetcherServer, fetch_observer
from testkit.fetcher import running_fetcher as running_server
from testkit.fetcher import socket_folder, unix_settings
from testkit.origin import NAMES

__all__ = ["EXTRA_NAMES", "FetcherService", "running_fetcher", "socket_folder"]

#: Names the test resolver knows besides the origin's: each breaks one rule.
EXTRA_NAMES: dict[str, Sequence[str]] = {
    "private.test": ["10.0.0.7"],  # rule 2: not public
    "untrusted.test": ["127.0.0.1"],  # not in the origin's certificate: TLS fails
}


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


@contextlib.asynccontextmanager
async def running_fetcher(
    folder: Path,
    *,
    policy: Policy,
    ssl_context: ssl.SSLContext,
    limits: Limits | None = None,
    pool: WorkerPool | None = None,
    **settings: Any,
) -> AsyncIterator[FetcherService]:
    """Start the fetcher service on ``folder/f.sock``; stop it afterwards.

    Args:
        folder: Where the socket goes.
        policy: The explicit test policy (``tests.support.fixtures.policy_for``), or the
            production one.
        ssl_context: A client context trusting the test CA.
        limits: Download limits (small by default).
        pool: A started render pool to use (and leave running); by default one of its
            own, started and closed with the service.
        settings: ``fetcher.settings.Settings`` fields to change.
    """
    log = io.StringIO()
    metrics = Metrics(CollectorRegistry())
    resolver = StaticResolver({**{name: ["127.0.0.1"] for name in NAMES}, **EXTRA_NAMES})
    owned = pool is None
    if pool is None:
        pool = WorkerPool(workers=2, preload=WORKER_PRELOAD)
    metrics.watch_pool(pool)
    try:
        await pool.run(os.getpid)  # started, as a running fetcher's pool is
        async with Downloader(
            policy=policy,
            resolver=resolver,
            ssl_context=ssl_context,
            limits=limits or Limits(page_timeout=2.0, max_bytes=64 * 1024),
            observer=(observer := fetch_observer(FetchLog(JsonLinesSink(log)), metrics)),
        ) as downloader:
            reader = Crawler(downloader=downloader, pool=pool, concurrency=4, observer=observer)
            async with running_server(
                unix_settings(folder, **({"shutdown_grace_seconds": 1.0} | settings)),
                reader,
                metrics=metrics,
                pool=pool,
            ) as server:
                target = server.settings.listen[0].target
                yield FetcherService(server, target, log)
    finally:
        if owned:
            await pool.aclose()
