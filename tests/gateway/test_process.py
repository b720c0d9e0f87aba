"""``python -m gateway`` as a real process: graceful drain and exit status (issue 12,
item 5), what operators see in the log (issue 8, finding 8), the descriptor limit
(finding 6)."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from testkit.engine import Data, FakeEngine, Pause, Reply, Stall, chunk, text_reply
from tests.gateway.http.test_app import content_of, events_of

BODY = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Gateway:
    process: asyncio.subprocess.Process
    url: str
    port: int
    lines: list[str] = field(default_factory=list)

    def logged(self, text: str) -> bool:
        return any(text in line for line in self.lines)


@asynccontextmanager
async def gateway(
    tmp_path: Path, config: str, *, fd_limit: int | None = None
) -> AsyncIterator[Gateway]:
    port = free_port()
    path = tmp_path / "tigress.toml"
    path.write_text(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIGRESS_")}
    env |= {
        "TIGRESS_CONFIG": str(path),
        "TIGRESS_LISTEN": f"127.0.0.1:{port}",
        "TIGRESS_FETCHER": f"unix:{tmp_path / 'none.sock'}",
    }

    def limit() -> None:
        if fd_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=limit,
    )
    running = Gateway(process, f"http://127.0.0.1:{port}", port)

    async def read() -> None:
        assert process.stderr is not None
        async for line in process.stderr:
            running.lines.append(line.decode(errors="replace"))

    reader = asyncio.create_task(read())
    try:
        async with asyncio.timeout(30), httpx.AsyncClient(trust_env=False) as http:
            while True:
                with suppress(httpx.TransportError):
                    await http.get(f"{running.url}/healthz")
                    break
                await asyncio.sleep(0.05)
        yield running
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        await asyncio.wait_for(reader, 10)


def config_for(engine: FakeEngine, extra: str = "") -> str:
    return (
        f'engine_url = "{engine.url}"\n{extra}\n'
        "[timeouts]\nshutdown_grace = 1\nkeepalive = 0.2\nhealth_cache = 0.1\n"
    )


async def test_sigterm_cuts_a_long_answer_after_the_grace_period_then_exits_0(
    engine: FakeEngine, tmp_path: Path
) -> None:
    engine.script(Reply([Data(chunk({"content": "a"})), Stall()]))
    async with (
        gateway(tmp_path, config_for(engine)) as running,
        httpx.AsyncClient(timeout=30, trust_env=False) as http,
        http.stream("POST", f"{running.url}/v1/chat/completions", json=BODY) as response,
    ):
        seen = ""
        signalled = False
        async for text in response.aiter_text():
            seen += text
            if '"a"' in seen and not signalled:
                signalled = True
                running.process.send_signal(signal.SIGTERM)
        status = await asyncio.wait_for(running.process.wait(), 30)
    events = events_of(seen)
    assert content_of(events) == "a"
    assert events[-2]["error"]["code"] == "shutting_down"
    assert events[-1] == "[DONE]"
    assert status == 0


async def test_sigterm_lets_an_answer_finish_within_the_grace_period(
    engine: FakeEngine, tmp_path: Path
) -> None:
    engine.script(Reply([Data(chunk({"content": "a"})), Pause(), Data(chunk({"content": "b"}))]))
    config = config_for(engine).replace("shutdown_grace = 1", "shutdown_grace = 30")
    async with (
        gateway(tmp_path, config) as running,
        httpx.AsyncClient(timeout=30, trust_env=False) as http,
        http.stream("POST", f"{running.url}/v1/chat/completions", json=BODY) as response,
    ):
        seen = ""
        signalled = False
        async for text in response.aiter_text():
            seen += text
            if '"a"' in seen and not signalled:
                signalled = True
                running.process.send_signal(signal.SIGTERM)
                # The drain began once the listener is closed; then the engine goes on.
                async with asyncio.timeout(20):
                    while True:
                        try:
                            _, probe = await asyncio.open_connection("127.0.0.1", running.port)
                        except OSError:
                            break
                        probe.close()
                        await asyncio.sleep(0.02)
                engine.release()
        status = await asyncio.wait_for(running.process.wait(), 30)
    events = events_of(seen)
    assert content_of(events) == "ab"
    assert not any(isinstance(e, dict) and "error" in e for e in events)
    assert status == 0


async def test_operators_see_engines_at_start_up_and_failures_without_request_noise(
    engine: FakeEngine, tmp_path: Path
) -> None:
    dead = "http://127.0.0.1:9/v1"
    extra = f'[[engines]]\nurl = "{dead}"\nmodels = ["dead-model"]\n'
    engine.script(text_reply("ok"))
    async with (
        gateway(tmp_path, config_for(engine, extra)) as running,
        httpx.AsyncClient(timeout=30, trust_env=False) as http,
    ):
        ok = await http.post(f"{running.url}/v1/chat/completions", json=BODY)
        failed = await http.post(
            f"{running.url}/v1/chat/completions", json=BODY | {"model": "dead-model"}
        )
        async with asyncio.timeout(20):
            while not running.logged(f"engine {dead} failed"):
                await asyncio.sleep(0.05)
        running.process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(running.process.wait(), 30)
    assert ok.status_code == 200
    assert failed.status_code == 502
    assert running.logged(f"engine {engine.url} answers")
    # A part that does not answer gets one warning with its own sentence (no "does not
    # answer" line beside it, which would contradict "answers, but not as an engine").
    assert running.logged(f"WARNING gateway: engine {dead}: The model engine")
    assert not running.logged(f"engine {dead} does not answer")
    assert not running.logged("HTTP Request:")


async def test_at_the_descriptor_limit_the_gateway_keeps_serving_without_a_log_flood(
    engine: FakeEngine, tmp_path: Path
) -> None:
    extra = "[limits]\nmax_connections = 1000\n"
    async with gateway(tmp_path, config_for(engine, extra), fd_limit=128) as running:
        held = []
        for _ in range(200):
            with suppress(OSError):
                held.append(await asyncio.open_connection("127.0.0.1", running.port))
        refused = 0
        for reader, _ in held[-20:]:
            answer = await asyncio.wait_for(reader.read(), 10)
            refused += answer.startswith(b"HTTP/1.1 503")
        for _, writer in held:
            writer.close()
        async with httpx.AsyncClient(timeout=10, trust_env=False) as http:
            health = await http.get(f"{running.url}/healthz")
        running.process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(running.process.wait(), 30)
    assert refused == 20
    assert health.status_code == 200
    assert json.loads(health.text)["engines"][0]["ok"] is True
    assert running.logged("max_connections lowered to 32")
    assert len(running.lines) < 30
