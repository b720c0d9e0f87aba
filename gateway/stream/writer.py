"""The one writer: a stream of `gateway.stream.events` becomes SSE or one body, and metrics.

Both modes go through here; the event source runs beside the writer in a
`gateway.stream.pump.Pump`, so the writer sends a keep-alive comment whenever it is quiet. A
`Tally` records every metric of
one request as events pass and settles its outcome exactly once: ``ok`` only when the
end was written, ``client_closed`` only when the client left before that.

The path of a response: the handler starts the `gateway.stream.pump.Pump` and waits (up to the
keep-alive interval) for the first event. An error before any output is answered with its own HTTP
status (`error_response`); a non-stream answer is collected (`collect`) and sent as one
body (`body_response`); anything else becomes an `EventStream` (SSE).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import TypeVar

import anyio
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from gateway.api import quirks, sse
from gateway.api.chunks import UsageCounts
from gateway.errors import (
    AnswerCutError,
    BusyError,
    EngineError,
    EngineStatusError,
    EngineTimeoutError,
    GatewayError,
    RateLimitError,
    RequestError,
    ShuttingDownError,
)
from gateway.metrics import GatewayMetrics, Outcome
from gateway.stream.access_line import ChatRecord
from gateway.stream.events import (
    CallEnded,
    Content,
    End,
    Raw,
    Reasoning,
    RoundStarted,
    StreamEvent,
    ToolEvent,
    Usage,
)
from gateway.stream.pump import Pump, internal_error, race_disconnect
from gateway.tools.events import Citations, Read, Searched, ThorEvent, Working

log = logging.getLogger(__name__)
#: The access lines, one per chat (SPEC 9).
access_log = logging.getLogger("gateway.http.access")

T = TypeVar("T")

#: Tokens counted before they are added to the metric.
_TOKEN_BATCH = 64
#: Longest wait for cancelled work to wind down before the response gives up on it.
_CLEANUP_SECONDS = 5.0


def outcome_of(error: GatewayError) -> Outcome:
    """The outcome label of a request that ended with ``error``."""
    if isinstance(error, ShuttingDownError):
        return Outcome.SHUTDOWN
    if isinstance(error, AnswerCutError):
        return Outcome.CUT
    if isinstance(error, BusyError | RateLimitError):
        return Outcome.LIMITED
    if isinstance(error, EngineTimeoutError):
        return Outcome.TIMEOUT
    if isinstance(error, EngineError):
        return Outcome.ENGINE_ERROR
    if isinstance(error, RequestError) or 400 <= error.status < 500:
        return Outcome.REJECTED
    return Outcome.INTERNAL_ERROR


class Tally:
    """The metrics and the access line of one chat request, recorded as its events pass.

    Created when the request arrives (the in-flight gauge counts it), closed once with
    its outcome (a second close does nothing), which writes the chat's access line
    (`gateway.stream.access_line`).
    """

    def __init__(
        self,
        metrics: GatewayMetrics,
        *,
        clock: Callable[[], float] = time.monotonic,
        request_id: str = "",
        key: int | None = None,
    ) -> None:
        self._metrics = metrics
        self._clock = clock
        self._started = clock()
        self._first_token = False
        self._rounds = 0
        self._tokens = 0
        self._tokens_sent = 0
        self._searches = 0
        self._pages = 0
        self._closed = False
        self._request_id = request_id
        #: The key's position (None: no keys, or not known yet).
        self.key = key
        #: ``web``, ``proxy``, or ``none`` until the body said which.
        self.mode = "none"
        #: The model asked for, once the body was read.
        self.model = ""
        #: The engine's label, once one was chosen.
        self.engine = ""
        metrics.inflight.inc()

    @property
    def request_id(self) -> str:
        """The chat's id ("" when the request came without one)."""
        return self._request_id

    def tokens(self, count: int) -> None:
        """Model-written text went to the client; the first sets the time to first token.

        Counted here and added to the metric in batches (and at the close): a metric
        update per token would cost more than relaying it.
        """
        if not count:
            return
        if not self._first_token:
            self._first_token = True
            self._metrics.first_token.labels(self.mode).observe(self._clock() - self._started)
        self._tokens += count
        self._tokens_sent += count
        if self._tokens >= _TOKEN_BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._tokens:
            self._metrics.streamed_tokens.labels(self.mode).inc(self._tokens)
            self._tokens = 0

    def see(self, event: StreamEvent) -> None:
        """Record what one event means for the metrics."""
        if isinstance(event, Content | Reasoning):
            self.tokens(1)
        elif isinstance(event, Raw):
            self.tokens(event.tokens)
        elif isinstance(event, RoundStarted):
            self._rounds += 1
        elif isinstance(event, CallEnded):
            self._metrics.tool_calls.labels("chat", event.tool, event.outcome).inc(event.count)
        elif isinstance(event, ToolEvent):
            thor = event.event
            if isinstance(thor, Citations):
                self._metrics.unknown_citations.inc(len(thor.unknown))
            elif isinstance(thor, Searched) and thor.error != "budget":
                self._searches += len(thor.queries)
            elif isinstance(thor, Read) and thor.ok:
                self._pages += 1

    def close(self, outcome: Outcome, error: GatewayError | None = None) -> None:
        """Settle the request's outcome (once)."""
        if self._closed:
            return
        self._closed = True
        self._flush()
        metrics = self._metrics
        metrics.inflight.dec()
        metrics.chat_requests.labels(self.mode, outcome.value).inc()
        if self._rounds:
            metrics.rounds.observe(self._rounds)
        if isinstance(error, EngineError):
            engine = error.engine or self.engine or "(not chosen)"
            metrics.engine_errors.labels(error.kind).inc()
            if quirks.words_may_quote_request(error):
                # Their message is the engine's own words, which may quote the request
                # (vLLM's validation errors echo the input): logged without it (SPEC 9).
                log.warning("engine %s failed (%s, status %d)", engine, error.kind, error.status)
            else:
                # Operators see engine failures; the message names the engine, never its key.
                log.warning("engine %s failed (%s): %s", engine, error.kind, error.message)
        record = ChatRecord(
            request_id=self._request_id,
            key=self.key,
            model=self.model,
            engine=self.engine,
            mode=self.mode,
            rounds=self._rounds,
            searches=self._searches,
            pages=self._pages,
            tokens=self._tokens_sent,
            outcome=outcome.value,
            ms=round((self._clock() - self._started) * 1000),
        )
        access_log.info("%s", record.line(), extra={"fields": record.fields()})


def error_response(error: GatewayError) -> Response:
    """An OpenAI error body with the error's status and headers; in pass-through, an
    engine's error status is answered with the engine's own body and content type as
    they came (SPEC 2: the same errors)."""
    if isinstance(error, EngineStatusError) and error.relayed is not None:
        headers = error.headers()
        if error.relayed.content_type:
            headers["content-type"] = error.relayed.content_type
        return Response(error.relayed.data, status_code=error.status, headers=headers)
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers())


def body_response(
    events: list[StreamEvent], *, web: bool, chunks: sse.ChunkWriter, tally: Tally
) -> Response:
    """One body from a collected stream: the engine's own (pass-through), the whole Web
    answer with its tool events in ``thor_events``, or the error that ended it."""
    for event in events:
        tally.see(event)
    end = events[-1]
    assert isinstance(end, End)
    raw = b"".join(e.data for e in events if isinstance(e, Raw))
    if end.error is not None and not raw:
        tally.close(outcome_of(end.error), end.error)
        return error_response(end.error)
    tally.close(Outcome.OK if end.error is None else outcome_of(end.error), end.error)
    if not web:
        return Response(raw, media_type="application/json")
    usage = next((e.counts for e in reversed(events) if isinstance(e, Usage)), None)
    body = chunks.completion(
        "".join(e.text for e in events if isinstance(e, Content)),
        reasoning="".join(e.text for e in events if isinstance(e, Reasoning)),
        usage=usage.payload() if usage is not None else None,
        # `working` says what runs now: nothing, once the answer is whole.
        events=[
            e.event.payload()
            for e in events
            if isinstance(e, ToolEvent) and not isinstance(e.event, Working)
        ],
    )
    return Response(json.dumps(body, separators=(",", ":")), media_type="application/json")


def _event_bytes(event: ThorEvent, chunks: sse.ChunkWriter) -> bytes:
    return sse.encode(chunks.event(event.payload()))


class EventStream:
    """The SSE response of one chat (an ASGI app).

    Sends the head, then every event as it comes (the Web answer's chunks, or the
    engine's own bytes), a keep-alive comment whenever the source is quiet for the
    keep-alive interval, and the end: ``finish_reason: "stop"``, the usage chunk when
    asked for, ``[DONE]``; or one error event and ``[DONE]``. It owns ``resources`` (the
    pump, the engine connection, the chat's slots) and closes them when it ends.
    """

    def __init__(
        self,
        pump: Pump,
        first: list[StreamEvent],
        *,
        tally: Tally,
        resources: AsyncExitStack,
        chunks: sse.ChunkWriter,
        web: bool,
        include_usage: bool,
        keepalive: float,
    ) -> None:
        self._pump = pump
        self._first = first
        self._tally = tally
        self._resources = resources
        self._chunks = chunks
        self._web = web
        self._include_usage = include_usage
        self._keepalive = keepalive
        self._usage: UsageCounts | None = None

    def _encode(self, event: StreamEvent, out: list[bytes]) -> End | None:
        """Append the bytes of one event; return it when it is the end."""
        self._tally.see(event)
        chunks = self._chunks
        if isinstance(event, Raw):
            out.append(event.data)
        elif isinstance(event, Content):
            out.append(chunks.content_bytes(event.text))
        elif isinstance(event, Reasoning):
            out.append(chunks.reasoning_bytes(event.text))
        elif isinstance(event, ToolEvent):
            out.append(_event_bytes(event.event, chunks))
        elif isinstance(event, Usage):
            self._usage = event.counts
        elif isinstance(event, End):
            if event.error is not None:
                out.append(sse.error_event(event.error.body()))
            elif self._web:
                out.append(sse.encode(chunks.finish("stop")))
                if self._include_usage and self._usage is not None:
                    out.append(sse.encode(chunks.usage(self._usage.payload())))
                out.append(sse.DONE)
            return event
        return None

    async def _write(self, send: Send) -> End:
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        out: list[bytes] = [sse.encode(self._chunks.role())] if self._web else []
        batch = self._first
        while True:
            if not batch:
                out.append(sse.comment())
            else:
                end = None
                for event in batch:
                    end = self._encode(event, out)
                    if end is not None:
                        break
                if end is not None:
                    body = b"".join(out)
                    await send({"type": "http.response.body", "body": body, "more_body": False})
                    return end
            await send({"type": "http.response.body", "body": b"".join(out), "more_body": True})
            out = []
            waited = await self._pump.next(self._keepalive)
            batch = [] if waited is None else [waited, *self._pump.ready()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        writer: asyncio.Future[End] | None = None
        end: End | None = None
        try:
            writer = await race_disconnect(receive, self._write(send))
        finally:
            if writer is not None and not writer.cancelled():
                failure = writer.exception()
                if failure is None:
                    end = writer.result()
                elif not isinstance(failure, OSError):
                    # A bug; an OSError is the client's connection breaking mid-write.
                    error = internal_error(failure)
                    self._tally.close(Outcome.INTERNAL_ERROR, error)
            if end is None:
                self._tally.close(Outcome.CLIENT_CLOSED)
            elif end.error is None:
                self._tally.close(Outcome.OK)
            else:
                self._tally.close(outcome_of(end.error), end.error)
            with anyio.move_on_after(_CLEANUP_SECONDS, shield=True):
                await self._resources.aclose()
