"""Serving an ASGI app with a real uvicorn on 127.0.0.1, port chosen by the kernel."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from starlette.types import ASGIApp


@asynccontextmanager
async def serve(app: ASGIApp, config: uvicorn.Config | None = None) -> AsyncIterator[str]:
    """Run ``app`` (with ``config``, e.g. the gateway's own) until the block ends; yield
    its base URL."""
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say so, and
    # without it Nagle and delayed ACKs add 40 ms to small writes.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    if config is None:
        config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    config.timeout_graceful_shutdown = 2
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                await task
                raise RuntimeError("uvicorn did not start")
            await asyncio.sleep(0.005)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()
