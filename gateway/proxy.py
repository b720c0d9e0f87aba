"""Pass-through to the engine when the Web switch is off (SPEC 2).

The engine's bytes reach the client as they are, cut only at event boundaries so an
error after the stream began can still be sent as one whole final event. Two repairs:
llama-server's old ``error:`` field becomes a standard ``data: {"error": ...}`` event
(clients drop the old field silently), and a stream that ends without ``[DONE]`` gets it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable

import httpx

from gateway import sse
from gateway.engine import engine_errors, error_from_payload
from gateway.errors import EngineError, GatewayError

#: Engine parts read in a row before the sender gets a turn.
_YIELD_EVERY = 32


def _boundary(buffer: bytes) -> int:
    """Index just past the last complete event in ``buffer`` (0 when none)."""
    lf = buffer.rfind(b"\n\n")
    crlf = buffer.rfind(b"\r\n\r\n")
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)


def _repair_old_errors(events: bytes) -> bytes:
    """Rewrite ``error: {...}`` fields as standard ``data: {"error": {...}}`` events."""
    out: list[bytes] = []
    for line in events.splitlines(keepends=True):
        if line.startswith(b"error:"):
            raw = line[len(b"error:") :].strip()
            try:
                payload = json.loads(raw)
            except ValueError:
                payload = {"message": raw.decode("utf-8", "replace")}
            out.append(sse.encode({"error": error_from_payload(payload)[1]}).rstrip(b"\n") + b"\n")
        else:
            out.append(line)
    return b"".join(out)


async def relay(
    response: httpx.Response,
    *,
    on_events: Callable[[int], None],
    on_error: Callable[[GatewayError], None],
) -> AsyncGenerator[bytes, None]:
    """Forward an engine's SSE body, whole events at a time.

    A reader task takes the engine's bytes as they come; this generator sends whatever
    whole events have piled up since its last send. While the client keeps up, every
    event goes out alone and at once; when the engine is faster, events go out together,
    so the gateway's cost per token does not cap the stream's speed.

    Args:
        response: The engine's streaming response (status already checked).
        on_events: Called with the number of ``data:`` events in each forwarded piece.
        on_error: Called with the error that ended the stream early.
    """
    pending = bytearray()
    wake = asyncio.Event()
    outcome: list[EngineError | None] = []

    async def read() -> None:
        parts = 0
        try:
            with engine_errors():
                async for part in response.aiter_raw():
                    pending.extend(part)
                    wake.set()
                    parts += 1
                    # Parts already buffered by httpx come without a pause; let the sender
                    # run now and then (at once for the first token) so a burst is not
                    # held back until all of it has been read.
                    if parts % _YIELD_EVERY == 1:
                        await asyncio.sleep(0)
        except EngineError as exc:
            outcome.append(exc)
        else:
            outcome.append(None)
        finally:
            wake.set()

    reader = asyncio.create_task(read())
    buffer = b""
    done = False
    try:
        while True:
            await wake.wait()
            wake.clear()
            finished = bool(outcome)
            buffer += pending
            pending.clear()
            cut = _boundary(buffer)
            if cut:
                events, buffer = buffer[:cut], buffer[cut:]
                if b"error:" in events:
                    events = _repair_old_errors(events)
                done = done or b"data: [DONE]" in events or b"data:[DONE]" in events
                on_events(events.count(b"data:"))
                yield events
            if finished:
                break
    finally:
        if not reader.done():
            reader.cancel()
        # Not "await reader": a second cancel would cut httpx's clean-up short.
        await asyncio.wait({reader})
    error = outcome[0] if outcome else None
    if error is not None:
        on_error(error)
        # A partial event still buffered is dropped: a cut JSON line would reach the
        # client as a broken chunk.
        yield sse.error_event(error.body())
        return
    if buffer.strip():
        # The engine ended without the blank line after its last event.
        tail = buffer.rstrip(b"\r\n") + b"\n\n"
        if b"error:" in tail:
            tail = _repair_old_errors(tail)
        done = done or b"[DONE]" in tail
        yield tail
    if not done:
        yield sse.DONE
