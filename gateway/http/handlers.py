"""The HTTP handlers: chat completions, models, health, metrics.

Each takes the request and the process's `gateway.http.services.Services` and returns an
ASGI app to answer with (a Starlette response, or a `gateway.stream.writer.EventStream`). The
key was checked before any of them runs (`gateway.http.access.Access`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp

from gateway.api import sse
from gateway.api.request import ChatRequest, parse_chat_request
from gateway.engine.proxy import proxy_events
from gateway.errors import BodyTimeoutError, BodyTooLargeError, GatewayError, RequestError
from gateway.http.health import (
    FetcherPart,
    HealthAnswer,
    NotChecked,
    fetcher_says,
    searxng_says,
    target_says,
)
from gateway.http.request_id import request_id_of
from gateway.http.services import Services
from gateway.loop.turn import ChatTurn, LoopOptions
from gateway.metrics import Outcome
from gateway.settings import EngineSettings
from gateway.stream.events import End, Raw, StreamEvent
from gateway.stream.pump import AnswerLimits, ClientGone, Pump, internal_error, until_disconnect
from gateway.stream.writer import (
    EventStream,
    Tally,
    body_response,
    error_response,
    outcome_of,
)
from gateway.tools.search.searxng import SearxngHealth

#: What a client that went away gets (nobody reads it; nginx's word for it).
_CLIENT_GONE = 499


async def read_body(request: Request, limit: int, seconds: float) -> bytes:
    """The request body, refused as soon as it passes ``limit`` bytes (never buffered whole
    first) or takes longer than ``seconds`` to arrive.

    Raises:
        BodyTooLargeError: Over the limit.
        BodyTimeoutError: Too slow.
        ClientGone: The client went away while sending it.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLargeError(f"The request body is larger than {limit} bytes.")
    parts: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(seconds):
            async for part in request.stream():
                size += len(part)
                if size > limit:
                    raise BodyTooLargeError(f"The request body is larger than {limit} bytes.")
                parts.append(part)
    except TimeoutError as exc:
        raise BodyTimeoutError(f"The request body did not arrive within {seconds:g} s.") from exc
    except ClientDisconnect as exc:
        raise ClientGone from exc
    return b"".join(parts)


async def chat_completions(request: Request, services: Services) -> ASGIApp:
    """``POST /v1/chat/completions``: pass-through, or the Web loop."""
    state = request.scope.get("state", {})
    key = state.get("key", -1)
    tally = Tally(
        services.metrics, request_id=request_id_of(request.scope), key=key if key >= 0 else None
    )
    try:
        services.drain.refuse_new()
        settings = services.settings
        raw = await read_body(request, settings.max_body_bytes, settings.timeouts.client_body)
        chat = parse_chat_request(raw, allow_media_urls=settings.allow_media_urls)
        tally.mode = "web" if chat.web else "proxy"
        tally.model = chat.model
        if chat.web and not services.tools:
            raise RequestError("The Web switch is not available: no tools are configured.")
        return await _answer(request, services, chat, tally)
    except ClientGone:
        tally.close(Outcome.CLIENT_CLOSED)
        return Response(status_code=_CLIENT_GONE)
    except GatewayError as exc:
        tally.close(outcome_of(exc), exc)
        return error_response(exc)
    except Exception as exc:
        error = internal_error(exc)
        tally.close(Outcome.INTERNAL_ERROR, error)
        return error_response(error)


async def _answer(request: Request, services: Services, chat: ChatRequest, tally: Tally) -> ASGIApp:
    """Start the answer and choose its form from its first event."""
    resources = AsyncExitStack()
    try:
        key = request.scope.get("state", {}).get("key", -1)
        resources.enter_context(services.slots.take())
        resources.enter_context(services.key_limits.chat(key))
        entry = await until_disconnect(request, lambda: services.models.resolve(chat.model))
        # A file-name alias reaches the engine as the name the engine lists (SPEC 2); the
        # client's chunks keep the name it asked for.
        tally.engine = entry.engine.label
        routed = chat if entry.model == chat.model else chat.for_model(entry.model)
        limits = AnswerLimits(
            seconds=services.settings.timeouts.answer,
            relayed=services.settings.limits.max_answer_bytes,
        )
        pump = Pump(
            _source(services, routed, entry.engine, tally.request_id), services.drain, limits
        )
        resources.push_async_callback(pump.close)
        pump.start()
        keepalive = services.settings.timeouts.keepalive
        first = await until_disconnect(request, lambda: pump.opening(keepalive))
        last = first[-1] if first else None
        chunks = sse.ChunkWriter(chat.model)
        if isinstance(last, End) and last.error is not None:
            for event in first:
                tally.see(event)
            raise last.error
        if not chat.stream or (isinstance(last, Raw) and last.body):
            events = first
            if not isinstance(last, End):
                events = first + await until_disconnect(request, pump.collect)
            response: ASGIApp = body_response(events, web=chat.web, chunks=chunks, tally=tally)
            await resources.aclose()
            return response
        return EventStream(
            pump,
            first,
            tally=tally,
            resources=resources,
            chunks=chunks,
            web=chat.web,
            include_usage=chat.include_usage,
            keepalive=keepalive,
        )
    except BaseException:
        await resources.aclose()
        raise


def _source(
    services: Services, chat: ChatRequest, engine: EngineSettings, request_id: str
) -> AsyncGenerator[StreamEvent, None]:
    if not chat.web:
        return proxy_events(services.engines, engine, chat.engine_body())
    settings = services.settings
    turn = ChatTurn(
        client=services.engines,
        engine=engine,
        messages=chat.messages,
        fields=chat.fields,
        tools=services.tools,
        memory=services.memory,
        options=LoopOptions(
            budgets=settings.budgets,
            tool_timeout=settings.timeouts.tool,
            max_text=settings.limits.max_answer_bytes,
        ),
        filter_factory=services.filter_factory,
        request_id=request_id,
    )
    return turn.events()


async def list_models(request: Request, services: Services) -> ASGIApp:
    """``GET /v1/models``: every model of every engine that answers."""
    entries, errors = await services.models.entries()
    if not entries and errors:
        return error_response(errors[0])
    data = [
        {"id": e.model, "object": "model", "created": 0, "owned_by": "tigress"} for e in entries
    ]
    return JSONResponse({"object": "list", "data": data})


def _not_checked(says: str) -> dict[str, object]:
    return {"checked": False, "ok": None, "detail": "not checked", "says": says}


def _searxng_json(part: SearxngHealth | NotChecked) -> dict[str, object]:
    says = searxng_says(part)
    if isinstance(part, NotChecked):
        return _not_checked(says)
    body: dict[str, object] = {"checked": True, "ok": part.ok, "url": part.url}
    if not part.ok:
        body["problem"] = part.problem
    body["says"] = says
    return body


def _fetcher_json(part: FetcherPart | NotChecked) -> dict[str, object]:
    says = fetcher_says(part)
    if isinstance(part, NotChecked):
        return _not_checked(says)
    targets = [
        {"target": target.target, "ok": target.ok, "says": target_says(target)}
        for target in part.targets
    ]
    return {"checked": True, "ok": part.ok, "targets": targets, "says": says}


def healthz_body(answer: HealthAnswer) -> dict[str, object]:
    """``/healthz``'s JSON: ``{"status": "ok"|"degraded", "engines": [{"engine", "ok",
    "says"}], "searxng": {"checked", "ok", "url"[, "problem"], "says"}, "fetcher":
    {"checked", "ok", "targets": [{"target", "ok", "says"}], "says"}}``; a part not
    checked is ``{"checked": false, "ok": null, "detail": "not checked", "says"}``."""
    return {
        "status": answer.status,
        "engines": [
            {"engine": engine.engine, "ok": engine.ok, "says": engine.says}
            for engine in answer.engines
        ],
        "searxng": _searxng_json(answer.searxng),
        "fetcher": _fetcher_json(answer.fetcher),
    }


async def healthz(request: Request, services: Services) -> ASGIApp:
    """``GET /healthz`` (no key): engines, SearXNG and fetcher, cached briefly."""
    return JSONResponse(healthz_body(await services.health.check()))


async def metrics(request: Request, services: Services) -> ASGIApp:
    """``GET /metrics``: the Prometheus exposition."""
    return Response(generate_latest(services.metrics.registry), media_type=CONTENT_TYPE_LATEST)


def not_found_body(detail: str) -> dict[str, Any]:
    """The OpenAI-shaped body of an unknown route or method."""
    return {"error": {"message": detail, "type": "invalid_request_error", "code": None}}
