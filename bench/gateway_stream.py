"""Streaming through the gateway (Web switch off) vs straight from the same engine.

One run, alternating rounds: a minimal engine (its own process) streams one chunk per
token, flushing each, the way llama-server does, as fast as it can; the gateway
(``python -m gateway``, its own process) passes them through; this process reads the
stream both ways. Printed: the time to the first token each way on short answers and the
difference, and tokens per second each way on long answers and their ratio. Targets:
added time to first token <= 2 ms, ratio >= 0.9.

The long answers measure the gateway's cost per token, not a real engine's pace (tens to
a few hundred tokens per second): three busy processes share the machine's cores, so on
a two-core machine the ratio also measures contention.

Run: ``python -m bench.gateway_stream``.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import httpx

TOKENS = 2000
ROUNDS = 20
SHORT_TOKENS = 16
SHORT_ROUNDS = 200
WARMUP = 2
MODEL = "bench-model"


def _chunk(text: str) -> bytes:
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": MODEL,
        "choices": [
            {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None}
        ],
    }
    data = b"data: " + json.dumps(body).encode() + b"\n\n"
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _engine_main(port: int) -> None:
    tokens = [_chunk(f" tok{i}") for i in range(TOKENS)]
    done = b"data: [DONE]\n\n"
    tail = f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n"
    models = json.dumps({"object": "list", "data": [{"id": MODEL}]}).encode()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = json.loads(await reader.readexactly(length)) if length else {}
                if head.startswith(b"GET"):
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        + f"Content-Length: {len(models)}\r\n\r\n".encode()
                        + models
                    )
                    await writer.drain()
                    continue
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"
                )
                for token in tokens[: int(body.get("max_tokens", TOKENS))]:
                    writer.write(token)
                    await writer.drain()
                writer.write(tail)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def _engine_process(port: int) -> None:
    asyncio.run(_engine_main(port))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Run:
    """One streamed answer."""

    first_token: float
    tokens_per_second: float


async def _one(client: httpx.AsyncClient, url: str, tokens: int) -> Run:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "go"}],
        "stream": True,
        "max_tokens": tokens,
    }
    count = 0
    started = time.perf_counter()
    first = 0.0
    async with client.stream("POST", f"{url}/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line.startswith("data: {"):
                if not count:
                    first = time.perf_counter() - started
                count += 1
    elapsed = time.perf_counter() - started
    assert count == tokens, count
    return Run(first, count / elapsed)


async def _wait_up(client: httpx.AsyncClient, url: str) -> None:
    for _ in range(400):
        try:
            await client.get(url)
            return
        except httpx.TransportError:
            await asyncio.sleep(0.025)
    raise RuntimeError(f"{url} did not come up")


async def _alternate(
    client: httpx.AsyncClient, engine_url: str, gateway_url: str, tokens: int, rounds: int
) -> tuple[list[Run], list[Run]]:
    direct: list[Run] = []
    through: list[Run] = []
    for i in range(WARMUP + rounds):
        # Alternate which goes first so drift hits both alike.
        order = [(direct, engine_url), (through, gateway_url)]
        if i % 2:
            order.reverse()
        for runs, url in order:
            run = await _one(client, url, tokens)
            if i >= WARMUP:
                runs.append(run)
    return direct, through


async def _measure(engine_url: str, gateway_url: str) -> dict[str, tuple[list[Run], list[Run]]]:
    async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
        await _wait_up(client, f"{engine_url}/models")
        await _wait_up(client, gateway_url.removesuffix("/v1") + "/healthz")
        short = await _alternate(client, engine_url, gateway_url, SHORT_TOKENS, SHORT_ROUNDS)
        long = await _alternate(client, engine_url, gateway_url, TOKENS, ROUNDS)
    return {"short": short, "long": long}


def main() -> None:
    """Run the comparison and print the table."""
    engine_port, gateway_port = _free_port(), _free_port()
    engine = multiprocessing.get_context("spawn").Process(
        target=_engine_process, args=(engine_port,), daemon=True
    )
    engine.start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIGRESS_")}
    env |= {
        "TIGRESS_ENGINE_URL": f"http://127.0.0.1:{engine_port}/v1",
        "TIGRESS_LISTEN": f"127.0.0.1:{gateway_port}",
    }
    gateway = subprocess.Popen(
        [sys.executable, "-m", "gateway"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        results = asyncio.run(
            _measure(f"http://127.0.0.1:{engine_port}/v1", f"http://127.0.0.1:{gateway_port}/v1")
        )
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
        engine.terminate()
        engine.join(timeout=10)

    short_direct, short_through = results["short"]
    long_direct, long_through = results["long"]
    ttft_direct = statistics.median(r.first_token for r in short_direct) * 1000
    ttft_through = statistics.median(r.first_token for r in short_through) * 1000
    tps_direct = statistics.median(r.tokens_per_second for r in long_direct)
    tps_through = statistics.median(r.tokens_per_second for r in long_through)
    ratio = tps_through / tps_direct
    added = ttft_through - ttft_direct
    print("gateway pass-through (Web switch off) vs the engine direct, one run, alternating")
    print(f"{'':36}{'direct':>12}{'gateway':>12}")
    print(
        f"{f'first token, ms ({SHORT_TOKENS}-token answers)':36}"
        f"{ttft_direct:12.2f}{ttft_through:12.2f}"
    )
    print(
        f"{f'tokens per second ({TOKENS}-token answers)':36}{tps_direct:12.0f}{tps_through:12.0f}"
    )
    verdict = "ok" if added <= 2 else "MISSED"
    print(f"added first-token time {added:.2f} ms (target <= 2 ms): {verdict}")
    print(f"throughput ratio {ratio:.2f} (target >= 0.9): {'ok' if ratio >= 0.9 else 'MISSED'}")


if __name__ == "__main__":
    main()
