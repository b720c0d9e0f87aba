"""The cost of the gRPC hop: reads through the fetcher service vs the same reader in-process.

Three processes, as in production: a local TLS origin (its own process, so neither side
shares a CPU with it), the fetcher service (``FetcherServer`` with the real crawl and
downloader, on a Unix socket), and this one, which reads the same pages both ways in
alternating rounds: through the gateway's client (the hop: serialisation, the socket, the
servicer's checks, a second process) and by calling the same reader in-process. Printed:
the ratio of service time to in-process time at concurrency 1 and 32. Target: at most
1.15 at concurrency 1.

The loopback origin is reached through an explicit benchmark policy, exactly as in the
tests; the shipped ``fetcher serve`` cannot be told to allow loopback.

Run: ``.venv/bin/python -m bench.grpc_hop``.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from ipaddress import ip_network
from pathlib import Path

from prometheus_client import CollectorRegistry

from bench.support import load_ca, save_ca, spawn, stop, wait_for_signal
from fetcher.client import FetcherClient
from fetcher.crawl import WORKER_PRELOAD, Crawler
from fetcher.isolation.workers import WorkerPool
from fetcher.metrics import Metrics
from fetcher.net.download import Downloader
from fetcher.net.policy import Policy
from fetcher.net.resolver import StaticResolver
from fetcher.server import FetcherServer
from fetcher.settings import Settings, parse_listen
from testkit.origin import Origin, html

PAGES = 20
ROUNDS = 7
READS_PER_ROUND = 200
CONCURRENCIES = (1, 32)
PAGE = (
    "<html><head><title>A page</title></head><body><main><h1>A page</h1>"
    + "<p>lorem ipsum dolor sit amet, consectetur adipiscing elit</p>" * 150
    + "</main></body></html>"
)


async def _serve_origin(folder: Path) -> None:
    origin = Origin(load_ca(folder))
    await origin.start()
    for index in range(PAGES):
        origin.routes[f"/p{index}"] = html(PAGE)
    print(origin.port, flush=True)
    await wait_for_signal()
    await origin.stop()


def _downloader(folder: Path, port: int) -> Downloader:
    context = ssl.create_default_context()
    load_ca(folder).configure_trust(context)
    return Downloader(
        policy=Policy(ports=frozenset({port}), exempt=(ip_network("127.0.0.1/32"),)),
        resolver=StaticResolver({"origin.test": ["127.0.0.1"]}),
        ssl_context=context,
    )


async def _serve_fetcher(folder: Path, port: int) -> None:
    async with _downloader(folder, port) as downloader:
        settings = Settings(
            listen=(parse_listen(f"unix:{folder / 'f.sock'}"),),
            max_concurrent_reads=max(CONCURRENCIES) * 2,
        )
        pool = WorkerPool(workers=2, preload=WORKER_PRELOAD)
        server = FetcherServer(
            settings,
            reader=Crawler(downloader=downloader, pool=pool),
            metrics=Metrics(CollectorRegistry()),
            pool=pool,
        )
        await server.start()
        print("ready", flush=True)
        await wait_for_signal()
        await server.stop(grace=0)
        await pool.aclose()


async def _timed(
    read: Callable[[str], Awaitable[None]], urls: list[str], concurrency: int
) -> float:
    queue = list(urls)

    async def worker() -> None:
        while queue:
            await read(queue.pop())

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def _spawn(*args: str) -> tuple[asyncio.subprocess.Process, str]:
    return await spawn("bench.grpc_hop", *args)


async def run() -> list[tuple[int, float, float]]:
    """Measures both ways; returns (concurrency, service seconds, in-process seconds) rows."""
    folder = Path(tempfile.mkdtemp(prefix="tgb", dir="/tmp"))
    save_ca(folder)
    origin, port_text = await _spawn("origin", str(folder))
    port = int(port_text)
    fetcher, _ready = await _spawn("fetcher", str(folder), port_text)
    urls = [f"https://origin.test:{port}/p{i % PAGES}" for i in range(READS_PER_ROUND)]
    results = []
    pool = WorkerPool(workers=2, preload=WORKER_PRELOAD)
    try:
        async with (
            _downloader(folder, port) as downloader,
            FetcherClient(f"unix:{folder / 'f.sock'}") as client,
        ):
            reader = Crawler(downloader=downloader, pool=pool)

            async def in_process(url: str) -> None:
                report = await reader(
                    url, allowed_hosts=["origin.test"], page_limit=1, deadline=30, request_id="b"
                )
                assert report.pages, report

            async def service(url: str) -> None:
                report = await client.read(
                    url, allowed_hosts=["origin.test"], page_limit=1, request_id="b"
                )
                assert report.pages, report

            for concurrency in CONCURRENCIES:
                await _timed(service, urls[:40], concurrency)  # warm pools and the channel
                await _timed(in_process, urls[:40], concurrency)
                hop_times, direct_times = [], []
                for _ in range(ROUNDS):
                    hop_times.append(await _timed(service, urls, concurrency))
                    direct_times.append(await _timed(in_process, urls, concurrency))
                results.append(
                    (concurrency, statistics.median(hop_times), statistics.median(direct_times))
                )
    finally:
        await pool.aclose()
        await stop(fetcher)
        await stop(origin)
        shutil.rmtree(folder, ignore_errors=True)
    return results


def main() -> None:
    """Run the benchmark and print the table (or serve one side of it, when asked to)."""
    if sys.argv[1:2] == ["origin"]:
        asyncio.run(_serve_origin(Path(sys.argv[2])))
        return
    if sys.argv[1:2] == ["fetcher"]:
        asyncio.run(_serve_fetcher(Path(sys.argv[2]), int(sys.argv[3])))
        return
    results = asyncio.run(run())
    print(
        f"gRPC hop: {READS_PER_ROUND} one-page reads a round "
        f"({len(PAGE)} bytes of HTML each), median of {ROUNDS} rounds"
    )
    print("| concurrency | service (s) | in-process (s) | ratio service/in-process |")
    print("|---|---|---|---|")
    for concurrency, hop, direct in results:
        print(f"| {concurrency} | {hop:.3f} | {direct:.3f} | {hop / direct:.2f} |")


if __name__ == "__main__":
    main()
