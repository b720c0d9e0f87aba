"""The gateway's composition root: builds the parts and routes requests (SPEC 2, 4, 9).

`create_app` builds what needs no I/O at once (key checker, limits, metrics) and the rest
in the lifespan (the shared engine HTTP client, model directory, the SearXNG client on its
own HTTP client, one fetcher client per target, the research tools on them, health, the
MCP endpoint on the same tools), into one `gateway.http.services.Services` that handlers
receive complete; the lifespan closes every client it built. Routes:
``POST /v1/chat/completions`` and ``GET /v1/models`` (behind the key check of
`gateway.http.access.Access`), ``/mcp`` (the research tools over MCP, `gateway.mcp.http`:
behind the Origin check of `gateway.mcp.http.McpOriginGuard` and the same key check),
``GET /healthz`` and ``GET /metrics`` (Routes, not Mounts: a Mount redirects ``/metrics``
to ``/metrics/``), every one behind the browser rules of `gateway.http.access.BrowserGuard`.
Handlers live in `gateway.http.handlers`.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from fetcher.client import DEFAULT_TIMEOUT as FETCH_TIMEOUT
from fetcher.client import FetcherClient
from gateway.engine.client import EngineClient
from gateway.engine.models import ModelDirectory
from gateway.http import handlers
from gateway.http.access import CHAT_PATH, MCP_PATH, Access, BrowserGuard, KeyLimits
from gateway.http.auth import KeyChecker
from gateway.http.browsers import TrustedProxies
from gateway.http.fetcher_health import FetcherHealth
from gateway.http.health import (
    FetcherProbe,
    Health,
    NotChecked,
    SearxngProbe,
    fetcher_not_checked,
    not_checked,
    searxng_says,
    target_says,
)
from gateway.http.origin import OriginPolicy
from gateway.http.page import page_routes
from gateway.http.request_id import RequestIds
from gateway.http.services import ChatSlots, Services
from gateway.loop.turn import FilterFactory, RequiredMemory, default_filter
from gateway.mcp.http import McpEndpoint, McpOriginGuard
from gateway.mcp.sessions import McpSessions
from gateway.mcp.tools import McpTools
from gateway.metrics import GatewayMetrics
from gateway.settings import Settings
from gateway.stream.drain import Drain
from gateway.tools.base import Tool, ToolBox
from gateway.tools.fetch import rules as fetch_rules
from gateway.tools.research import FetchPages, WebSearch, fit_inside
from gateway.tools.search import searxng as searxng_client

__all__ = [
    "FetcherProbe",
    "SearxngProbe",
    "create_app",
    "fetcher_not_checked",
    "not_checked",
]

log = logging.getLogger("gateway")

Handler = Callable[[Request, Services], Awaitable[ASGIApp]]

#: Connections of the shared httpx client (model look-ups and health probes only).
_LOOKUP_CONNECTIONS = 64
#: Most connections to SearXNG at once (a search waits for a free one beyond this).
_SEARXNG_CONNECTIONS = 128


class _Endpoint:
    """An ASGI endpoint calling a handler with the lifespan's services (a class, so
    Starlette routes to it as an ASGI app)."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        services = scope["state"]["services"]
        assert isinstance(services, Services)
        response = await self._handler(Request(scope, receive), services)
        await response(scope, receive, send)


class _McpRoute:
    """The ``/mcp`` route: the lifespan's MCP endpoint (built on the lifespan's tools)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        mcp = scope["state"]["mcp"]
        assert isinstance(mcp, McpEndpoint)
        await mcp(scope, receive, send)


async def _report(health: Health, settings: Settings) -> None:
    """Say at start-up where the gateway listens and whether the engines, SearXNG and the
    fetcher answer: a line for a part that does, a warning with the part's own sentence
    (what is wrong, what to do) for one that does not."""
    answer = await health.check()
    for engine in answer.engines:
        if engine.ok:
            log.info("engine %s answers", engine.engine)
        else:
            log.warning("engine %s: %s", engine.engine, engine.says)
    searxng = answer.searxng
    if isinstance(searxng, NotChecked):
        log.info("SearXNG at %s is not checked", settings.searxng_url)
    elif searxng.ok:
        log.info("SearXNG at %s answers", settings.searxng_url)
    else:
        log.warning("SearXNG: %s", searxng_says(searxng))
    fetcher = answer.fetcher
    if isinstance(fetcher, NotChecked):
        log.info("fetcher is not checked")
    else:
        for target in fetcher.targets:
            if target.ok:
                log.info("fetcher at %s answers", target.target)
            else:
                log.warning("fetcher at %s: %s", target.target, target_says(target))
    host = f"[{settings.listen_host}]" if ":" in settings.listen_host else settings.listen_host
    base = f"http://{host}:{settings.listen_port}"
    log.info(
        "ready: the chat page at %s/ (API at %s/v1, health at %s/healthz; answers from the "
        "Web switch need the engine, SearXNG and the fetcher)",
        base,
        base,
        base,
    )


def create_app(
    settings: Settings,
    *,
    tools: Iterable[Tool] | None = None,
    http_client: httpx.AsyncClient | None = None,
    registry: CollectorRegistry | None = None,
    filter_factory: FilterFactory = default_filter,
    fetcher_probe: FetcherProbe | None = None,
    searxng_probe: SearxngProbe | None = None,
    drain: Drain | None = None,
    metrics: GatewayMetrics | None = None,
) -> Starlette:
    """Build the gateway application.

    Args:
        settings: Checked settings.
        tools: Tools offered under the Web switch; by default the research tools
            (`gateway.tools.research`) on SearXNG and the fetchers of ``settings``.
        http_client: The shared engine client (built here, with the settings' timeouts,
            when not given; a given one is not closed here).
        registry: Prometheus registry (a fresh one by default, so apps do not collide).
        filter_factory: Builds the text-tool-call filter of each round.
        fetcher_probe: The fetcher's part of ``/healthz`` (by default the health service
            of every fetcher target).
        searxng_probe: SearXNG's part of ``/healthz`` (by default its ``/healthz``).
        drain: The shutdown state `gateway.http.uvicorn_seam.GatewayServer` starts at SIGTERM.
        metrics: The metric families (built on ``registry`` when not given; the server's
            connection guard shares them).
    """
    if metrics is None:
        metrics = GatewayMetrics(registry if registry is not None else CollectorRegistry())
    limits = settings.limits
    key_limits = KeyLimits(
        chats_per_key=limits.chats_per_key,
        requests_per_minute=limits.requests_per_minute_per_key,
    )
    drain = drain if drain is not None else Drain()
    given_tools = None if tools is None else tuple(tools)
    slots = ChatSlots(limits.max_chats)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[dict[str, Any]]:
        timeouts = settings.timeouts
        async with AsyncExitStack() as stack:
            http = http_client
            if http is None:
                http = httpx.AsyncClient(
                    timeout=httpx.Timeout(
                        connect=timeouts.engine_connect,
                        read=timeouts.engine_read,
                        write=timeouts.engine_connect,
                        pool=timeouts.engine_connect,
                    ),
                    # Only model look-ups and health probes use this client (chats have
                    # their own connections: gateway.engine.http).
                    limits=httpx.Limits(max_connections=_LOOKUP_CONNECTIONS),
                    # Proxy variables must not reroute engine traffic.
                    trust_env=False,
                )
                await stack.enter_async_context(http)
            engines = EngineClient(
                http, connect_timeout=timeouts.engine_connect, read_timeout=timeouts.engine_read
            )
            stack.callback(engines.close)
            models = ModelDirectory(
                settings.engines,
                engines,
                cache_seconds=timeouts.models_cache,
                failure_seconds=timeouts.models_failure_cache,
                probe_seconds=timeouts.engine_connect,
            )
            stack.push_async_callback(models.aclose)
            # The research clients: SearXNG on its own HTTP client (no redirects, no proxy
            # variables), one channel per fetcher target. Deadlines end before the loop's
            # tool timeout, so a slow part ends in its own clear tool result.
            search_timeout = fit_inside(timeouts.searxng, timeouts.tool)
            fetch_deadline = fit_inside(FETCH_TIMEOUT, timeouts.tool)
            searxng_http = await stack.enter_async_context(
                searxng_client.http_client(
                    timeout=search_timeout,
                    max_connections=min(limits.max_chats, _SEARXNG_CONNECTIONS),
                )
            )
            searxng = searxng_client.SearxngClient(
                searxng_http,
                settings.searxng_url,
                results_per_query=settings.searxng_results,
                timeout=search_timeout,
                lists=settings.source_lists,
                categories=settings.searxng_categories,
                language=settings.searxng_language,
                engines=settings.searxng_engines,
            )
            fetchers = [
                FetcherClient(target, timeout=fetch_deadline) for target in settings.fetcher
            ]
            for fetcher in fetchers:
                stack.push_async_callback(fetcher.close)
            toolbox = ToolBox(
                given_tools
                if given_tools is not None
                else (
                    WebSearch(searxng, metrics=metrics),
                    FetchPages(fetchers, deadline=fetch_deadline),
                )
            )
            mcp = _mcp_endpoint(settings, toolbox, metrics, slots, key_limits, drain)
            await stack.enter_async_context(mcp.running())
            health = Health(
                models,
                fetcher_probe if fetcher_probe is not None else FetcherHealth(fetchers),
                searxng_probe if searxng_probe is not None else searxng.probe,
                cache_seconds=timeouts.health_cache,
            )
            services = Services(
                settings=settings,
                metrics=metrics,
                engines=engines,
                models=models,
                health=health,
                tools=toolbox,
                filter_factory=filter_factory,
                memory=RequiredMemory(),
                slots=slots,
                key_limits=key_limits,
                drain=drain,
            )
            for engine in settings.engines:
                log.info("engine %s configured", engine.label)
            report = asyncio.create_task(_report(health, settings))
            try:
                yield {"services": services, "mcp": mcp}
            finally:
                report.cancel()
                await asyncio.wait({report})

    async def http_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        body = handlers.not_found_body(str(exc.detail))
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    return Starlette(
        routes=[
            Route("/v1/chat/completions", _Endpoint(handlers.chat_completions), methods=["POST"]),
            Route("/v1/models", _Endpoint(handlers.list_models), methods=["GET"]),
            Route("/healthz", _Endpoint(handlers.healthz), methods=["GET"]),
            Route("/metrics", _Endpoint(handlers.metrics), methods=["GET"]),
            *page_routes(),
            # Every method: the transport uses POST, GET and DELETE, and answers the rest.
            Route(MCP_PATH, _McpRoute()),
        ],
        middleware=[
            Middleware(RequestIds, paths=frozenset({CHAT_PATH, MCP_PATH})),
            Middleware(
                BrowserGuard,
                keyless=not settings.api_keys,
                allowed=OriginPolicy.of(settings.allowed_origins),
                proxies=TrustedProxies.of(settings.trusted_proxies),
                metrics=metrics,
            ),
            Middleware(
                McpOriginGuard,
                policy=OriginPolicy.of(settings.mcp.allowed_origins),
                metrics=metrics,
            ),
            Middleware(
                Access, keys=KeyChecker(settings.api_keys), limits=key_limits, metrics=metrics
            ),
        ],
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )


def _mcp_endpoint(
    settings: Settings,
    tools: ToolBox,
    metrics: GatewayMetrics,
    slots: ChatSlots,
    key_limits: KeyLimits,
    drain: Drain,
) -> McpEndpoint:
    """The research tools over MCP: the chat loop's tool objects, one ledger and one budget
    counter per session."""
    sessions = McpSessions(
        per_key=settings.mcp.sessions_per_key,
        max_sessions=settings.mcp.max_sessions,
        idle=settings.mcp.session_idle,
        budgets=settings.budgets,
        kinds=tools.budgets(),
        per_client=settings.mcp.sessions_per_client,
    )
    server = McpTools(
        tools,
        sessions,
        # Over MCP no user messages reach the gateway: rule 1 allows only the session's
        # search results, and the fetch tool says so.
        schemas={fetch_rules.NAME: fetch_rules.MCP_SCHEMA},
        tool_timeout=settings.timeouts.tool,
        metrics=metrics,
        slots=slots,
        key_limits=key_limits,
        drain=drain,
        version=_version(),
    )
    return McpEndpoint(
        server, sessions, metrics=metrics, drain=drain, max_body_bytes=settings.max_body_bytes
    )


def _version() -> str:
    try:
        return importlib.metadata.version("tigress")
    except importlib.metadata.PackageNotFoundError:
        return ""
