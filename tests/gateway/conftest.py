"""Fixtures for the gateway tests: a fake engine, test tools, a gateway on uvicorn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from gateway.app import FetcherProbe, SearxngProbe, create_app, not_checked
from gateway.http.serving import uvicorn_config
from gateway.loop.tooltext.filter import FilterOutput
from gateway.loop.turn import FilterFactory, default_filter
from gateway.metrics import GatewayMetrics
from gateway.settings import EngineSettings, Settings, Timeouts
from gateway.tools.base import Tool, ToolContext, ToolItem, ToolOutcome, ToolResult
from gateway.tools.events import Searched
from gateway.tools.ledger import SEARCHES, BudgetKind, Found
from testkit.engine import FakeEngine
from tests.gateway.servers import serve

KEY = "test-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}"}
#: A POST body's type (SPEC 2: anything else is 415); httpx adds it for ``json=`` only.
JSON = {"Content-Type": "application/json"}

#: Small timeouts so failure paths finish fast; keepalive long enough that a turn's first
#: output (or error) comes before streaming starts.
TEST_TIMEOUTS = Timeouts(
    engine_connect=2.0, engine_read=5.0, tool=5.0, keepalive=2.0, models_cache=60.0
)


class PlainFilter:
    """A filter that finds no calls: loop tests about structured calls stay independent
    of the text filter's rules."""

    def __init__(self, tools: Sequence[Mapping[str, Any]]) -> None:
        self.tools = tools

    def feed(self, chunk: str) -> FilterOutput:
        return FilterOutput(chunk, [], 0)

    def close(self) -> FilterOutput:
        return FilterOutput("", [], 0)


def search_schema(name: str = "web_search") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": "Search the web.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "queries": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["query"],
            },
        },
    }


class FakeSearch:
    """A search tool: numbers one source per query, spends one search per query."""

    subject = "query"
    folded = frozenset({"query", "queries"})
    budget: BudgetKind | None = SEARCHES

    def __init__(self, name: str = "web_search") -> None:
        self._name = name
        self.calls: list[dict[str, Any]] = []
        self.running = 0
        self.max_running = 0
        #: When set, calls wait for it; it opens once ``open_at`` calls run together.
        self.gate: asyncio.Event | None = None
        self.open_at = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def schema(self) -> dict[str, Any]:
        return search_schema(self._name)

    async def run(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> AsyncGenerator[ToolItem, None]:
        self.calls.append(dict(arguments))
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            if self.gate is not None:
                if self.running >= self.open_at:
                    self.gate.set()
                await self.gate.wait()
            query = str(arguments["query"])
            if not context.budgets.take(SEARCHES, 1):
                yield ToolResult("The search budget is spent.", outcome=ToolOutcome.REFUSED)
                return
            slug = "-".join(query.split())
            n = context.ledger.add(
                f"https://example.org/{slug}", f"About {query}", found=Found.SEARCH
            )
            yield Searched(queries=(query,), results=1)
            yield ToolResult(f"[{n}] About {query} — https://example.org/{slug}")
        finally:
            self.running -= 1


class BlockingTool:
    """A tool that waits until cancelled, and says so."""

    subject = None
    folded: frozenset[str] = frozenset()
    budget: BudgetKind | None = None

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    @property
    def name(self) -> str:
        return "slow"

    @property
    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": "slow",
                "description": "Takes forever.",
                "parameters": {"type": "object", "properties": {}},
            },
        }

    async def run(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> AsyncGenerator[ToolItem, None]:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        yield ToolResult("never")


def make_settings(engine: FakeEngine, **changes: Any) -> Settings:
    settings = Settings(
        engines=(EngineSettings(engine.url),), api_keys=(KEY,), timeouts=TEST_TIMEOUTS
    )
    return replace(settings, **changes)


@pytest.fixture
async def engine() -> AsyncIterator[FakeEngine]:
    async with FakeEngine() as fake:
        yield fake


GatewayFactory = Callable[..., AbstractAsyncContextManager[str]]


@pytest.fixture
def gateway_at(engine: FakeEngine) -> GatewayFactory:
    """``async with gateway_at(tools=[...]) as url``: a gateway on uvicorn."""

    @asynccontextmanager
    async def start(
        tools: Iterable[Tool] = (),
        settings: Settings | None = None,
        registry: CollectorRegistry | None = None,
        filters: FilterFactory | None = None,
        fetcher_probe: FetcherProbe = not_checked,
        searxng_probe: SearxngProbe = not_checked,
    ) -> AsyncIterator[str]:
        settings = settings or make_settings(engine)
        metrics = GatewayMetrics(registry if registry is not None else CollectorRegistry())
        app = create_app(
            settings,
            tools=tools,
            metrics=metrics,
            filter_factory=filters or default_filter,
            fetcher_probe=fetcher_probe,
            searxng_probe=searxng_probe,
        )
        config = uvicorn_config(app, settings, metrics, log_level="warning")
        async with serve(app, config) as url:
            yield url

    return start


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=10, trust_env=False) as client:
        yield client


CHATS = "/v1/chat/completions"


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Wait for a condition the server settles after the client already has its answer."""
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.01)


def outcome(registry: CollectorRegistry, mode: str, result: str) -> float:
    return sample(registry, "tigress_gateway_chat_requests_total", mode=mode, outcome=result)


async def post_chat(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> httpx.Response:
    """POST one chat with the test key."""
    return await http.post(f"{url}{CHATS}", json=body, headers=AUTH)
