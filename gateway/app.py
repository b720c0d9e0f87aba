"""The gateway's composition root: builds the parts and routes requests (SPEC 2, 4, 9).

`create_app` builds what needs no I/O at once (key checker, limits, metrics, tools) and
the rest in the lifespan (the shared engine HTTP client, model directory, health), into
one `gateway.services.Services` that handlers receive complete. Routes:
``POST /v1/chat/completions`` and ``GET /v1/models`` (behind the key check of
`gateway.access.Access`), ``GET /healthz`` and ``GET /metrics`` (Routes, not Mounts: a
Mount redirects ``/metrics`` to ``/metrics/``). Handlers live in `gateway.handlers`.
"""

from __future__ import annotations

import asyncio
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

from gateway import handlers
from gateway.access import Access, KeyLimits
from gateway.auth import KeyChecker
from gateway.drain import Drain
from gateway.engine import EngineClient
from gateway.health import FetcherProbe, Health, fetcher_not_checked
from gateway.loop import FilterFactory, RequiredMemory, default_filter
from gateway.metrics import GatewayMetrics
from gateway.models import ModelDirectory
from gateway.services import ChatSlots, Services
from gateway.settings import Settings
from gateway.tools import Tool, ToolBox

__all__ = ["FetcherProbe", "create_app", "fetcher_not_checked"]

log = logging.getLogger("gateway")

Handler = Callable[[Request, Services], Awaitable[ASGIApp]]

#: Connections of the shared httpx client (model look-ups and health probes only).
_LOOKUP_CONNECTIONS = 64


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


async def _report_engines(health: Health) -> None:
    """Say at start-up which engines are configured and whether they answer."""
    answer = await health.check()
    for engine in answer["engines"]:
        state = "answers" if engine["ok"] else "does not answer"
        log.info("engine %s %s", engine["engine"], state)


def create_app(
    settings: Settings,
    *,
    tools: Iterable[Tool] = (),
    http_client: httpx.AsyncClient | None = None,
    registry: CollectorRegistry | None = None,
    filter_factory: FilterFactory = default_filter,
    fetcher_probe: FetcherProbe = fetcher_not_checked,
    drain: Drain | None = None,
    metrics: GatewayMetrics | None = None,
) -> Starlette:
    """Build the gateway application.

    Args:
        settings: Checked settings.
        tools: Tools offered under the Web switch.
        http_client: The shared engine client (built here, with the settings' timeouts,
            when not given; a given one is not closed here).
        registry: Prometheus registry (a fresh one by default, so apps do not collide).
        filter_factory: Builds the text-tool-call filter of each round.
        fetcher_probe: The fetcher's part of ``/healthz``.
        drain: The shutdown state `gateway.serving.GatewayServer` starts at SIGTERM.
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
    toolbox = ToolBox(tools)
    drain = drain if drain is not None else Drain()

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
                    # their own connections: gateway.engine_http).
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
            health = Health(models, fetcher_probe, cache_seconds=timeouts.health_cache)
            services = Services(
                settings=settings,
                metrics=metrics,
                engines=engines,
                models=models,
                health=health,
                tools=toolbox,
                filter_factory=filter_factory,
                memory=RequiredMemory(),
                slots=ChatSlots(limits.max_chats),
                key_limits=key_limits,
                drain=drain,
            )
            for engine in settings.engines:
                log.info("engine %s configured", engine.label)
            report = asyncio.create_task(_report_engines(health))
            try:
                yield {"services": services}
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
        ],
        middleware=[
            Middleware(
                Access, keys=KeyChecker(settings.api_keys), limits=key_limits, metrics=metrics
            )
        ],
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
