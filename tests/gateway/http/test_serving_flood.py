"""A valid request head followed by a malformed body (issue 22, finding 3): one 400 or a
closed connection each, and no traceback in the log, however many come."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry

from testkit.engine import FakeEngine
from tests.gateway.conftest import KEY, GatewayFactory, make_settings

REQUESTS = 50


def head(extra: str) -> bytes:
    return (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
        f"{extra}Transfer-Encoding: chunked\r\n\r\n"
    ).encode()


#: Heads the gateway answers without reading the body, and one whose body it reads.
HEADS = {
    "read": head(f"Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"),
    "no-key": head("Content-Type: application/json\r\n"),
    "text-plain": head(f"Authorization: Bearer {KEY}\r\nContent-Type: text/plain\r\n"),
}


@pytest.mark.parametrize(
    "body",
    [
        b"zz\r\n{}\r\n0\r\n\r\n",  # not a chunk size
        b"5\r\n{}\r\n0\r\n\r\n",  # a chunk shorter than its size, then garbage
        b"1" * 40 + b"\r\n",  # a chunk size no integer holds
    ],
    ids=["size", "short-chunk", "huge-size"],
)
@pytest.mark.parametrize("pause", [0.0, 0.02], ids=["one-write", "head-first"])
@pytest.mark.parametrize("kind", HEADS)
async def test_a_malformed_chunked_body_logs_no_traceback(
    engine: FakeEngine,
    gateway_at: GatewayFactory,
    caplog: pytest.LogCaptureFixture,
    body: bytes,
    pause: float,
    kind: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    registry = CollectorRegistry()
    answers: list[bytes] = []
    async with gateway_at(settings=make_settings(engine), registry=registry) as url:
        # uvicorn's loggers do not propagate to the root (its logging configuration):
        # listen to them directly, as an operator's journal would.
        uvicorn_log = logging.getLogger("uvicorn")
        uvicorn_log.addHandler(caplog.handler)
        port = int(url.rsplit(":", 1)[1])

        async def one() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(HEADS[kind])
            if pause:
                # The head is served first (the handler starts reading the body, or
                # answers), then the broken chunk arrives.
                await writer.drain()
                await asyncio.sleep(pause)
            writer.write(body)
            try:
                answers.append(await asyncio.wait_for(reader.read(), 10))
            finally:
                writer.close()

        await asyncio.gather(*(one() for _ in range(REQUESTS)))
        await asyncio.sleep(0.1)  # what the handlers log as they end
        uvicorn_log.removeHandler(caplog.handler)
    tracebacks = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert tracebacks == []
    assert not any("write_eof" in r.getMessage() for r in caplog.records)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    # Each client is told, or (when the answer had begun) its connection is closed.
    if kind == "read":
        # The handler was waiting for the body: each client gets the 400 in words.
        assert all(a.startswith(b"HTTP/1.1 400") and b"Invalid HTTP request" in a for a in answers)
    else:
        # The gateway answered before the body came (401, 415), or the 400 came first.
        assert all(
            a.startswith((b"HTTP/1.1 400", b"HTTP/1.1 401", b"HTTP/1.1 415")) for a in answers
        )
    assert engine.chats == []
