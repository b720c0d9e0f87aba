"""The cost of the gRPC hop: reads through the fetcher service vs the same reader in-process.

Three processes, as in production: a local TLS origin (its own process, so neither side
shares a CPU with it), the fetcher service (``FetcherServer`` with the real crawl and
downloader, on a Unix socket), and this one, which reads the same pages both ways in
alternating rounds: through the gateway's client (the hop: serialisation, the socket, the
servicer's checks, a second process) and by calling the same reader in-process; and a
third way, the same reader with each page turned into text in this process (no worker:
what the isolation of issue 23 costs). Printed: reads per second each way, the ratio of
service time to in-process time at concurrency 1 and 32 (target: at most 1.15 at
concurrency 1), and of service time to in-process extraction without a worker. Target of
issue 23: at least 250 reads/s through the service at concurrency 32 on the 2-core
machine, a fresh confined worker per page.

The loopback origin is reached through an explicit benchmark policy, exactly as in the
tests; the shipped ``fetcher serve`` cannot be told to allow loopback.

Run: ``.venv/bin/python -m bench.grpc_hop``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import resource
import shutil
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from ipaddress import ip_network
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from bench.support import load_ca, save_ca, spawn, stop, wait_for_signal
from fetcher.client import FetcherClient
from fetcher.crawl import WORKER_PRELOAD, WORKER_WARM_UP, Crawler
from fetcher.isolation.workers import Wire, WorkerPool
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
        pool = WorkerPool(workers=2, preload=WORKER_PRELOAD, warm_up=WORKER_WARM_UP)
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


class _Inline(WorkerPool):
    """Runs each task in this process: in-process extraction, no worker (the baseline)."""

    async def run(self, function: Callable[..., Wire], *args: Any, **kwargs: Any) -> Wire:
        return function(*args, **kwargs)


_TICK = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of process ``pid`` itself and of its children it has reaped."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0, 0.0
    utime, stime, cutime, cstime = (int(field) / _TICK for field in fields[11:15])
    return utime + stime, cutime + cstime


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


@dataclasses.dataclass(frozen=True, slots=True)
class _Processes:
    """The processes whose CPU time a round counts: the origin, the fetcher service and
    its zygote, the bench's own zygote (the in-process way's workers)."""

    origin: int
    fetcher: int
    pools: tuple[WorkerPool, ...]

    def zygote_of_fetcher(self) -> int | None:
        zygotes = _children(self.fetcher)
        return zygotes[0] if zygotes else None

    def sample(self) -> dict[str, float]:
        """Cumulative CPU seconds by role (workers are reaped by their zygote, so their
        time is the zygote's children's)."""
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = {"client (bench)": usage.ru_utime + usage.ru_stime}
        cpu["origin"] = _proc_cpu(self.origin)[0]
        cpu["fetcher main"] = _proc_cpu(self.fetcher)[0]
        zygote, workers = 0.0, 0.0
        pids = [self.zygote_of_fetcher(), *(pool.zygote_pid for pool in self.pools)]
        for pid in pids:
            if pid is not None:
                own, reaped = _proc_cpu(pid)
                zygote, workers = zygote + own, workers + reaped
        cpu["zygote"] = zygote
        cpu["workers"] = workers
        return cpu


async def _timed(
    read: Callable[[str], Awaitable[None]],
    urls: list[str],
    concurrency: int,
    processes: _Processes | None = None,
    cpu: dict[str, float] | None = None,
) -> float:
    """Wall seconds to read ``urls`` at ``concurrency``; adds CPU seconds by role to ``cpu``."""
    queue = list(urls)

    async def worker() -> None:
        while queue:
            await read(queue.pop())

    before = processes.sample() if processes is not None else {}
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    if processes is not None and cpu is not None:
        await asyncio.sleep(0.05)  # the last workers reaped
        for role, seconds in processes.sample().items():
            cpu[role] = cpu.get(role, 0.0) + seconds - before[role]
    return elapsed


async def _spawn(*args: str) -> tuple[asyncio.subprocess.Process, str]:
    return await spawn("bench.grpc_hop", *args)


WAYS = ("service", "in-process", "no worker")


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    """One concurrency's measurements, each way's.

    Attributes:
        concurrency: Reads at once.
        seconds: Median wall seconds of a round, by way.
        cpu_ms: CPU milliseconds per read, by way and then by process role.
    """

    concurrency: int
    seconds: dict[str, float]
    cpu_ms: dict[str, dict[str, float]]


async def run(rounds: int = ROUNDS, concurrencies: tuple[int, ...] = CONCURRENCIES) -> list[Row]:
    """Measures the three ways, rounds alternating, at each concurrency."""
    folder = Path(tempfile.mkdtemp(prefix="tgb", dir="/tmp"))
    save_ca(folder)
    origin, port_text = await _spawn("origin", str(folder))
    port = int(port_text)
    fetcher, _ready = await _spawn("fetcher", str(folder), port_text)
    urls = [f"https://origin.test:{port}/p{i % PAGES}" for i in range(READS_PER_ROUND)]
    results = []
    pool = WorkerPool(workers=2, preload=WORKER_PRELOAD, warm_up=WORKER_WARM_UP)
    processes = _Processes(origin.pid, fetcher.pid, (pool,))
    try:
        async with (
            _downloader(folder, port) as downloader,
            FetcherClient(f"unix:{folder / 'f.sock'}") as client,
        ):
            reader = Crawler(downloader=downloader, pool=pool)
            inline_reader = Crawler(downloader=downloader, pool=_Inline())

            async def inline(url: str) -> None:
                report = await inline_reader(
                    url, allowed_hosts=["origin.test"], page_limit=1, deadline=30, request_id="b"
                )
                assert report.pages, report

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

            ways = dict(zip(WAYS, (service, in_process, inline), strict=True))
            for concurrency in concurrencies:
                for read in ways.values():  # warm pools and the channel
                    await _timed(read, urls[:40], concurrency)
                times: dict[str, list[float]] = {way: [] for way in WAYS}
                cpu: dict[str, dict[str, float]] = {way: {} for way in WAYS}
                for _ in range(rounds):
                    for way, read in ways.items():
                        times[way].append(
                            await _timed(read, urls, concurrency, processes, cpu[way])
                        )
                reads = rounds * READS_PER_ROUND
                results.append(
                    Row(
                        concurrency,
                        {way: statistics.median(times[way]) for way in WAYS},
                        {
                            way: {role: s * 1000 / reads for role, s in cpu[way].items()}
                            for way in WAYS
                        },
                    )
                )
    finally:
        await pool.aclose()
        await stop(fetcher)
        await stop(origin)
        shutil.rmtree(folder, ignore_errors=True)
    return results


def report(results: list[Row], rounds: int = ROUNDS) -> None:
    """Prints the tables: wall clock and ratios, then CPU per read by process."""
    print(
        f"gRPC hop: {READS_PER_ROUND} one-page reads a round "
        f"({len(PAGE)} bytes of HTML each), median of {rounds} rounds"
    )
    print(
        "| concurrency | service (s) | reads/s | in-process (s) | ratio service/in-process "
        "| in-process, no worker (s) | reads/s | ratio service/no worker |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in results:
        hop, direct, inline = (row.seconds[way] for way in WAYS)
        print(
            f"| {row.concurrency} | {hop:.3f} | {READS_PER_ROUND / hop:.0f} | {direct:.3f} "
            f"| {hop / direct:.2f} | {inline:.3f} | {READS_PER_ROUND / inline:.0f} "
            f"| {hop / inline:.2f} |"
        )
    roles = list(results[0].cpu_ms[WAYS[0]]) if results else []
    print("\nCPU ms per read, by process (all rounds; workers: reaped by their zygote)")
    print(
        f"| concurrency | way | {' | '.join(roles)} | total | reads/s the CPU allows on 2 cores |"
    )
    print(f"|---|---|{'---|' * len(roles)}---|---|")
    for row in results:
        for way in WAYS:
            cpu = row.cpu_ms[way]
            total = sum(cpu.values())
            cells = " | ".join(f"{cpu.get(role, 0.0):.2f}" for role in roles)
            print(f"| {row.concurrency} | {way} | {cells} | {total:.2f} | {2000 / total:.0f} |")


def main() -> None:
    """Run the benchmark and print the table (or serve one side of it, when asked to)."""
    if sys.argv[1:2] == ["origin"]:
        asyncio.run(_serve_origin(Path(sys.argv[2])))
        return
    if sys.argv[1:2] == ["fetcher"]:
        asyncio.run(_serve_fetcher(Path(sys.argv[2]), int(sys.argv[3])))
        return
    report(asyncio.run(run()))


if __name__ == "__main__":
    main()
