"""The fetcher's real gRPC service in a process of its own, reading the local HTTPS origin.

For tests that must end the fetcher as a crash would (SIGKILL), which an in-process
server cannot show: run it as ``python -c "import runpy; runpy.run_module(
'tests.support.fetcher_process', run_name='__main__')" FOLDER PORT`` (see `spawn`). It
serves on ``FOLDER/f.sock`` with the explicit test policy (127.0.0.1 and the origin's
port), a static resolver for the origin's names, and trusts ``FOLDER/ca.pem``; it prints
its process id once it serves.
"""

from __future__ import annotations

import asyncio
import os
import signal
import ssl
import sys
from ipaddress import ip_network
from pathlib import Path

from prometheus_client import CollectorRegistry

from fetcher.crawl import WORKER_PRELOAD, Crawler
from fetcher.isolation.workers import WorkerPool
from fetcher.metrics import Metrics
from fetcher.net.download import Downloader
from fetcher.net.policy import Policy
from fetcher.net.resolver import StaticResolver
from fetcher.server import FetcherServer
from fetcher.settings import Settings, parse_listen
from testkit.origin import NAMES

#: The repository, where ``tests.support`` imports from.
ROOT = Path(__file__).resolve().parents[2]


async def spawn(folder: Path, origin_port: int) -> asyncio.subprocess.Process:
    """Start the fetcher process and wait (a minute at most) until it serves."""
    launch = "import runpy; runpy.run_module('tests.support.fetcher_process', run_name='__main__')"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        launch,
        str(folder),
        str(origin_port),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 60)
    assert line.strip() == str(process.pid).encode(), line
    return process


async def _serve(folder: Path, origin_port: int) -> None:
    context = ssl.create_default_context(cafile=str(folder / "ca.pem"))
    policy = Policy(ports=frozenset({origin_port}), exempt=(ip_network("127.0.0.1/32"),))
    pool = WorkerPool(workers=1, preload=WORKER_PRELOAD)
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    try:
        async with Downloader(
            policy=policy,
            resolver=StaticResolver({name: ["127.0.0.1"] for name in NAMES}),
            ssl_context=context,
        ) as downloader:
            settings = Settings(
                listen=(parse_listen(f"unix:{folder / 'f.sock'}"),), shutdown_grace_seconds=1.0
            )
            server = FetcherServer(
                settings,
                reader=Crawler(downloader=downloader, pool=pool, concurrency=2),
                metrics=Metrics(CollectorRegistry()),
                pool=pool,
            )
            await server.start()
            print(os.getpid(), flush=True)
            await stopping.wait()
            await server.stop()
    finally:
        pool.close()


if __name__ == "__main__":
    asyncio.run(_serve(Path(sys.argv[1]), int(sys.argv[2])))
