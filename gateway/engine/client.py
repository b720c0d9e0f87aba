"""The OpenAI-compatible engine client (I/O): chat streams, pass-through, model lists.

Chat requests (the Web loop's rounds and pass-through) go over `gateway.engine.http`
(httptools, bulk reads, kept-alive connections without a limit); model lists over one
shared ``httpx.AsyncClient`` (built in the composition root with timeouts and
``trust_env=False``). Errors are translated in one place, `engine_errors`, into the
`gateway.errors.EngineError` tree; every engine error names its engine from the start, by
its label (configured name or address, never its key). A wait for a free connection of the
httpx pool is the gateway's saturation, not the engine's fault: it becomes
`gateway.errors.BusyError` (503), never a 504. What engines do differently from the OpenAI
API (error forms, events without their blank line) is recognised by `gateway.api.quirks`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx

from gateway.api import quirks
from gateway.api.chunks import EngineChunk, parse_chunk
from gateway.api.sse import SSEDecoder, SSEEvent
from gateway.engine.http import EngineExchange, EnginePool, open_exchange
from gateway.errors import (
    BusyError,
    EngineBody,
    EngineError,
    EngineStatusError,
    EngineStreamError,
    EngineTimeoutError,
    EngineUnreachableError,
)
from gateway.settings import EngineSettings

#: The most of an engine's error body read before giving up on it.
_ERROR_BODY_LIMIT = 64 * 1024
#: The largest stream event (or line) held while it is not finished: engines send a
#: token or a few per event, so only a broken or hostile engine comes near it.
MAX_EVENT_BYTES = 1024 * 1024


#: Seconds a client is asked to wait when the gateway's engine connections are all busy.
BUSY_RETRY_AFTER = 2


@contextmanager
def engine_errors(engine: EngineSettings) -> Iterator[None]:
    """Translate httpx exceptions raised inside the block into engine errors."""
    name = engine.label
    try:
        yield
    except httpx.PoolTimeout as exc:
        raise BusyError(
            "The gateway is busy: no engine connection was free in time.", BUSY_RETRY_AFTER
        ) from exc
    except httpx.TimeoutException as exc:
        raise EngineTimeoutError(
            f"The model engine {name} did not answer in time.", engine=name
        ) from exc
    except httpx.RemoteProtocolError as exc:
        raise EngineUnreachableError(
            f"The connection to the model engine {name} broke.", engine=name
        ) from exc
    except httpx.TransportError as exc:
        raise EngineUnreachableError(
            f"The model engine {name} cannot be reached.", engine=name
        ) from exc


def _headers(engine: EngineSettings) -> dict[str, str]:
    # identity: pass-through forwards the bytes as they come, so they must not be encoded.
    headers = {"Accept-Encoding": "identity"}
    if engine.api_key:
        headers["Authorization"] = f"Bearer {engine.api_key}"
    return headers


class EngineClient:
    """Talks to engines: chat streams on their own connections (`gateway.engine.http`),
    model lists over the shared httpx client."""

    def __init__(
        self, http: httpx.AsyncClient, *, connect_timeout: float = 5.0, read_timeout: float = 300.0
    ) -> None:
        self._http = http
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._pool = EnginePool()

    def close(self) -> None:
        """Close the kept-alive chat connections."""
        self._pool.close()

    async def _open(self, engine: EngineSettings, path: str, body: bytes) -> EngineExchange:
        return await open_exchange(
            engine,
            path,
            body,
            pool=self._pool,
            connect_timeout=self._connect_timeout,
            read_timeout=self._read_timeout,
        )

    async def chat_chunks(
        self, engine: EngineSettings, body: bytes
    ) -> AsyncGenerator[EngineChunk, None]:
        """Stream one chat completion and yield its chunks, typed.

        Args:
            engine: The engine.
            body: The JSON request body, encoded.

        Chunks that are not JSON objects are skipped; the stream may end without
        ``[DONE]``. Use with ``contextlib.aclosing`` so a cancelled caller closes the
        engine connection at once.

        Raises:
            EngineStatusError: The engine answered with an error status.
            EngineStreamError: The engine sent an error event inside the stream, or an
                event larger than `MAX_EVENT_BYTES` (a line, or ``data:`` lines without
                the blank line that ends an event).
            EngineUnreachableError: No connection, or it broke.
            EngineTimeoutError: The engine went quiet past the timeout.
        """
        exchange = await self._open(engine, "/chat/completions", body)
        try:
            with engine_errors(engine):
                if exchange.status >= 400:
                    raise await status_error(exchange, engine)
                decoder = SSEDecoder()
                # What is not whole yet, in the pieces it came in: a read without a line
                # end cannot finish a line or an event, so it is only kept. Joining and
                # scanning the held bytes on every read would cost the square of one large
                # event (bench/scaling.py).
                pending: list[bytes] = []
                size = 0
                while data := await exchange.read():
                    pending.append(data)
                    size += len(data)
                    if b"\n" in data:
                        chunks, rest = _whole(b"".join(pending), decoder, engine.label)
                        pending, size = ([rest], len(rest)) if rest else ([], 0)
                        for chunk in chunks:
                            if chunk is None:
                                await _finish(exchange)
                                return
                            yield chunk
                    bounded(size + decoder.held, engine)
                for chunk in _last(b"".join(pending), decoder, engine.label):
                    if chunk is None:
                        return
                    yield chunk
        finally:
            exchange.close()

    @asynccontextmanager
    async def open(
        self, engine: EngineSettings, path: str, body: bytes
    ) -> AsyncIterator[EngineExchange]:
        """Send a POST for pass-through and yield the answer with its body unread.

        Raises:
            EngineUnreachableError: No connection.
            EngineTimeoutError: No answer in time.
        """
        exchange = await self._open(engine, path, body)
        try:
            yield exchange
        finally:
            exchange.close()

    async def list_models(self, engine: EngineSettings, *, wait: float | None = None) -> list[str]:
        """The model names the engine's ``/models`` lists.

        Raises:
            EngineError: The engine cannot be reached or answered badly.
        """
        with engine_errors(engine):
            response = await self._http.get(
                f"{engine.url}/models",
                headers=_headers(engine),
                timeout=wait if wait is not None else httpx.USE_CLIENT_DEFAULT,
            )
        name = engine.label
        content_type = response.headers.get("content-type", "")
        if response.status_code != 200:
            raise EngineStatusError(
                502,
                None,
                models_status_problem(engine, response.status_code, content_type),
                engine=name,
            )
        try:
            data = response.json().get("data", [])
            if not isinstance(data, list):
                raise ValueError("data is not a list")
            return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
        except (ValueError, AttributeError, RecursionError) as exc:
            raise EngineError(
                not_an_engine(engine, "its /models is not a model list"), engine=name
            ) from exc


def not_an_engine(engine: EngineSettings, why: str) -> str:
    """The sentence for a server that answers but is not an OpenAI-compatible engine."""
    return (
        f"The server at {engine.address} answers, but not as an OpenAI-compatible engine "
        f"({why}): is this the engine's address, or another server's (SearXNG, a web "
        "page)? Set TIGRESS_ENGINE_URL (or engine_url) to the engine's base URL, e.g. "
        "http://127.0.0.1:8080/v1."
    )


def serves_no_model(engine: EngineSettings) -> str:
    """The sentence for an engine whose ``/models`` answers with an empty list."""
    return (
        f"The engine {engine.label} answers, but {engine.address}/models lists no model: "
        "load one into it (Ollama: ollama pull MODEL), or check that this is the engine's "
        "address; chats get 404 until it lists one."
    )


def models_status_problem(engine: EngineSettings, status: int, content_type: str) -> str:
    """What an error status at ``<url>/models`` says about the configured address.

    A web page (HTML) is another kind of server; a 404 from an address without ``/v1``
    is an engine asked at the wrong path (llama-server, vLLM and Ollama all serve
    ``/v1/models``); anything else is the engine's own trouble.
    """
    if content_type.startswith("text/html"):
        return not_an_engine(engine, f"/models is a {status} web page")
    if status == 404:
        if not urlsplit(engine.url).path.rstrip("/").endswith("/v1"):
            return (
                f"The model engine {engine.label} answered 404 to {engine.address}/models: is "
                f"/v1 missing from the address? Try {engine.address}/v1 as TIGRESS_ENGINE_URL "
                "(or engine_url)."
            )
        return not_an_engine(engine, "404 at /models")
    return f"The model engine {engine.label} answered {status} to /models."


async def status_error(
    exchange: EngineExchange, engine: EngineSettings, *, relay: bool = False
) -> EngineStatusError:
    """The error for an engine's error status, with its body's message and its
    ``Retry-After``.

    Args:
        exchange: The engine's answer, its body unread.
        engine: The engine that answered.
        relay: Keep the body as it came (`gateway.errors.EngineBody`), for pass-through.
            A body over the read limit is not kept (a cut body would be broken JSON):
            the client then gets the gateway's error with the engine's status and words.
    """
    raw = await exchange.read_all(_ERROR_BODY_LIMIT + 1)
    relayed = None
    if relay and len(raw) <= _ERROR_BODY_LIMIT:
        relayed = EngineBody(raw, exchange.headers.get("content-type", ""))
    status = exchange.status
    retry_after = exchange.headers.get("retry-after")
    try:
        payload = json.loads(raw[:_ERROR_BODY_LIMIT])
    except (ValueError, RecursionError):
        payload = None
    if payload is None:
        text = raw[:200].decode("utf-8", "replace").strip()
        message = f"The model engine answered {status}" + (f": {text}" if text else ".")
        return EngineStatusError(
            status, None, message, engine=engine.label, retry_after=retry_after, relayed=relayed
        )
    message, error = quirks.error_object(payload)
    return EngineStatusError(
        status,
        {"error": error},
        message,
        engine=engine.label,
        retry_after=retry_after,
        relayed=relayed,
    )


def bounded(unfinished: int, engine: EngineSettings) -> None:
    """Refuse an event (or line) that is not finished past `MAX_EVENT_BYTES`.

    Args:
        unfinished: Bytes (or characters) of the event held while it is not finished.
        engine: The engine sending it.

    Raises:
        EngineStreamError: The engine's unfinished event is too large to hold.
    """
    if unfinished > MAX_EVENT_BYTES:
        raise EngineStreamError(
            f"The model engine sent an event larger than {MAX_EVENT_BYTES // (1024 * 1024)} MiB.",
            engine=engine.label,
        )


def _whole(
    pending: bytes, decoder: SSEDecoder, engine: str
) -> tuple[Iterator[EngineChunk | None], bytes]:
    """The chunks of what is whole in ``pending`` (None for ``[DONE]``), and the rest.

    Fast path: whole events that are one ``data: {...}`` line each, the way every engine
    writes them; anything else goes line by line through the decoder. The chunks are
    made as they are taken, so the ones before an error event still reach the caller.
    """
    cut = pending.rfind(b"\n\n") + 2 if b"\r" not in pending else 0
    if cut > 1 and decoder.idle:
        return _events(pending[:cut], decoder, engine), pending[cut:]
    lines = pending.split(b"\n")
    rest = lines.pop()
    return _lines(lines, decoder, engine), rest


def _events(events: bytes, decoder: SSEDecoder, engine: str) -> Iterator[EngineChunk | None]:
    for block in events.split(b"\n\n"):
        if not block:
            continue
        if block.startswith(b"data: {") and b"\n" not in block:
            try:
                payload = json.loads(block[6:])
            except UnicodeDecodeError:
                # Bytes that are not UTF-8 become U+FFFD, as in the line path and in
                # pass-through: the chunk's text is kept, never dropped unseen.
                payload = _loads(block[6:].decode("utf-8", "replace"))
            except (ValueError, RecursionError):
                continue
            if payload is None:
                continue
            if "error" in payload:
                raise EngineStreamError(quirks.error_object(payload)[0], engine=engine)
            yield parse_chunk(payload)
        elif block == b"data: [DONE]":
            yield None
            return
        else:
            yield from _lines([*block.split(b"\n"), b""], decoder, engine)


def _loads(text: str) -> Any:
    """The JSON value of ``text``, or None when it is not JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _lines(lines: list[bytes], decoder: SSEDecoder, engine: str) -> Iterator[EngineChunk | None]:
    for line in lines:
        event = decoder.feed(line.rstrip(b"\r").decode("utf-8", "replace"))
        if event is not None:
            yield from _chunks(event, engine)


def _last(pending: bytes, decoder: SSEDecoder, engine: str) -> Iterator[EngineChunk | None]:
    """The end of the body: its last line without a line end, and an event without the
    blank line after it."""
    if pending:
        yield from _lines([pending], decoder, engine)
    event = decoder.close()
    if event is not None:
        yield from _chunks(event, engine)


async def _finish(exchange: EngineExchange) -> None:
    """Read past ``[DONE]`` to the end of the body, so the connection can be kept."""
    while await exchange.read():
        pass


def _chunks(event: SSEEvent, engine: str) -> list[EngineChunk | None]:
    """The chunks of one event (None for ``[DONE]``, ending the list).

    Raises:
        EngineStreamError: The event is an error.
    """
    out: list[EngineChunk | None] = []
    for payload in quirks.event_payloads(event.data):
        if payload == "[DONE]":
            out.append(None)
            return out
        if event.error or (isinstance(payload, dict) and "error" in payload):
            raise EngineStreamError(quirks.error_object(payload)[0], engine=engine)
        if isinstance(payload, dict):
            out.append(parse_chunk(payload))
    return out
