"""Whole Web-on answers: what the gateway and the fetcher add, at 1, 16 and 64 chats at once.

Six processes, as in production plus the stand-ins: a local HTTPS site, the SearXNG
stand-in serving a recorded answer whose results point at that site, a scripted engine,
the fetcher service (the real crawl and downloader, reaching the loopback site through an
explicit benchmark Policy, as the tests do), the gateway (``python -m gateway``), and this
one, the client. Every answer is the same: two searches, one read that crawls two hops
(three pages), then a cited answer; every answer is checked (events, pages read, text).

Per answer: the time gateway and fetcher add = the answer's whole time minus the delays
the stand-ins are scripted to take (the engine before each of its four rounds, the site
before each page). The stand-ins' own work is not subtracted, so the figure is an upper
bound. Printed per concurrency: median and 95th percentile of the added time, errors,
and the peak resident memory of the gateway and the fetcher during that level (VmHWM,
reset before each level). Then the 64-chat level is repeated and the resident memory of
both after each repeat is printed: it must not grow. Targets: <= 50 ms added per answer
at concurrency 1, no error at 64, memory flat across repeats.

Then the page cache (SPEC 10), side by side: a second fetcher with the cache on (its
defaults, 64 MiB for 600 s) behind a second gateway, and the 64-chat level run against
each pair in turn (``CACHE_ROUNDS`` times each, alternating). Every answer reads the same
three pages, as many people asking about one thing do: with the cache, the first read
of a page downloads and renders it and every read after it (or at the same time) shares
that. Printed: the whole answer's p50 and p95 without and with, and their ratio.

The fetcher runs with ``max_concurrent_reads`` 128 (the default is 16): at 64 chats at
once, 16 would refuse reads (RESOURCE_EXHAUSTED, a clear tool result, but an error here).

Run: ``make bench BENCH=research`` (``.venv/bin/python -m bench.research``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import ssl
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from ipaddress import ip_network
from pathlib import Path
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

from bench.support import (
    free_port,
    load_ca,
    save_ca,
    spawn,
    stop,
    wait_for_signal,
)
from fetcher.client import FetcherClient, PageRead
from fetcher.crawl import WORKER_PRELOAD, WORKER_WARM_UP, Crawler
from fetcher.isolation.workers import WorkerPool
from fetcher.metrics import Metrics
from fetcher.net.download import Downloader
from fetcher.net.policy import Policy
from fetcher.net.resolver import StaticResolver
from fetcher.pagecache import PageCache
from fetcher.server import FetcherServer
from fetcher.settings import Settings, parse_listen
from testkit.origin import Origin, Reply
from testkit.searxng import SearxngStandIn, pointed_at, recorded
from testkit.streaming_engine import chunk, engine_handler

MODEL = "bench-model"
#: Scripted delays (seconds): before each engine round, before each page of the site.
ENGINE_DELAY = 0.025
SITE_DELAY = 0.020
ENGINE_ROUNDS = 4
PAGES = 3
SCRIPTED = ENGINE_ROUNDS * ENGINE_DELAY + PAGES * SITE_DELAY
#: (chats at once, answers measured) per level.
LEVELS = ((1, 30), (16, 96), (64, 192))
REPEATS = 5
#: Rounds of the 64-chat level against each fetcher, without and with the page cache.
CACHE_ROUNDS = 2
CACHE_BYTES = 64 * 1024 * 1024
SIDE_BY_SIDE = 30
WARMUP_ANSWERS = 8
HOSTS = {"example.org": "origin.test", "example.com": "www.origin.test"}
NAMES = ("origin.test", "www.origin.test")
ANSWER_WORDS = 60
FILLER = "<p>" + "Limescale builds up where water is hard; citric acid removes it. " * 40 + "</p>"


def _page(title: str, link: str | None) -> Reply:
    anchor = f'<p><a href="{link}">Read on</a></p>' if link else ""
    body = (
        f"<html><head><title>{title}</title></head><body><main><h1>{title}</h1>"
        f"{FILLER}{anchor}</main></body></html>"
    )
    return Reply(
        headers=(("Content-Type", "text/html; charset=utf-8"),),
        body=body.encode(),
        delay=SITE_DELAY,
    )


# --- The stand-ins, each in its own process ---------------------------------------------


async def _serve_site(folder: Path) -> None:
    origin = Origin(load_ca(folder))
    await origin.start()
    # The first search result, and a chain of two more pages: a two-hop crawl.
    origin.routes["/kettle/descale"] = _page("Descaling a kettle", "/kettle/acid")
    origin.routes["/kettle/acid"] = _page("Citric acid", "/kettle/rinse")
    origin.routes["/kettle/rinse"] = _page("Rinsing", None)
    print(origin.port, flush=True)
    await wait_for_signal()
    await origin.stop()


async def _serve_searxng(site_port: int) -> None:
    stand_in = SearxngStandIn()
    stand_in.default = pointed_at(recorded("search_normal.json"), HOSTS, site_port)
    await stand_in.start()
    print(stand_in.port, flush=True)
    await wait_for_signal()
    await stand_in.stop()


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return chunk(MODEL, delta, finish)


def _call(name: str, arguments: dict[str, str]) -> list[bytes]:
    text = json.dumps(arguments)
    return [
        _chunk({"role": "assistant", "content": None}),
        _chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_0",
                        "type": "function",
                        "function": {"name": name, "arguments": ""},
                    }
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": text[:10]}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": text[10:]}}]}),
        _chunk({}, "tool_calls"),
    ]


def _round(tool_results: int, site_port: int) -> list[bytes]:
    """The engine's reply by how far the conversation is: search, search, read, answer."""
    if tool_results == 0:
        return _call("web_search", {"query": "kettle descale"})
    if tool_results == 1:
        return _call("web_search", {"query": "citric acid kettle"})
    if tool_results == 2:
        start = f"https://origin.test:{site_port}/kettle/descale"
        return _call("fetch_page_content_recursive", {"url": start})
    words = [f"word{i} " for i in range(ANSWER_WORDS)] + ["[1][7][8]."]
    return [
        _chunk({"role": "assistant", "content": ""}),
        *(_chunk({"content": w}) for w in words),
        _chunk({}, "stop"),
    ]


async def _serve_engine(site_port: int) -> None:
    async def answer(body: dict[str, Any]) -> list[bytes]:
        results = sum(1 for m in body["messages"] if m.get("role") == "tool")
        await asyncio.sleep(ENGINE_DELAY)
        return _round(results, site_port)

    serve = engine_handler(MODEL, answer)
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await wait_for_signal()


async def _serve_fetcher(folder: Path, site_port: int, socket: str, cache_bytes: int) -> None:
    context = ssl.create_default_context()
    load_ca(folder).configure_trust(context)
    # The explicit benchmark policy: the loopback site's address and port, nothing else.
    policy = Policy(ports=frozenset({site_port}), exempt=(ip_network("127.0.0.1/32"),))
    pool = WorkerPool(workers=2, preload=WORKER_PRELOAD, warm_up=WORKER_WARM_UP)
    try:
        async with Downloader(
            policy=policy,
            resolver=StaticResolver({name: ["127.0.0.1"] for name in NAMES}),
            ssl_context=context,
        ) as downloader:
            settings = Settings(
                listen=(parse_listen(f"unix:{folder / socket}"),), max_concurrent_reads=128
            )
            cache = PageCache(max_bytes=cache_bytes)
            server = FetcherServer(
                settings,
                reader=Crawler(downloader=downloader, pool=pool, concurrency=4, cache=cache),
                metrics=Metrics(CollectorRegistry()),
                pool=pool,
            )
            await server.start()
            print(os.getpid(), flush=True)
            await wait_for_signal()
            await server.stop(grace=0)
    finally:
        pool.close()


# --- The client ---------------------------------------------------------------------------


@dataclass
class Answer:
    """One answer as the client saw it."""

    seconds: float
    ok: bool
    problem: str = ""


def _check(events: list[dict[str, Any]], text: str, done: bool) -> str:
    # working events (calls started, calls ended) come around each round's calls.
    kinds = [e["type"] for e in events if e["type"] != "working"]
    if kinds != ["searched", "searched", "read", "read", "read", "sources", "citations"]:
        return f"events {kinds}"
    if not all(e["ok"] for e in events if e["type"] == "read"):
        return "a page was not read"
    if events[-1]["unknown"]:
        return f"unknown citations {events[-1]['unknown']}"
    if not text.endswith("[1][7][8].") or not done:
        return "incomplete answer"
    return ""


async def _one(client: httpx.AsyncClient, url: str) -> Answer:
    request = {
        "model": MODEL,
        "stream": True,
        "thor_web_search": True,
        "messages": [{"role": "user", "content": "How do I descale a kettle?"}],
    }
    events: list[dict[str, Any]] = []
    text: list[str] = []
    done = False
    started = time.perf_counter()
    try:
        async with client.stream("POST", f"{url}/chat/completions", json=request) as response:
            if response.status_code != 200:
                return Answer(time.perf_counter() - started, False, f"HTTP {response.status_code}")
            async for line in response.aiter_lines():
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: "):
                    chunk = json.loads(line[6:])
                    if "thor_event" in chunk:
                        events.append(chunk["thor_event"])
                    elif chunk.get("choices"):
                        text.append(chunk["choices"][0]["delta"].get("content") or "")
    except httpx.HTTPError as exc:
        return Answer(time.perf_counter() - started, False, type(exc).__name__)
    seconds = time.perf_counter() - started
    problem = _check(events, "".join(text), done)
    return Answer(seconds, not problem, problem)


@dataclass
class Parts:
    """The same answer's work asked of each part directly, one after the other."""

    engine_url: str
    searxng_url: str
    fetcher: FetcherClient
    start: str

    async def answer(self, client: httpx.AsyncClient) -> tuple[float, float]:
        """Seconds for the whole answer's parts, and for the read alone."""
        started = time.perf_counter()
        read_seconds = 0.0
        for step in range(ENGINE_ROUNDS):
            messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
            messages += [{"role": "tool", "content": "x"}] * step
            request = {"model": MODEL, "stream": True, "messages": messages}
            async with client.stream(
                "POST", f"{self.engine_url}/chat/completions", json=request
            ) as response:
                async for _ in response.aiter_bytes():
                    pass
            if step < 2:
                params = {"q": f"query {step}", "format": "json", "locale": "en"}
                found = await client.get(f"{self.searxng_url}/search", params=params)
                assert found.status_code == 200
            elif step == 2:
                read_started = time.perf_counter()
                pages = 0
                async for item in self.fetcher.read_stream(
                    self.start,
                    allowed_hosts=["origin.test", "www.origin.test"],
                    page_limit=6,
                ):
                    pages += isinstance(item, PageRead)
                read_seconds = time.perf_counter() - read_started
                assert pages == PAGES, pages
        return time.perf_counter() - started, read_seconds


async def _level(client: httpx.AsyncClient, url: str, chats: int, answers: int) -> list[Answer]:
    left = answers
    out: list[Answer] = []

    async def chat() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            out.append(await _one(client, url))

    await asyncio.gather(*(chat() for _ in range(chats)))
    return out


def _memory(pid: int, field: str) -> float:
    """A /proc/PID/status memory field, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _reset_peak(pid: int) -> None:
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0).
    Path(f"/proc/{pid}/clear_refs").write_text("5")


async def _spawn(*args: str) -> tuple[asyncio.subprocess.Process, str]:
    return await spawn("bench.research", *args)


@dataclass
class Level:
    """The figures of one concurrency level."""

    chats: int
    answers: list[Answer]
    gateway_peak: float
    fetcher_peak: float


@dataclass
class Figures:
    """Everything measured."""

    levels: list[Level]
    repeats: list[tuple[float, float]]
    side: list[tuple[float, float, float]]
    #: Whole-answer seconds at 64 chats, without and with the page cache.
    uncached: list[Answer]
    cached: list[Answer]


async def _gateway(
    folder: Path, socket: str, engine_port: str, searxng_port: str
) -> tuple[asyncio.subprocess.Process, str]:
    """A gateway on a free port in front of the fetcher on ``socket``; its API's URL."""
    gateway_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIGRESS_")}
    env |= {
        "TIGRESS_ENGINE_URL": f"http://127.0.0.1:{engine_port}/v1",
        "TIGRESS_SEARXNG_URL": f"http://127.0.0.1:{searxng_port}",
        "TIGRESS_FETCHER": f"unix:{folder / socket}",
        "TIGRESS_LISTEN": f"127.0.0.1:{gateway_port}",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return process, f"http://127.0.0.1:{gateway_port}"


async def _healthy(client: httpx.AsyncClient, base: str) -> None:
    for _ in range(400):
        try:
            health = (await client.get(f"{base}/healthz")).json()
            if health["status"] == "ok":
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.05)
    raise RuntimeError("the gateway did not come up healthy")


async def run() -> Figures:
    """Start everything, measure every level and the repeats, stop everything."""
    folder = Path(tempfile.mkdtemp(prefix="tgr", dir="/tmp"))
    save_ca(folder)
    started: list[asyncio.subprocess.Process] = []
    gateway: asyncio.subprocess.Process | None = None
    try:
        site, site_port = await _spawn("site", str(folder))
        started.append(site)
        searxng, searxng_port = await _spawn("searxng", site_port)
        started.append(searxng)
        engine, engine_port = await _spawn("engine", site_port)
        started.append(engine)
        fetcher, fetcher_pid = await _spawn("fetcher", str(folder), site_port, "f.sock", "0")
        started.append(fetcher)
        gateway, base = await _gateway(folder, "f.sock", engine_port, searxng_port)
        url = f"{base}/v1"
        pids = {"gateway": gateway.pid, "fetcher": int(fetcher_pid)}
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
        async with httpx.AsyncClient(timeout=120, trust_env=False, limits=limits) as client:
            await _healthy(client, base)
            warm = await _level(client, url, 4, WARMUP_ANSWERS)
            if not all(a.ok for a in warm):
                raise RuntimeError(f"warm-up answers failed: {[a.problem for a in warm]}")
            # Side by side at concurrency 1: the answer through the gateway, and the same
            # work asked of each part directly, alternating.
            async with FetcherClient(f"unix:{folder / 'f.sock'}") as direct_fetcher:
                parts = Parts(
                    f"http://127.0.0.1:{engine_port}/v1",
                    f"http://127.0.0.1:{searxng_port}",
                    direct_fetcher,
                    f"https://origin.test:{site_port}/kettle/descale",
                )
                await parts.answer(client)
                side: list[tuple[float, float, float]] = []
                for _ in range(SIDE_BY_SIDE):
                    through = await _one(client, url)
                    alone, read = await parts.answer(client)
                    side.append((through.seconds, alone, read))
            levels: list[Level] = []
            for chats, answers in LEVELS:
                for pid in pids.values():
                    _reset_peak(pid)
                measured = await _level(client, url, chats, answers)
                levels.append(
                    Level(
                        chats,
                        measured,
                        _memory(pids["gateway"], "VmHWM"),
                        _memory(pids["fetcher"], "VmHWM"),
                    )
                )
            repeats: list[tuple[float, float]] = []
            chats, answers = LEVELS[-1]
            for _ in range(REPEATS):
                await _level(client, url, chats, answers)
                await asyncio.sleep(0.5)  # let the answers' clean-up finish
                repeats.append(
                    (_memory(pids["gateway"], "VmRSS"), _memory(pids["fetcher"], "VmRSS"))
                )
            # The page cache, side by side: a second fetcher with it on, its own gateway.
            cached_fetcher, _ = await _spawn(
                "fetcher", str(folder), site_port, "cached.sock", str(CACHE_BYTES)
            )
            started.append(cached_fetcher)
            cached_gateway, cached_base = await _gateway(
                folder, "cached.sock", engine_port, searxng_port
            )
            started.append(cached_gateway)
            await _healthy(client, cached_base)
            await _level(client, f"{cached_base}/v1", 4, WARMUP_ANSWERS)
            uncached: list[Answer] = []
            cached: list[Answer] = []
            for _ in range(CACHE_ROUNDS):
                uncached += await _level(client, url, chats, answers)
                cached += await _level(client, f"{cached_base}/v1", chats, answers)
        return Figures(levels, repeats, side, uncached, cached)
    finally:
        if gateway is not None:
            await stop(gateway)
        for process in reversed(started):
            await stop(process)
        shutil.rmtree(folder, ignore_errors=True)


def _ms(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index] * 1000


def main() -> None:
    """Run the benchmark and print the tables (or serve one stand-in, when asked to)."""
    role = sys.argv[1:2]
    if role == ["site"]:
        asyncio.run(_serve_site(Path(sys.argv[2])))
        return
    if role == ["searxng"]:
        asyncio.run(_serve_searxng(int(sys.argv[2])))
        return
    if role == ["engine"]:
        asyncio.run(_serve_engine(int(sys.argv[2])))
        return
    if role == ["fetcher"]:
        asyncio.run(
            _serve_fetcher(Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
        )
        return
    figures = asyncio.run(run())
    levels, repeats, side = figures.levels, figures.repeats, figures.side
    print(
        "whole Web-on answers (2 searches, one 2-hop read of 3 pages, a cited answer); "
        f"scripted delays {SCRIPTED * 1000:.0f} ms per answer "
        f"({ENGINE_ROUNDS} engine rounds x {ENGINE_DELAY * 1000:.0f} ms, "
        f"{PAGES} pages x {SITE_DELAY * 1000:.0f} ms)"
    )
    print(
        "| chats at once | answers | errors | whole answer p50 (ms) | added p50 (ms) "
        "| added p95 (ms) | gateway peak (MiB) | fetcher peak (MiB) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for level in levels:
        seconds = [a.seconds for a in level.answers]
        added = [s - SCRIPTED for s in seconds]
        errors = [a.problem for a in level.answers if not a.ok]
        print(
            f"| {level.chats} | {len(level.answers)} | {len(errors)} "
            f"| {statistics.median(seconds) * 1000:.0f} | {_ms(added, 0.5):.1f} "
            f"| {_ms(added, 0.95):.1f} | {level.gateway_peak:.0f} | {level.fetcher_peak:.0f} |"
        )
        if errors:
            print(f"  errors: {sorted(set(errors))}")
    through = statistics.median(t for t, _, _ in side) * 1000
    alone = statistics.median(a for _, a, _ in side) * 1000
    read = statistics.median(r for _, _, r in side) * 1000
    print(
        f"side by side at concurrency 1 (median of {SIDE_BY_SIDE}, alternating): through the "
        f"gateway {through:.1f} ms; the same work asked of each part directly {alone:.1f} ms "
        f"(ratio {through / alone:.2f}; the gateway's own share {through - alone:.1f} ms); "
        f"the read alone {read:.1f} ms, of which the fetcher adds "
        f"{read - PAGES * SITE_DELAY * 1000:.1f} ms over the site's delays"
    )
    print(f"resident memory after each of {REPEATS} repeats of the 64-chat level (MiB):")
    print("  gateway: " + ", ".join(f"{g:.1f}" for g, _ in repeats))
    print("  fetcher: " + ", ".join(f"{f:.1f}" for _, f in repeats))
    first = levels[0]
    added_1 = _ms([a.seconds - SCRIPTED for a in first.answers], 0.5)
    errors_64 = sum(not a.ok for a in levels[-1].answers)
    growth = [repeats[-1][i] - repeats[1][i] if len(repeats) > 1 else 0.0 for i in range(2)]
    print(
        f"added at concurrency 1: {added_1:.1f} ms (target <= 50 ms): "
        f"{'ok' if added_1 <= 50 else 'MISSED'}"
    )
    print(f"errors at 64: {errors_64} (target 0): {'ok' if errors_64 == 0 else 'MISSED'}")
    print(
        f"memory growth from repeat 2 to {REPEATS}: gateway {growth[0]:+.1f} MiB, "
        f"fetcher {growth[1]:+.1f} MiB"
    )

    _print_cache(figures)


def _print_cache(figures: Figures) -> None:
    """The 64-chat level without and with the page cache, side by side."""
    chats = LEVELS[-1][0]
    print(
        f"page cache at {chats} chats at once, every answer reading the same 3 pages "
        f"({CACHE_ROUNDS} rounds of {LEVELS[-1][1]} answers each, alternating):"
    )
    print("| fetcher | answers | errors | whole answer p50 (ms) | p95 (ms) |")
    print("|---|---|---|---|---|")
    rows = (("no cache (cache_bytes = 0)", figures.uncached), ("cache on", figures.cached))
    for name, answers in rows:
        seconds = [a.seconds for a in answers]
        errors = sum(not a.ok for a in answers)
        print(
            f"| {name} | {len(answers)} | {errors} | {_ms(seconds, 0.5):.0f} "
            f"| {_ms(seconds, 0.95):.0f} |"
        )
        if errors:
            print(f"  errors: {sorted({a.problem for a in answers if not a.ok})}")
    without = [a.seconds for a in figures.uncached]
    with_cache = [a.seconds for a in figures.cached]
    print(
        f"ratio without / with: p50 {_ms(without, 0.5) / _ms(with_cache, 0.5):.2f}x, "
        f"p95 {_ms(without, 0.95) / _ms(with_cache, 0.95):.2f}x"
    )


if __name__ == "__main__":
    main()
