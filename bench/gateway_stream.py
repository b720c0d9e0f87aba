"""Streaming through the gateway vs straight from the same engine, at 1 to 256 streams.

One run, three processes: a minimal engine that streams one chunk per token as fast as
it can (flushing each, the way llama-server does), the gateway (its production server:
`gateway.http.serving.uvicorn_config`, uvloop, the connection guard), and this process as the
client. For each concurrency (1, 16, 64, 256 streams at once) the same answers are read
directly from the engine and through the gateway, alternating. Printed per row:

- tokens per second each way and their ratio (through / direct);
- time to first token, p50 and p99, each way;
- the gateway process's own CPU time (from ``/proc``: time on a CPU, every thread)
  divided by the tokens it relayed: the figure that stays stable on a shared machine.

Two modes: pass-through (Web switch off), and the Web switch (the loop with the text
tool-call filter running on every token: round 1 calls a no-op tool, round 2 streams the
answer). Targets: <= 10 us of gateway CPU per token in pass-through, <= 30 us under the
Web switch. The ratio also measures contention: three busy processes share the cores,
and the client is the slowest of them; through the gateway can beat direct, because the
gateway forwards whatever arrived in one write, so the client parses fewer HTTP chunks.

Then the engine client's arm (issue 20): the gateway reads engines with its own small
HTTP/1.1 client (`gateway.engine.http`, on httptools) rather than httpx, which it already
uses for ``/models``. The arm reads the same 256 streams straight from the engine in this
process, once with that client and once with httpx (``AsyncClient.stream`` +
``aiter_raw``, the cheapest way httpx gives the body), alternating, and prints each one's
CPU per token. The verdict line adds httpx's extra cost to the gateway's own CPU per token
at 256 streams: httpx replaces the hand-written client only if that stays under twice the
gateway's cost; otherwise the bench says why the client is kept.

Run: ``python -m bench.gateway_stream`` (``--quick`` for a short run; ``--serve PORT
ENGINE_URL`` is the gateway process it starts).
"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from prometheus_client import CollectorRegistry

from bench.support import free_port
from gateway.app import create_app
from gateway.engine.http import EnginePool, open_exchange
from gateway.http.serving import uvicorn_config
from gateway.metrics import GatewayMetrics
from gateway.settings import EngineSettings, Limits, Settings
from gateway.tools.base import ToolResult
from gateway.tools.ledger import BudgetKind
from testkit.streaming_engine import chunk, engine_handler, framed

MODEL = "bench-model"
#: (streams at once, tokens per answer): answers a few hundred tokens long, like real ones.
LEVELS = ((1, 2000), (16, 1000), (64, 400), (256, 200))
QUICK_LEVELS = ((1, 500), (16, 100), (64, 50), (256, 20))
ROUNDS = 2
TOOL = "noop"


def _chunk(text: str) -> bytes:
    return chunk(MODEL, {"content": text})


_CALL = framed(
    b"data: "
    + json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1767225600,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_0",
                                "type": "function",
                                "function": {"name": TOOL, "arguments": "{}"},
                            }
                        ]
                    },
                    "finish_reason": None,
                }
            ],
        }
    ).encode()
    + b"\n\n"
)


def _tokens_asked(body: dict[str, Any]) -> int:
    """The answer's length in tokens, from the user's message ("go 500"): not from
    ``max_tokens``, which the Web loop raises on rounds that offer tools."""
    for message in body.get("messages", []):
        if message.get("role") == "user":
            return int(str(message.get("content", "")).split()[-1])
    return 2000


async def _engine_main(port: int) -> None:
    tokens = [_chunk(f" tok{i}") for i in range(2000)]

    async def answer(body: dict[str, Any]) -> list[bytes]:
        if body.get("tool_choice") == "required":
            return [_CALL]
        return tokens[: _tokens_asked(body)]

    serve = engine_handler(MODEL, answer)
    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


def _engine_process(port: int) -> None:
    asyncio.run(_engine_main(port))


class NoopTool:
    """The bench's one tool: answers at once, so the Web rounds measure the stream."""

    name = TOOL
    subject = None
    folded: frozenset[str] = frozenset()
    budget: BudgetKind | None = None
    schema: Mapping[str, Any] = {
        "type": "function",
        "function": {"name": TOOL, "description": "Does nothing.", "parameters": {}},
    }

    async def run(self, arguments: Mapping[str, Any], context: Any) -> AsyncGenerator[Any, None]:
        yield ToolResult("nothing")


def serve_gateway(port: int, engine_url: str) -> None:
    """The gateway process: production server settings, plus the no-op tool."""
    logging.basicConfig(level=logging.WARNING)
    settings = Settings(
        listen_port=port,
        engines=(EngineSettings(engine_url),),
        # Every stream comes from this machine: one client, as many connections as streams.
        limits=Limits(max_chats=2048, max_connections=4096, connections_per_client=4096),
    )
    metrics = GatewayMetrics(CollectorRegistry())
    app = create_app(settings, tools=[NoopTool()], metrics=metrics)
    uvicorn.Server(uvicorn_config(app, settings, metrics, log_level="warning")).run()


def _cpu_seconds(pid: int) -> float:
    """The process's CPU time: nanoseconds on a CPU from ``schedstat`` (every thread),
    else user + system ticks from ``stat``."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        pass
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Level:
    """One concurrency level's measurements, one way."""

    seconds: float
    tokens: int
    first_tokens: list[float]


async def _one(
    client: httpx.AsyncClient, url: str, tokens: int, web: bool, firsts: list[float]
) -> int:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"go {tokens}"}],
        "stream": True,
        "max_tokens": tokens,
    }
    if web:
        body["thor_web_search"] = True
    count = 0
    started = time.perf_counter()
    async with client.stream("POST", f"{url}/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if '"content":" tok' in line or '"content": " tok' in line:
                if not count:
                    firsts.append(time.perf_counter() - started)
                count += 1
    return count


async def _level(
    client: httpx.AsyncClient, url: str, streams: int, tokens: int, web: bool
) -> Level:
    firsts: list[float] = []
    started = time.perf_counter()
    counts = await asyncio.gather(*(_one(client, url, tokens, web, firsts) for _ in range(streams)))
    elapsed = time.perf_counter() - started
    assert all(c == tokens for c in counts), counts[:3]
    return Level(elapsed, sum(counts), firsts)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def _wait_up(client: httpx.AsyncClient, url: str) -> None:
    for _ in range(400):
        try:
            await client.get(url)
            return
        except httpx.TransportError:
            await asyncio.sleep(0.025)
    raise RuntimeError(f"{url} did not come up")


async def _measure(
    engine_url: str, gateway_url: str, gateway_pid: int, levels: tuple[tuple[int, int], ...]
) -> float:
    """Print both tables; return the pass-through CPU per token at the most streams."""
    widest = 0.0
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=512)
    async with httpx.AsyncClient(timeout=120, limits=limits, trust_env=False) as client:
        await _wait_up(client, f"{engine_url}/models")
        await _wait_up(client, gateway_url.removesuffix("/v1") + "/healthz")
        for web in (False, True):
            title = "Web switch (loop + text-call filter)" if web else "pass-through"
            print(f"\n{title}: gateway vs engine direct, alternating, {ROUNDS} rounds each")
            print(
                f"{'streams':>7} {'tok/s direct':>13} {'tok/s gw':>10} {'ratio':>6} "
                f"{'ttft p50 d/gw ms':>17} {'ttft p99 d/gw ms':>17} {'gw CPU us/tok':>14}"
            )
            for streams, tokens in levels:
                await _level(client, gateway_url, streams, min(tokens, 50), web)  # warm-up
                direct: list[Level] = []
                through: list[Level] = []
                cpu = 0.0
                for _ in range(ROUNDS):
                    direct.append(await _level(client, engine_url, streams, tokens, False))
                    before = _cpu_seconds(gateway_pid)
                    through.append(await _level(client, gateway_url, streams, tokens, web))
                    cpu += _cpu_seconds(gateway_pid) - before
                d_tps = statistics.median(x.tokens / x.seconds for x in direct)
                g_tps = statistics.median(x.tokens / x.seconds for x in through)
                d_first = [f for x in direct for f in x.first_tokens]
                g_first = [f for x in through for f in x.first_tokens]
                per_token = cpu / sum(x.tokens for x in through) * 1e6
                print(
                    f"{streams:>7} {d_tps:>13.0f} {g_tps:>10.0f} {g_tps / d_tps:>6.2f} "
                    f"{_pct(d_first, 0.5):>8.1f}/{_pct(g_first, 0.5):<8.1f} "
                    f"{_pct(d_first, 0.99):>8.1f}/{_pct(g_first, 0.99):<8.1f} "
                    f"{per_token:>14.1f}"
                )
                if not web:
                    widest = per_token
            target = 30 if web else 10
            print(f"target: gateway CPU <= {target} us per token")
    return widest


async def _read_with_engine_http(engine: EngineSettings, pool: EnginePool, body: bytes) -> int:
    exchange = await open_exchange(
        engine, "/chat/completions", body, pool=pool, connect_timeout=30, read_timeout=120
    )
    count = 0
    try:
        while data := await exchange.read():
            count += data.count(b" tok")
    finally:
        exchange.close()
    return count


async def _read_with_httpx(client: httpx.AsyncClient, url: str, body: bytes) -> int:
    count = 0
    headers = {"content-type": "application/json"}
    async with client.stream("POST", url, content=body, headers=headers) as response:
        async for data in response.aiter_raw():
            count += data.count(b" tok")
    return count


async def client_arm(engine_url: str, streams: int, tokens: int) -> tuple[float, float]:
    """CPU microseconds per token of reading ``streams`` answers at once with the gateway's
    engine client and with httpx, alternating (the engine runs in its own process)."""
    body = json.dumps(
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": f"go {tokens}"}],
            "stream": True,
        }
    ).encode()
    engine = EngineSettings(engine_url)
    pool = EnginePool()
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=512)
    own: list[float] = []
    other: list[float] = []
    async with httpx.AsyncClient(timeout=120, limits=limits, trust_env=False) as client:
        url = f"{engine_url}/chat/completions"
        for _ in range(ROUNDS + 1):  # the first round of each warms its connections
            before = time.process_time()
            counts = await asyncio.gather(
                *(_read_with_engine_http(engine, pool, body) for _ in range(streams))
            )
            own.append((time.process_time() - before) / sum(counts) * 1e6)
            before = time.process_time()
            counts = await asyncio.gather(
                *(_read_with_httpx(client, url, body) for _ in range(streams))
            )
            other.append((time.process_time() - before) / sum(counts) * 1e6)
    pool.close()
    return statistics.median(own[1:]), statistics.median(other[1:])


def print_client_verdict(own: float, other: float, gateway: float, streams: int) -> None:
    """The arm's figures and what they decide (issue 20: httpx if under twice the cost)."""
    with_httpx = gateway - own + other
    print(f"\nengine client, {streams} streams read in one process, CPU us per token:")
    print(
        f"  gateway.engine.http {own:>6.2f}   httpx aiter_raw {other:>6.2f}"
        f"   ratio {other / own:.2f}"
    )
    print(
        f"  gateway pass-through at {streams} streams: {gateway:.1f} us/token now, "
        f"~{with_httpx:.1f} with httpx ({with_httpx / gateway:.2f}x; replace under 2.00x)"
    )
    if with_httpx < 2 * gateway:
        print("  verdict: httpx would cost less than twice the gateway's CPU: use it")
    else:
        print(
            "  verdict: keep gateway.engine.http: httpx would at least double the gateway's"
            " CPU per token"
        )


def main() -> None:
    """Run the comparison and print the tables."""
    if len(sys.argv) >= 4 and sys.argv[1] == "--serve":
        serve_gateway(int(sys.argv[2]), sys.argv[3])
        return
    levels = QUICK_LEVELS if "--quick" in sys.argv else LEVELS
    engine_port, gateway_port = free_port(), free_port()
    engine = multiprocessing.get_context("spawn").Process(
        target=_engine_process, args=(engine_port,), daemon=True
    )
    engine.start()
    engine_url = f"http://127.0.0.1:{engine_port}/v1"
    gateway = subprocess.Popen(
        [sys.executable, "-m", "bench.gateway_stream", "--serve", str(gateway_port), engine_url],
        stdout=subprocess.DEVNULL,
    )
    try:
        gateway_cpu = asyncio.run(
            _measure(engine_url, f"http://127.0.0.1:{gateway_port}/v1", gateway.pid, levels)
        )
        streams, tokens = levels[-1]
        own, other = asyncio.run(client_arm(engine_url, streams, tokens))
        print_client_verdict(own, other, gateway_cpu, streams)
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
        engine.terminate()
        engine.join(timeout=10)


if __name__ == "__main__":
    main()
