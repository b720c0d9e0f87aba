"""Pass-through to the engine when the Web switch is off (SPEC 2), as an event source.

`proxy_events` sends the client's body to the engine and yields the engine's answer as
`gateway.stream.events.Raw` pieces: whole SSE events of a stream (cut only at event boundaries,
so an error after the stream began can still be sent as one whole final event), or the
body of an answer that is not a stream. An error status raises the engine's error, which
keeps its body as it came: the writer answers with the engine's status, body, content
type and ``Retry-After``, byte for byte (SPEC 2: the same errors). Two repairs
(`gateway.api.quirks`): llama-server's old ``error:`` field becomes a standard
``data: {"error": ...}`` event (clients drop the old field silently), and a stream that
ends without ``[DONE]`` gets it.
An event is held only until its blank line comes: one that grows past
`gateway.engine.client.MAX_EVENT_BYTES` without it is an engine error, as in the Web loop.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from gateway.api import quirks, sse
from gateway.engine.client import EngineClient, bounded, engine_errors, status_error
from gateway.engine.http import EngineExchange
from gateway.settings import EngineSettings
from gateway.stream.events import Raw


async def relay(response: EngineExchange, engine: EngineSettings) -> AsyncGenerator[Raw, None]:
    """Forward an engine's SSE body, whole events at a time, as they arrive.

    Raises:
        EngineError: The stream broke or went quiet (a partial event still buffered is
            dropped: a cut JSON line would reach the client as a broken chunk).
        EngineStreamError: An event grew past `gateway.engine.client.MAX_EVENT_BYTES` without
            its blank line: an engine that never ends one is not held in memory.
    """
    # Grown in place, and searched only where a blank line may have begun since the last
    # look: copying and rescanning it on every read would cost the square of one large
    # event (bench/scaling.py).
    buffer = bytearray()
    done = False
    with engine_errors(engine):
        while part := await response.read():
            start = max(0, len(buffer) - 3)  # a blank line may straddle the two reads
            buffer += part
            cut = sse.boundary(buffer, start)
            if not cut:
                bounded(len(buffer), engine)
                continue
            events = bytes(buffer[:cut])
            del buffer[:cut]
            bounded(len(buffer), engine)
            if quirks.has_old_errors(events):
                events = quirks.repair_old_errors(events)
            done = done or quirks.has_done(events)
            yield Raw(events, sse.count_tokens(events))
    if buffer.strip():
        # The engine ended without the blank line after its last event.
        tail = bytes(buffer).rstrip(b"\r\n") + b"\n\n"
        if quirks.has_old_errors(tail):
            tail = quirks.repair_old_errors(tail)
        done = done or quirks.has_done(tail)
        yield Raw(tail, sse.count_tokens(tail))
    if not done:
        yield Raw(sse.DONE)


async def proxy_events(
    client: EngineClient, engine: EngineSettings, body: bytes
) -> AsyncGenerator[Raw, None]:
    """The engine's answer to ``body``, relayed.

    Raises:
        EngineStatusError: The engine answered with an error status.
        EngineError: It could not be reached, broke off or went quiet.
    """
    async with client.open(engine, "/chat/completions", body) as response:
        if response.status >= 400:
            with engine_errors(engine):
                raise await status_error(response, engine, relay=True)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            async for piece in relay(response, engine):
                yield piece
            return
        parts: list[bytes] = []
        with engine_errors(engine):
            while part := await response.read():
                parts.append(part)
        yield Raw(b"".join(parts), body=True)
