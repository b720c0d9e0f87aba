"""The one writer: a stream of `gateway.events` becomes SSE or one body, and metrics.

Both modes go through here. A `Pump` runs the event source (the Web loop or the
pass-through relay) in its own task, so the writer can send a keep-alive comment whenever
the source is quiet (long tool work, a silent engine) without cancelling anything, and so
a disconnect cancels the source and all it started. A `Tally` records every metric of
one request as events pass and settles its outcome exactly once: ``ok`` only when the
end was written, ``client_closed`` only when the client left before that.

The path of a response: the handler starts the pump and waits (up to the keep-alive
interval) for the first event. An error before any output is answered with its own HTTP
status (`error_response`); a non-stream answer is collected (`collect`) and sent as one
body (`body_response`); anything else becomes an `EventStream` (SSE).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AsyncExitStack, aclosing
from typing import TypeVar

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from gateway import sse
from gateway.chunks import UsageCounts
from gateway.drain import Drain
from gateway.errors import (
    BusyError,
    EngineError,
    EngineTimeoutError,
    GatewayError,
    RateLimitError,
    RequestError,
    ShuttingDownError,
)
from gateway.events import (
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
from gateway.metrics import GatewayMetrics, Outcome
from gateway.tool_events import Citations, ThorEvent

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Events waiting for a slow client before the source itself waits.
_QUEUE_SIZE = 256
#: Tokens counted before they are added to the metric.
_TOKEN_BATCH = 64
#: Longest wait for cancelled work to wind down before the response gives up on it.
_CLEANUP_SECONDS = 5.0


def outcome_of(error: GatewayError) -> Outcome:
    """The outcome label of a request that ended with ``error``."""
    if isinstance(error, ShuttingDownError):
        return Outcome.SHUTDOWN
    if isinstance(error, BusyError | RateLimitError):
        return Outcome.LIMITED
    if isinstance(error, EngineTimeoutError):
        return Outcome.TIMEOUT
    if isinstance(error, EngineError):
        return Outcome.ENGINE_ERROR
    if isinstance(error, RequestError) or 400 <= error.status < 500:
        return Outcome.REJECTED
    return Outcome.INTERNAL_ERROR


def internal_error(exc: BaseException) -> GatewayError:
    """The error a bug becomes; logged once with its traceback (its message may hold
    user or page text, so it is not sent anywhere else)."""
    log.error("bug while answering a chat: %s", type(exc).__name__, exc_info=exc)
    return GatewayError("The gateway failed while answering.")


class Tally:
    """The metrics of one chat request, recorded as its events pass.

    Created when the request arrives (the in-flight gauge counts it), closed once with
    its outcome (a second close does nothing).
    """

    def __init__(
        self, metrics: GatewayMetrics, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._metrics = metrics
        self._clock = clock
        self._started = clock()
        self._first_token = False
        self._rounds = 0
        self._tokens = 0
        self._closed = False
        #: ``web``, ``proxy``, or ``none`` until the body said which.
        self.mode = "none"
        metrics.inflight.inc()

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
        elif isinstance(event, ToolEvent) and isinstance(event.event, Citations):
            self._metrics.unknown_citations.inc(len(event.event.unknown))

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
            metrics.engine_errors.labels(error.kind).inc()
            # Operators see engine failures; the message names the engine, never its key.
            log.warning("engine %s failed (%s): %s", error.engine, error.kind, error.message)


class Pump:
    """Runs an event source in its own task; the writer reads its events with a timeout.

    The source ends by returning (`End` without error), raising a `GatewayError` (`End`
    with it) or yielding `End` itself; a bug becomes an internal error. `interrupt` (the
    drain at the end of the grace period) cancels the source and ends with its error.
    """

    def __init__(self, source: AsyncGenerator[StreamEvent, None], drain: Drain) -> None:
        self._source = source
        self._drain = drain
        self._queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue(_QUEUE_SIZE)
        self._task: asyncio.Task[None] | None = None
        self._interrupted: GatewayError | None = None
        #: When the source last put an event (quiet time counts from here).
        self._last_put = 0.0
        self._quiet: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Start the source."""
        self._drain.add(self)
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            loop = asyncio.get_running_loop()
            async with aclosing(self._source) as events:
                async for event in events:
                    self._last_put = loop.time()
                    await self._queue.put(event)
                    if isinstance(event, End):
                        return
            await self._queue.put(End())
        except GatewayError as exc:
            await self._queue.put(End(exc))
        except Exception as exc:
            await self._queue.put(End(internal_error(exc)))

    def interrupt(self, error: ShuttingDownError) -> None:
        """Stop the source now; the next event read is the end with ``error``."""
        self._interrupted = error
        self._stop()
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(End(error))

    async def next(self, quiet: float) -> StreamEvent | None:
        """The next event, or None after ``quiet`` seconds without one.

        The quiet time is one timer per pump, moved on only when it fires (not a timer
        per event: events come once per token).
        """
        if self._interrupted is not None:
            return End(self._interrupted)
        if self._queue.empty() and self._quiet is None:
            loop = asyncio.get_running_loop()
            self._quiet = loop.call_at(max(self._last_put, loop.time()) + quiet, self._check, quiet)
        return await self._queue.get()

    def _check(self, quiet: float) -> None:
        """The quiet timer: a None for the writer when nothing came for ``quiet`` seconds."""
        self._quiet = None
        loop = asyncio.get_running_loop()
        if not self._queue.empty():
            return
        due = self._last_put + quiet
        if loop.time() >= due:
            self._queue.put_nowait(None)
        else:
            self._quiet = loop.call_at(due, self._check, quiet)

    async def opening(self, quiet: float) -> list[StreamEvent]:
        """The events up to the first one the client sees (or the end), waiting at most
        ``quiet`` seconds in all; bookkeeping events before it come along.

        The handler answers from these: an end with an error before anything visible can
        still get its own HTTP status.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + quiet
        out: list[StreamEvent] = []
        while True:
            event = await self.next(max(0.0, deadline - loop.time()))
            if event is None:
                return out
            out.append(event)
            if not isinstance(event, RoundStarted | CallEnded | Usage):
                return out

    def ready(self) -> list[StreamEvent]:
        """The events already waiting (read together into one write)."""
        out: list[StreamEvent] = []
        while not self._queue.empty() and self._interrupted is None:
            event = self._queue.get_nowait()
            if event is None:
                continue
            out.append(event)
            if isinstance(event, End):
                break
        return out

    async def collect(self) -> list[StreamEvent]:
        """Every event up to and including the end (for one body)."""
        out: list[StreamEvent] = []
        while True:
            event = await self.next(3600.0)
            if event is None:
                continue
            out.append(event)
            if isinstance(event, End):
                return out

    def _stop(self) -> None:
        # Cancel once only: httpcore's shielded clean-up (closing the engine connection)
        # is shielded from anyio scopes, not from a second Task.cancel().
        task = self._task
        if task is not None and not task.done() and not task.cancelling():
            task.cancel()

    async def close(self) -> None:
        """Cancel the source and everything it started; wait for it to wind down."""
        self._drain.discard(self)
        if self._quiet is not None:
            self._quiet.cancel()
            self._quiet = None
        if self._task is not None:
            self._stop()
            # asyncio.wait, not "await task": a waiter that is itself cancelled would pass
            # a second cancel on to the task and cut short its clean-up.
            await asyncio.wait({self._task})


class ClientGone(Exception):
    """Raised when the client disconnected before the work finished."""


async def until_disconnect(request: Request, work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work`` unless the client disconnects first; then cancel it.

    The request body must have been read already (the next message is the disconnect).

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


def error_response(error: GatewayError) -> Response:
    """An OpenAI error body with the error's status and headers."""
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
        events=[e.event.payload() for e in events if isinstance(e, ToolEvent)],
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
        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        writer = asyncio.ensure_future(self._write(send))
        watcher = asyncio.ensure_future(watch())
        end: End | None = None
        try:
            await asyncio.wait({writer, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
            if not writer.done():
                writer.cancel()
            # Not gather: a second cancel would cut the clean-up short.
            await asyncio.wait({writer, watcher})
            if writer.done() and not writer.cancelled():
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
