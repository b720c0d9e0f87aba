"""What the benchmarks that run their stand-ins in processes of their own share.

- the stand-ins' processes: a free loopback port, the test CA handed over in a folder,
  a child (``python -m bench.NAME ROLE ...``) that prints one line when it is ready and
  stops on SIGTERM;
- the scripted engine's side of HTTP: its connection handler (:func:`engine_handler`: one
  request read, the ``/models`` answer, the chunked SSE frames of a streamed answer) for
  ``bench/research.py`` and ``bench/gateway_stream.py``.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import trustme

__all__ = [
    "SSE_END",
    "SSE_HEAD",
    "chunk",
    "engine_handler",
    "framed",
    "free_port",
    "load_ca",
    "models_answer",
    "read_request",
    "save_ca",
    "spawn",
    "stop",
    "wait_for_signal",
]

#: The head of a streamed answer: SSE in HTTP chunks.
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def framed(data: bytes) -> bytes:
    """``data`` as one HTTP chunk."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


#: The end of a streamed answer: ``[DONE]``, then the last chunk.
SSE_END = framed(b"data: [DONE]\n\n") + b"0\r\n\r\n"


def chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One ``chat.completion.chunk`` event, framed as an HTTP chunk."""
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return framed(b"data: " + json.dumps(body).encode() + b"\n\n")


def models_answer(model: str) -> bytes:
    """The whole answer to ``GET /models``: ``model`` alone."""
    models = json.dumps({"object": "list", "data": [{"id": model}]}).encode()
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(models)}\r\n\r\n".encode()
        + models
    )


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, dict[str, Any]]:
    """One request to the engine: its head and its JSON body (``{}`` without one).

    Raises:
        asyncio.IncompleteReadError: The client closed the connection.
    """
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head, json.loads(await reader.readexactly(length)) if length else {}


#: A scripted engine's answer to one chat request: the SSE events to stream, in order.
Answer = Callable[[dict[str, Any]], Awaitable[Sequence[bytes]]]


def engine_handler(
    model: str, answer: Answer
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    """A scripted engine's connection handler for :func:`asyncio.start_server`: requests
    read one after another on the connection, ``GET`` answered with ``model`` as the one
    model, a chat request streamed as ``answer(body)``'s events, each drained as it goes."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head, body = await read_request(reader)
                if head.startswith(b"GET"):
                    writer.write(models_answer(model))
                    await writer.drain()
                    continue
                events = await answer(body)
                writer.write(SSE_HEAD)
                for event in events:
                    writer.write(event)
                    await writer.drain()
                writer.write(SSE_END)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return serve


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def wait_for_signal() -> None:
    """Return on SIGTERM or SIGINT (a stand-in's life)."""
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopped.set)
    await stopped.wait()


def save_ca(folder: Path) -> trustme.CA:
    """A new test CA, written to ``folder`` for the stand-ins' processes."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    ca.private_key_pem.write_to_path(str(folder / "ca-key.pem"))
    return ca


def load_ca(folder: Path) -> trustme.CA:
    """The test CA :func:`save_ca` wrote."""
    return trustme.CA.from_pem(
        (folder / "ca.pem").read_bytes(), (folder / "ca-key.pem").read_bytes()
    )


async def spawn(module: str, *args: str) -> tuple[asyncio.subprocess.Process, str]:
    """Start ``module`` as ``python -m module args...`` would, and wait (a minute at most)
    for the first line it prints.

    The module runs under a ``-c`` main rather than as the main module itself: the children
    of a ``forkserver`` (the fetcher's render workers) import the parent's main module
    again before their task, unless it is a package's ``__main__`` as production's
    ``python -m fetcher`` is. Run as ``-m bench.research``, each page would pay that
    import (about 100 ms, httpx and the gateway included): a cost of the bench, not of
    Tigress.
    """
    launch = f"import runpy; runpy.run_module({module!r}, run_name='__main__')"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", launch, *args, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 60)
    return process, line.decode().strip()


async def stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM, then wait for the process to end."""
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    await process.wait()
