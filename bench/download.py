"""The cost of the safe download: our Downloader vs a plain httpx client, side by side.

Both read the same pages from one local TLS origin, in alternating rounds within one run
(so machine noise hits both alike). Printed: the ratio of our time to plain time at
concurrency 1 and 16. Target: at most 1.3 at concurrency 1.
"""

from __future__ import annotations

import asyncio
import ssl
import statistics
import time
from collections.abc import Awaitable, Callable
from ipaddress import ip_network

import httpx
import trustme

from fetcher.net.download import Downloader
from fetcher.net.policy import Policy
from fetcher.net.resolver import StaticResolver
from testkit.origin import Origin, html

PAGES = 20
ROUNDS = 7
REQUESTS_PER_ROUND = 200
PAGE = "<html><head><title>t</title></head><body>" + "<p>lorem ipsum dolor</p>" * 800 + "</body>"


async def _timed(
    fetch: Callable[[str], Awaitable[None]], urls: list[str], concurrency: int
) -> float:
    queue = list(urls)

    async def worker() -> None:
        while queue:
            await fetch(queue.pop())

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def run() -> list[tuple[int, float, float]]:
    ca = trustme.CA()
    context = ssl.create_default_context()
    ca.configure_trust(context)
    origin = Origin(ca)
    await origin.start()
    for index in range(PAGES):
        origin.routes[f"/p{index}"] = html(PAGE)
    policy = Policy(ports=frozenset({origin.port}), exempt=(ip_network("127.0.0.1/32"),))
    resolver = StaticResolver({"origin.test": ["127.0.0.1"]})
    ours_urls = [origin.url(f"/p{i % PAGES}") for i in range(REQUESTS_PER_ROUND)]
    plain_urls = [
        f"https://127.0.0.1:{origin.port}/p{i % PAGES}" for i in range(REQUESTS_PER_ROUND)
    ]
    results = []
    async with (
        Downloader(policy=policy, resolver=resolver, ssl_context=context) as downloader,
        httpx.AsyncClient(verify=context, trust_env=False) as plain,
    ):

        async def ours(url: str) -> None:
            outcome = await downloader.download(url, allowed_hosts=["origin.test"])
            assert outcome.ok, outcome

        async def baseline(url: str) -> None:
            response = await plain.get(url)
            assert response.status_code == 200
            await response.aread()

        for concurrency in (1, 16):
            await _timed(ours, ours_urls[:20], concurrency)  # warm both pools
            await _timed(baseline, plain_urls[:20], concurrency)
            ours_times, plain_times = [], []
            for _ in range(ROUNDS):
                ours_times.append(await _timed(ours, ours_urls, concurrency))
                plain_times.append(await _timed(baseline, plain_urls, concurrency))
            results.append(
                (concurrency, statistics.median(ours_times), statistics.median(plain_times))
            )
    await origin.stop()
    return results


def main() -> None:
    """Run the benchmark and print the table."""
    results = asyncio.run(run())
    print(f"safe download vs plain httpx: {REQUESTS_PER_ROUND} pages of {len(PAGE)} bytes a round")
    print("| concurrency | ours (s) | plain (s) | ratio ours/plain |")
    print("|---|---|---|---|")
    for concurrency, ours, plain in results:
        print(f"| {concurrency} | {ours:.3f} | {plain:.3f} | {ours / plain:.2f} |")


if __name__ == "__main__":
    main()
