"""ASGI responses that stop their work when the client goes away (SPEC 2: a client
that disconnects cancels everything it started)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import TypeVar

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

T = TypeVar("T")

#: Longest wait for cancelled work to wind down before the response gives up on it.
_CLEANUP_SECONDS = 5.0


class ClientGone(Exception):
    """Raised when the client disconnected before the work finished."""


class StreamResponse(Response):
    """Streams ``body`` while watching for the client's disconnect.

    On disconnect the body generator is cancelled (its ``finally`` blocks run: engine
    streams close, tool tasks are cancelled), then ``on_close`` runs, whatever happened.
    """

    def __init__(
        self,
        body: AsyncGenerator[bytes, None],
        *,
        status_code: int = 200,
        media_type: str = "text/event-stream",
        headers: Mapping[str, str] | None = None,
        on_close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        # Response's own __init__ renders a body; this response streams instead.
        self.stream = body
        self.status_code = status_code
        self.media_type = media_type
        self.background = None
        self.init_headers({"cache-control": "no-cache", **(headers or {})})
        self.on_close = on_close
        #: Whether the client went away before the end.
        self.disconnected = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def watch() -> None:
                    while True:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            self.disconnected = True
                            group.cancel_scope.cancel()
                            return

                group.start_soon(watch)
                await send(
                    {
                        "type": "http.response.start",
                        "status": self.status_code,
                        "headers": self.raw_headers,
                    }
                )
                async for chunk in self.stream:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                group.cancel_scope.cancel()
        finally:
            with anyio.move_on_after(_CLEANUP_SECONDS, shield=True):
                await self.stream.aclose()
                if self.on_close is not None:
                    await self.on_close()


async def until_disconnect(request: Request, work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work`` unless the client disconnects first; then cancel it.

    The request body must have been read already (the next message is the disconnect).
    Exceptions of ``work`` propagate unchanged.

    Raises:
        ClientGone: The client disconnected; ``work`` was cancelled.
    """

    async def watch() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                return

    async def run() -> T:
        return await work()

    worker = asyncio.ensure_future(run())
    watcher = asyncio.ensure_future(watch())
    try:
        await asyncio.wait({worker, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not worker.done():
            worker.cancel()
        # asyncio.wait does not pass a cancel of this task on to the two (gather would,
        # cutting their clean-up short).
        await asyncio.wait({watcher, worker})
    if worker.cancelled():
        raise ClientGone
    return worker.result()
