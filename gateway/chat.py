"""Serving a turn of the tool loop to the client: SSE with keep-alive, or one body.

The loop runs in its own task and hands events over a queue, so the stream can send a
keep-alive comment whenever the loop is quiet (long tool work, a slow engine) without
cancelling anything, and so a disconnect cancels the loop task and all it started.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from gateway import sse
from gateway.errors import EngineError, GatewayError
from gateway.loop import ChatTurn, Content, LoopEvent, Reasoning, ToolEvent
from gateway.metrics import GatewayMetrics

log = logging.getLogger(__name__)

#: Loop events waiting for a slow client before the loop itself waits.
_QUEUE_SIZE = 256


@dataclass(frozen=True)
class _End:
    error: GatewayError | None = None


class TurnStats:
    """What the HTTP layer records about one turn (outcome, first token)."""

    def __init__(self, metrics: GatewayMetrics, mode: str, started: float) -> None:
        self.metrics = metrics
        self.mode = mode
        self.started = started
        self.first_token_seen = False
        self.error: GatewayError | None = None
        self.finished = False

    def content(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Count one content chunk; the first one sets the time to first token."""
        if not self.first_token_seen:
            self.first_token_seen = True
            self.metrics.first_token.labels(self.mode).observe(clock() - self.started)
        self.metrics.streamed_tokens.labels(self.mode).inc()

    def fail(self, error: GatewayError) -> None:
        """Record the error that ended the turn."""
        self.error = error
        if isinstance(error, EngineError):
            self.metrics.engine_errors.labels(error.kind).inc()


def _internal_error(exc: Exception) -> GatewayError:
    # Unknown exceptions may carry user or page text: log the type only.
    log.error("chat turn failed: %s", type(exc).__name__, exc_info=False)
    return GatewayError("The gateway failed while answering.")


class TurnStream:
    """The SSE body of one turn under the Web switch.

    `first` starts the loop and waits for its first output, so a turn that fails before
    saying anything (engine unreachable, say) can still be answered with its status.
    """

    def __init__(
        self,
        turn: ChatTurn,
        writer: sse.ChunkWriter,
        stats: TurnStats,
        *,
        include_usage: bool,
        keepalive: float,
    ) -> None:
        self._turn = turn
        self._writer = writer
        self._stats = stats
        self._include_usage = include_usage
        self._keepalive = keepalive
        self._queue: asyncio.Queue[LoopEvent | _End] = asyncio.Queue(_QUEUE_SIZE)
        self._task: asyncio.Task[None] | None = None
        self._first: LoopEvent | _End | None = None

    async def _produce(self) -> None:
        try:
            async with aclosing(self._turn.events()) as events:
                async for event in events:
                    await self._queue.put(event)
            await self._queue.put(_End())
        except GatewayError as exc:
            await self._queue.put(_End(exc))
        except Exception as exc:
            await self._queue.put(_End(_internal_error(exc)))

    async def first(self, wait: float) -> GatewayError | None:
        """Start the loop; wait up to ``wait`` seconds for its first output.

        Returns:
            The error, when the turn failed before any output; else ``None``.
        """
        self._task = asyncio.create_task(self._produce())
        try:
            async with asyncio.timeout(wait):
                self._first = await self._queue.get()
        except TimeoutError:
            return None
        if isinstance(self._first, _End) and self._first.error is not None:
            self._stats.fail(self._first.error)
            return self._first.error
        return None

    async def cancel(self) -> None:
        """Cancel the loop and everything it started; wait for it to wind down."""
        if self._task is not None:
            self._stop()
            # asyncio.wait, not "await task": a waiter that is itself cancelled would pass
            # a second cancel on to the task and cut short its clean-up (closing the
            # engine connection).
            await asyncio.wait({self._task})

    async def body(self) -> AsyncGenerator[bytes, None]:
        """The SSE bytes: role chunk, events, the stop chunk, usage if asked, ``[DONE]``."""
        try:
            yield sse.encode(self._writer.role())
            while True:
                if self._first is not None:
                    item, self._first = self._first, None
                else:
                    try:
                        async with asyncio.timeout(self._keepalive):
                            item = await self._queue.get()
                    except TimeoutError:
                        yield sse.comment()
                        continue
                if isinstance(item, _End):
                    if item.error is not None:
                        self._stats.fail(item.error)
                        yield sse.error_event(item.error.body())
                        return
                    self._stats.finished = True
                    self._stats.metrics.rounds.observe(self._turn.rounds)
                    chunk = sse.encode(self._writer.finish("stop"))
                    if self._include_usage and self._turn.usage is not None:
                        chunk += sse.encode(self._writer.usage(self._turn.usage))
                    yield chunk + sse.DONE
                    return
                if isinstance(item, Content):
                    self._stats.content()
                    yield sse.encode(self._writer.content(item.text))
                elif isinstance(item, Reasoning):
                    yield sse.encode(self._writer.reasoning(item.text))
                elif isinstance(item, ToolEvent):
                    yield sse.encode(self._writer.event(item.payload))
        finally:
            # Only ask for cancellation here: this may run inside a cancelled scope. The
            # response waits for the loop in `cancel`, shielded.
            self._stop()

    def _stop(self) -> None:
        # Cancel once only: httpcore's shielded clean-up (closing the engine connection)
        # is shielded from anyio scopes, not from a second Task.cancel().
        if self._task is not None and not self._task.done() and not self._task.cancelling():
            self._task.cancel()


async def complete_turn(
    turn: ChatTurn, writer: sse.ChunkWriter, stats: TurnStats
) -> dict[str, Any]:
    """The ``stream: false`` body of one turn under the Web switch.

    Raises:
        GatewayError: The turn failed (the caller answers with its status).
    """
    texts: list[str] = []
    reasoning: list[str] = []
    events: list[dict[str, Any]] = []
    try:
        async with aclosing(turn.events()) as stream:
            async for event in stream:
                if isinstance(event, Content):
                    stats.content()
                    texts.append(event.text)
                elif isinstance(event, Reasoning):
                    reasoning.append(event.text)
                else:
                    events.append(event.payload)
    except GatewayError as exc:
        stats.fail(exc)
        raise
    except Exception as exc:
        error = _internal_error(exc)
        stats.fail(error)
        raise error from exc
    stats.finished = True
    stats.metrics.rounds.observe(turn.rounds)
    return writer.completion(
        "".join(texts), reasoning="".join(reasoning), usage=turn.usage, events=events
    )
