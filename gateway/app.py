"""The gateway's composition root and HTTP routes (SPEC 2, 4, 9).

`create_app` builds the real engine client, model directory, metrics and tools from
`gateway.settings.Settings`; tests pass their own tools, registry and filter. Routes:
``POST /v1/chat/completions``, ``GET /v1/models`` (both need the key), ``GET /healthz``
and ``GET /metrics`` (a Route, not a Mount: a Mount redirects ``/metrics`` to
``/metrics/``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway import sse
from gateway.auth import KeyChecker
from gateway.chat import TurnStats, TurnStream, complete_turn
from gateway.engine import EngineClient, engine_errors
from gateway.errors import BodyTooLargeError, EngineError, GatewayError, RequestError
from gateway.loop import ChatTurn, FilterFactory, LoopOptions, default_filter
from gateway.metrics import GatewayMetrics
from gateway.models import ModelDirectory
from gateway.page import page_routes
from gateway.proxy import relay
from gateway.request import ChatRequest, parse_chat_request
from gateway.responses import ClientGone, StreamResponse, until_disconnect
from gateway.rounds import RequiredSupport
from gateway.settings import EngineSettings, Settings
from gateway.tools import Tool, ToolBox

log = logging.getLogger(__name__)

#: The fetcher's part of /healthz (``gateway.fetcher_health.FetcherHealth`` in production).
FetcherProbe = Callable[[], Awaitable[dict[str, Any]]]


async def fetcher_not_checked() -> dict[str, Any]:
    """For apps built without a fetcher probe (tests of other parts): says so plainly."""
    return {"checked": False, "ok": None, "detail": "not checked"}


@dataclass
class _State:
    settings: Settings
    keys: KeyChecker
    metrics: GatewayMetrics
    tools: ToolBox
    filter_factory: FilterFactory
    fetcher_probe: FetcherProbe
    #: What each engine does with tool_choice "required", by engine URL.
    required: dict[str, RequiredSupport] = field(default_factory=dict)
    http: httpx.AsyncClient | None = None
    engines: EngineClient | None = None
    models: ModelDirectory | None = None


def _error(exc: GatewayError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return JSONResponse(exc.body(), status_code=exc.status, headers=headers)


async def _read_body(request: Request, limit: int) -> bytes:
    """The request body, refused as soon as it passes ``limit`` bytes (never buffered whole
    first)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLargeError(f"The request body is larger than {limit} bytes.")
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise BodyTooLargeError(f"The request body is larger than {limit} bytes.")
        parts.append(part)
    return b"".join(parts)


def create_app(
    settings: Settings,
    *,
    tools: Iterable[Tool] = (),
    http_client: httpx.AsyncClient | None = None,
    registry: CollectorRegistry | None = None,
    filter_factory: FilterFactory = default_filter,
    fetcher_probe: FetcherProbe = fetcher_not_checked,
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
    """
    state = _State(
        settings=settings,
        keys=KeyChecker(settings.api_keys),
        metrics=GatewayMetrics(registry if registry is not None else CollectorRegistry()),
        tools=ToolBox(tools),
        filter_factory=filter_factory,
        fetcher_probe=fetcher_probe,
    )

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
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
                    limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
                    # Proxy variables must not reroute engine traffic.
                    trust_env=False,
                )
                await stack.enter_async_context(http)
            state.http = http
            state.engines = EngineClient(http)
            state.models = ModelDirectory(
                settings.engines,
                state.engines,
                cache_seconds=timeouts.models_cache,
                probe_seconds=timeouts.engine_connect,
            )
            yield

    async def chat_completions(request: Request) -> Response:
        return await _chat(state, request)

    async def list_models(request: Request) -> Response:
        try:
            state.keys.check(request.headers.get("authorization"))
            assert state.models is not None
            entries, errors = await state.models.entries()
            if not entries and errors:
                raise errors[0]
        except GatewayError as exc:
            return _error(exc)
        data = [
            {"id": e.model, "object": "model", "created": 0, "owned_by": "tigress"} for e in entries
        ]
        return JSONResponse({"object": "list", "data": data})

    async def healthz(_: Request) -> Response:
        assert state.models is not None
        probes = await state.models.probe()
        engines = [{"engine": i, "ok": ok} for i, (_, ok) in enumerate(probes)]
        fetcher = await state.fetcher_probe()
        healthy = all(ok for _, ok in probes) and fetcher.get("ok") is not False
        return JSONResponse(
            {"status": "ok" if healthy else "degraded", "engines": engines, "fetcher": fetcher}
        )

    async def metrics(_: Request) -> Response:
        return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    async def http_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        body = {"error": {"message": exc.detail, "type": "invalid_request_error", "code": None}}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            *page_routes(),
        ],
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
    app.state.gateway = state
    return app


async def _chat(state: _State, request: Request) -> Response:
    metrics = state.metrics
    started = time.monotonic()
    metrics.inflight.inc()
    settled = False

    def settle(mode: str, outcome: str) -> None:
        nonlocal settled
        if not settled:
            settled = True
            metrics.inflight.dec()
            metrics.chat_requests.labels(mode, outcome).inc()

    try:
        state.keys.check(request.headers.get("authorization"))
        chat = parse_chat_request(await _read_body(request, state.settings.max_body_bytes))
        assert state.models is not None
        engine = await state.models.resolve(chat.model)
    except EngineError as exc:
        metrics.engine_errors.labels(exc.kind).inc()
        settle("none", _outcome(exc))
        return _error(exc)
    except GatewayError as exc:
        settle("none", "rejected")
        return _error(exc)
    mode = "web" if chat.web else "proxy"
    stats = TurnStats(metrics, mode, started)

    async def closed(disconnected: Callable[[], bool]) -> None:
        if disconnected():
            settle(mode, "client_closed")
        elif stats.error is not None:
            settle(mode, _outcome(stats.error))
        else:
            settle(mode, "ok")

    try:
        if chat.web:
            response = await _web(state, request, chat, engine, stats, closed)
        else:
            response = await _proxy(state, request, chat, engine, stats, closed)
    except ClientGone:
        settle(mode, "client_closed")
        return Response(status_code=499)
    except GatewayError as exc:
        if stats.error is not exc:
            stats.fail(exc)
        settle(mode, _outcome(exc))
        return _error(exc)
    except BaseException:
        settle(mode, "client_closed")
        raise
    if not isinstance(response, StreamResponse):
        await closed(lambda: False)
    return response


def _outcome(exc: GatewayError) -> str:
    if isinstance(exc, EngineError):
        return "timeout" if exc.status == 504 else "engine_error"
    return "rejected" if isinstance(exc, RequestError) else "engine_error"


Closer = Callable[[Callable[[], bool]], Awaitable[None]]


async def _web(
    state: _State,
    request: Request,
    chat: ChatRequest,
    engine: EngineSettings,
    stats: TurnStats,
    closed: Closer,
) -> Response:
    assert state.engines is not None
    if not state.tools:
        raise RequestError("The Web switch is not available: no tools are configured.")
    settings = state.settings
    turn = ChatTurn(
        client=state.engines,
        engine=engine,
        body=chat.body,
        tools=state.tools,
        memory=state.required,
        options=LoopOptions(budgets=settings.budgets, tool_timeout=settings.timeouts.tool),
        metrics=state.metrics,
        filter_factory=state.filter_factory,
    )
    writer = sse.ChunkWriter(chat.model)
    if not chat.stream:
        return JSONResponse(
            await until_disconnect(request, lambda: complete_turn(turn, writer, stats))
        )
    stream = TurnStream(
        turn,
        writer,
        stats,
        include_usage=chat.include_usage,
        keepalive=settings.timeouts.keepalive,
    )
    try:
        error = await until_disconnect(request, lambda: stream.first(settings.timeouts.keepalive))
    except BaseException:
        await stream.cancel()
        raise
    if error is not None:
        await stream.cancel()
        raise error
    response = StreamResponse(stream.body())

    async def close() -> None:
        await stream.cancel()
        await closed(lambda: response.disconnected)

    response.on_close = close
    return response


async def _proxy(
    state: _State,
    request: Request,
    chat: ChatRequest,
    engine: EngineSettings,
    stats: TurnStats,
    closed: Closer,
) -> Response:
    assert state.engines is not None
    engines = state.engines
    stack = AsyncExitStack()

    async def open_engine() -> httpx.Response:
        return await stack.enter_async_context(
            engines.open(engine, "/chat/completions", chat.engine_body())
        )

    async def read_all(upstream: httpx.Response) -> bytes:
        with engine_errors():
            return await upstream.aread()

    try:
        upstream = await until_disconnect(request, open_engine)
        content_type = upstream.headers.get("content-type", "application/json")
        streaming = upstream.status_code < 400 and content_type.startswith("text/event-stream")
        if not streaming:
            body = await until_disconnect(request, lambda: read_all(upstream))
            if upstream.status_code >= 400:
                kind = "http_4xx" if upstream.status_code < 500 else "http_5xx"
                state.metrics.engine_errors.labels(kind).inc()
            await stack.aclose()
            return Response(body, status_code=upstream.status_code, media_type=content_type)
    except BaseException:
        await stack.aclose()
        raise

    first = True

    def on_events(count: int) -> None:
        nonlocal first
        if first and count:
            first = False
            stats.content()
            count -= 1
        if count:
            stats.metrics.streamed_tokens.labels("proxy").inc(count)

    async def close() -> None:
        await stack.aclose()
        await closed(lambda: response.disconnected)

    response = StreamResponse(
        relay(upstream, on_events=on_events, on_error=stats.fail),
        media_type=content_type,
        on_close=close,
    )
    return response
