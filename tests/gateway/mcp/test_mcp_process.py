"""``python -m gateway`` with an MCP client connected: SIGTERM still ends the process, and
the session with it."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path

import httpx

from testkit.engine import FakeEngine
from tests.e2e.mcp_client import RawSession, sse_messages
from tests.gateway.test_process import config_for, gateway


async def test_sigterm_ends_the_process_and_its_open_mcp_sessions(
    engine: FakeEngine, tmp_path: Path
) -> None:
    async with (
        gateway(tmp_path, config_for(engine)) as running,
        httpx.AsyncClient(timeout=30, trust_env=False) as http,
    ):
        raw = RawSession(http, running.url, {})
        assert (await raw.initialize()).status_code == 200
        # The session's stream for server messages stays open, as clients keep it.
        async with http.stream("GET", raw.endpoint, headers=raw.session_headers()) as stream:
            assert stream.status_code == 200
            running.process.send_signal(signal.SIGTERM)
            # The stream ends (sse-starlette, under the SDK, ends every event stream when
            # uvicorn begins its shutdown), so it does not hold the shutdown.
            body = b""
            with contextlib.suppress(httpx.RemoteProtocolError):
                async for part in stream.aiter_raw():
                    body += part
        import time

        t0 = time.monotonic()
        status = await asyncio.wait_for(running.process.wait(), 30)
        print("exit after", time.monotonic() - t0)
    print("".join(running.lines))
    assert sse_messages(body.decode()) == []
    assert status == 0
    assert running.logged("ending 1 mcp sessions (shutdown)")
    assert not running.logged("Traceback")
