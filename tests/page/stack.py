"""The servers a browser test talks to, on an asyncio loop in a background thread.

The browser is driven by Selenium, which blocks; the servers are asyncio servers. So the
servers get their own loop in a thread, and the test (plain sync code) reaches them
through `Stack.call` and `Stack.wait`.

The servers are the end-to-end tests' real parts (``tests/support/world.py``): the local
HTTPS origin, the SearXNG stand-in, the fetcher's gRPC service on a Unix socket under the
explicit test Policy, the scripted fake engine and the real gateway with its production
research tools. Besides them a canary HTTP server records every request it gets: hostile
answers point their images, scripts and links at it, and a test asserts it was never
reached.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

import httpx
import trustme

from testkit.engine import MODEL, Data, Pause, chunk
from testkit.engine import Reply as EngineReply
from testkit.origin import Handler, Reply, Request, running_origin
from tests.support.fixtures import policy_for
from tests.support.world import AUTH, Gateway, World, running_gateway, running_world

T = TypeVar("T")

#: Long enough for a loaded machine; waits end as soon as their condition holds.
WAIT = 20.0


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


class Held:
    """An origin page that is not answered until the test lets it go.

    ``asked`` is set when the fetcher asks for it; `Stack.let_go` answers it.
    """

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.asked = asyncio.Event()
        self.go = asyncio.Event()

    async def __call__(self, _: Request) -> Reply:
        self.asked.set()
        await self.go.wait()
        return self.reply


class Stack:
    """Every real part and the canary, served from a background thread.

    Use as ``with Stack(ca) as stack``; ``stack.url`` is the gateway's base URL.
    Keyword arguments change the gateway's settings (``api_keys=()``: no keys).
    """

    def __init__(self, ca: trustme.CA, **settings: Any) -> None:
        self._ca = ca
        self._settings = settings
        self._thread = threading.Thread(target=self._run, name="page-stack", daemon=True)
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.canary = Canary()
        self._world: World | None = None
        self._gateway: Gateway | None = None

    def __enter__(self) -> Stack:
        self._thread.start()
        if not self._ready.wait(WAIT * 2) or self._error is not None:
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
        trust = ssl.create_default_context()
        self._ca.configure_trust(trust)
        async with running_origin(self._ca) as origin:
            policy = policy_for(origin)
            async with (
                running_world(origin, policy, trust) as world,
                self.canary,
                running_gateway(world, **self._settings) as gateway,
            ):
                world.results_on_origin()
                self._world, self._gateway = world, gateway
                self._ready.set()
                await self._stop.wait()

    @property
    def world(self) -> World:
        """The running parts (touch them through `call`: they live on the servers' loop)."""
        assert self._world is not None
        return self._world

    @property
    def gateway(self) -> Gateway:
        """The running gateway."""
        assert self._gateway is not None
        return self._gateway

    @property
    def url(self) -> str:
        """The gateway's base URL."""
        return self.gateway.url

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

    def until(self, condition: Callable[[], bool], what: str) -> None:
        """Wait (on the servers' loop) until ``condition()`` holds there."""

        async def poll() -> None:
            while not condition():
                await asyncio.sleep(0.02)

        try:
            self.wait(poll)
        except TimeoutError:
            raise AssertionError(f"waited {WAIT:.0f} s for {what}") from None

    # --- The engine ---------------------------------------------------------------------

    def script(self, *replies: EngineReply) -> None:
        """Queue the engine's replies to the next chat requests."""
        self.call(self.world.engine.script, *replies)

    def release(self) -> None:
        """Let the engine's paused reply go on."""
        self.call(self.world.engine.release)

    def engine_saw_cancel(self) -> bool:
        """Wait until the engine sees its client close a reply early; False if it never
        does."""
        try:
            self.wait(self.world.engine.closed_early.wait)
        except TimeoutError:
            return False
        return True

    def chats(self) -> list[dict[str, Any]]:
        """The chat request bodies the engine received."""
        return self.call(lambda: list(self.world.engine.chats))

    def stop_engine(self) -> None:
        """Stop the engine: later connections to it are refused."""
        engine = self.world.engine
        self.wait(lambda: engine.__aexit__(None, None, None))

    # --- The origin, SearXNG, the fetcher --------------------------------------------

    def serve(self, path: str, handler: Handler) -> None:
        """Serve ``handler`` at ``path`` on the origin (any of its names)."""
        self.call(self.world.origin.routes.__setitem__, path, handler)

    def hold(self, path: str, reply: Reply) -> Held:
        """Serve ``reply`` at ``path`` only once `let_go` is called."""
        held = self.wait(lambda: _value(Held, reply))  # its events belong to the loop
        self.serve(path, held)
        return held

    def asked(self, held: Held) -> None:
        """Wait until the fetcher asked for the held page."""
        self.wait(held.asked.wait)

    def let_go(self, held: Held) -> None:
        """Answer the held page."""
        self.call(held.go.set)

    def origin_url(self, path: str, host: str = "origin.test") -> str:
        """An address on the origin."""
        return self.world.url(path, host)

    def searches(self) -> list[str]:
        """The queries SearXNG was asked, in order."""
        return self.call(self.world.searxng.searches)

    def fetcher_metric(self, family: str, labels: dict[str, str]) -> float:
        """One counter of the fetcher's metrics."""
        return self.call(self.world.fetcher.metric, family, labels)

    def fetcher_reads_in_flight(self) -> int:
        """Reads the fetcher's service is running now."""
        return self.call(lambda: self.world.fetcher.server.servicer.in_flight)

    def kill_fetcher(self) -> None:
        """Stop the fetcher at once (later reads find nothing listening)."""
        self.wait(self.world.fetcher.kill)

    @contextmanager
    def chat_held_open(self) -> Iterator[None]:
        """Inside the block, a chat of the test's own (Web off) is open on the gateway,
        its engine reply paused after the response head."""
        self.script(EngineReply([Pause(), Data(chunk({}, "stop"))]))
        client = httpx.AsyncClient(timeout=WAIT, trust_env=False)

        async def open_chat() -> httpx.Response:
            request = client.build_request(
                "POST",
                f"{self.gateway.api}/chat/completions",
                json={
                    "model": MODEL,
                    "messages": [{"role": "user", "content": "hold"}],
                    "stream": True,
                },
                headers=AUTH,
            )
            return await client.send(request, stream=True)

        response = self.wait(open_chat)
        try:
            assert response.status_code == 200
            yield
        finally:
            self.release()

            async def close() -> None:
                await response.aclose()
                await client.aclose()

            self.wait(close)

    def gateway_metric(self, family: str, labels: dict[str, str] | None = None) -> float:
        """One sample of the gateway's metrics."""
        return self.call(self.gateway.metric, family, labels)


async def _value(fn: Callable[..., T], *args: Any) -> T:
    return fn(*args)
