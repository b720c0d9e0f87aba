"""Running an answer's event source beside its writer (I/O).

A `Pump` runs the event source (the Web loop or the pass-through relay) in its own task
and hands its events over a queue, so the writer can send a keep-alive comment whenever
the source is quiet (long tool work, a silent engine) without cancelling anything, and so
a disconnect or the end of a shutdown's grace period cancels the source and all it
started. `until_disconnect` runs work before the response begins, cancelled if the client
goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import TypeVar

from starlette.requests import Request

from gateway.errors import GatewayError, ShuttingDownError
from gateway.stream.drain import Drain
from gateway.stream.events import CallEnded, End, RoundStarted, StreamEvent, Usage

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Events waiting for a slow client before the source itself waits.
_QUEUE_SIZE = 256


def internal_error(exc: BaseException) -> GatewayError:
    """The error a bug becomes; logged once with its traceback (its message may hold
    user or page text, so it is not sent anywhere else)."""
    log.error("bug while answering a chat: %s", type(exc).__name__, exc_info=exc)
    return GatewayError("The gateway failed while answering.")


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
