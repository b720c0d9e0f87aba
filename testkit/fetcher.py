"""A running fetcher service for tests and benchmarks: a ``grpc.aio`` server on a Unix
socket in a short temporary folder (a socket path must fit in 108 bytes)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from fetcher.isolation.workers import WorkerPool
from fetcher.metrics import Metrics
from fetcher.server import FetcherServer
from fetcher.service import Reader
from fetcher.settings import Settings, parse_listen


@contextlib.contextmanager
def socket_folder() -> Iterator[Path]:
    """A fresh folder under /tmp with a short path, removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="tg", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def unix_settings(folder: Path, **overrides: Any) -> Settings:
    """Settings that serve on ``folder/f.sock``, quick to shut down, with ``overrides``."""
    defaults: dict[str, Any] = {
        "listen": (parse_listen(f"unix:{folder / 'f.sock'}"),),
        "shutdown_grace_seconds": 2.0,
        "deadline_margin_seconds": 0.05,
    }
    return Settings(**(defaults | overrides))


@contextlib.asynccontextmanager
async def running_fetcher(
    settings: Settings,
    reader: Reader,
    *,
    metrics: Metrics | None = None,
    pool: WorkerPool | None = None,
) -> AsyncIterator[FetcherServer]:
    """A started :class:`FetcherServer`, stopped (without grace) afterwards."""
    server = FetcherServer(
        settings,
        reader=reader,
        metrics=metrics if metrics is not None else Metrics(CollectorRegistry()),
        pool=pool,
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop(grace=0)
