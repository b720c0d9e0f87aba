"""The servers a browser test talks to, on an asyncio loop in a background thread.

The browser is driven by Selenium, which blocks; the gateway and the fake engine are
asyncio servers. So the servers get their own loop in a thread, and the test (plain sync
code) reaches them through `Stack.call` and `Stack.wait`.

What answers the Web switch's tool calls is a `Research` factory: phase A uses the test
tools of `tests/page/research.py`; the real research stack (SearXNG stand-in, fetcher on a
Unix socket, the real tools) plugs in here by passing another factory, with the tests
unchanged except for the URLs their scripted engine calls.

A canary HTTP server records every request it gets: hostile answers point their images,
scripts and links at it, and a test asserts it was never reached.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry

from gateway.app import create_app
from gateway.tools import Tool
from tests.gateway.conftest import make_settings
from tests.gateway.fake_engine import FakeEngine, Reply
from tests.gateway.servers import serve

T = TypeVar("T")

#: Builds the tools offered under the Web switch (and starts whatever they need).
Research = Callable[[], AbstractAsyncContextManager[Sequence[Tool]]]

#: Long enough for a loaded machine; waits end as soon as their condition holds.
WAIT = 20.0


@asynccontextmanager
async def no_research() -> AsyncIterator[Sequence[Tool]]:
    """No tools: the Web switch is refused (400) by the gateway."""
    yield ()


class Canary:
    """An HTTP server on 127.0.0.1 that records the path of every request."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Canary:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            parts = line.decode("latin-1").split()
            self.paths.append(parts[1] if len(parts) > 1 else "?")
            writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
            await writer.drain()
        finally:
            writer.close()


class Stack:
    """A fake engine, a gateway and a canary, served from a background thread.

    Use as ``with Stack(research) as stack``; ``stack.url`` is the gateway's base URL.
    Keyword arguments change the gateway's test settings (``api_keys=()``: no keys).
    """

    def __init__(self, research: Research = no_research, **settings: Any) -> None:
        self._research = research
        self._settings = settings
        self._thread = threading.Thread(target=self._run, name="page-stack", daemon=True)
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.url = ""
        self.engine: FakeEngine | None = None
        self.canary = Canary()

    def __enter__(self) -> Stack:
        self._thread.start()
        if not self._ready.wait(WAIT) or self._error is not None:
            raise RuntimeError("the test servers did not start") from self._error
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(WAIT)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with FakeEngine() as engine, self.canary, self._research() as tools:
            app = create_app(
                make_settings(engine, **self._settings), tools=tools, registry=CollectorRegistry()
            )
            async with serve(app) as url:
                self.engine = engine
                self.url = url
                self._ready.set()
                await self._stop.wait()

    # --- Reaching the servers from the test's thread -----------------------------------

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the servers' loop and return its result."""
        return self.wait(lambda: _value(fn, *args))

    def wait(self, make: Callable[[], Awaitable[T]], timeout: float = WAIT) -> T:
        """Run a coroutine on the servers' loop; its result, or TimeoutError after
        ``timeout`` seconds."""
        assert self._loop is not None

        async def bounded() -> T:
            async with asyncio.timeout(timeout):
                return await make()

        return asyncio.run_coroutine_threadsafe(bounded(), self._loop).result()

    def script(self, *replies: Reply) -> None:
        """Queue the engine's replies to the next chat requests."""
        assert self.engine is not None
        self.call(self.engine.script, *replies)

    def release(self) -> None:
        """Let the engine's paused reply go on."""
        assert self.engine is not None
        self.call(self.engine.release)

    def engine_saw_cancel(self) -> bool:
        """Wait until the engine sees its client close a reply early; False if it never
        does."""
        engine = self.engine
        assert engine is not None
        try:
            self.wait(engine.closed_early.wait)
        except TimeoutError:
            return False
        return True

    def chats(self) -> list[dict[str, Any]]:
        """The chat request bodies the engine received."""
        assert self.engine is not None
        return self.call(lambda: list(self.engine.chats) if self.engine else [])

    def stop_engine(self) -> None:
        """Stop the engine: later connections to it are refused."""
        engine = self.engine
        assert engine is not None
        self.wait(lambda: engine.__aexit__(None, None, None))


async def _value(fn: Callable[..., T], *args: Any) -> T:
    return fn(*args)
