"""A SearXNG stand-in: a real HTTP/1.1 server on 127.0.0.1 serving the recorded answers.

Each answer in ``testkit/fixtures/searxng/`` (copied from ``shared/fixtures/searxng``) is
served with the status, Content-Type and Server-Timing it was recorded with
(``index.json``). Result addresses can be rewritten to point at the local HTTPS origin
(``testkit/origin.py``), so a search can be followed by a real read. The server
can also wait before answering, never answer, and record what it was asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import socket
from collections.abc import AsyncIterator, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from testkit.server import LoopbackServer, parse_head

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "searxng"


@dataclasses.dataclass(frozen=True)
class Served:
    """One answer of the stand-in.

    Attributes:
        status: HTTP status.
        content_type: The Content-Type header.
        body: The body, as recorded.
        server_timing: The Server-Timing header, or None to send none.
        delay: Seconds to wait before answering.
        hang: Never answer (until the stand-in stops).
        cut: Send half the body, then hang up (Content-Length promises all of it).
        headers: More headers (``Location``...).
    """

    status: int
    content_type: str
    body: bytes
    server_timing: str | None = None
    delay: float = 0.0
    hang: bool = False
    cut: bool = False
    headers: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class Asked:
    """One request the stand-in received."""

    path: str
    params: dict[str, str]
    headers: dict[str, str]


@cache
def index() -> dict[str, dict[str, Any]]:
    """Every capture with a body file, by file name: ``index.json`` and the limiter's."""
    entries = json.loads((FIXTURES / "index.json").read_text())
    entries += json.loads((FIXTURES / "limiter_probe.json").read_text())
    return {entry["file"]: entry for entry in entries if entry.get("file")}


def recorded(file: str) -> Served:
    """A recorded answer, served as it was recorded."""
    entry = index()[file]
    return Served(
        status=entry["status"],
        content_type=entry["content_type"],
        body=(FIXTURES / file).read_bytes(),
        server_timing=entry.get("server_timing"),
    )


def search_files() -> list[str]:
    """Every recorded answer of ``/search`` (not ``/config``)."""
    return [name for name, entry in index().items() if "/search" in entry["request"]]


def pointed_at(served: Served, hosts: Mapping[str, str], port: int) -> Served:
    """``served`` with each result's address moved to ``https://<host>:<port>/<same path>``.

    Args:
        served: A recorded JSON answer.
        hosts: Recorded host → local name (a name the origin's certificate holds); hosts
            not listed go to the first local name.
        port: The origin's port.
    """
    document = json.loads(served.body)
    fallback = next(iter(hosts.values()))
    for result in document["results"]:
        parts = urlsplit(result["url"])
        host = hosts.get(parts.hostname or "", fallback)
        result["url"] = f"https://{host}:{port}{parts.path or '/'}"
        if parts.query:
            result["url"] += f"?{parts.query}"
        result["parsed_url"] = ["https", f"{host}:{port}", parts.path, "", parts.query, ""]
    return dataclasses.replace(served, body=json.dumps(document).encode())


class SearxngStandIn(LoopbackServer):
    """An HTTP server on 127.0.0.1 answering ``/search`` and ``/healthz`` as SearXNG does.

    ``answers`` maps a ``q`` value to its answer; other queries get ``default``. With
    ``hold_until`` set, no search is answered before that many have arrived (proof that a
    caller sends them at the same time, without timing anything).
    """

    def __init__(self) -> None:
        super().__init__()
        self.answers: dict[str, Served] = {}
        self.hold_until = 0
        self._arrived = asyncio.Condition()
        self.default = recorded("search_normal.json")
        self.health = Served(200, "text/plain; charset=utf-8", b"OK")
        self.asked: list[Asked] = []
        #: Hanging searches whose caller closed the connection (it gave up or was cancelled).
        self.abandoned = 0

    @property
    def url(self) -> str:
        """The base URL, as the gateway's settings hold it."""
        return f"http://127.0.0.1:{self.port}"

    def searches(self) -> list[str]:
        """The ``q`` of every search received, in order."""
        return [asked.params.get("q", "") for asked in self.asked if asked.path == "/search"]

    async def answer(
        self,
        head: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        connection: int,
    ) -> bool:
        asked = _parse(head)
        self.asked.append(asked)
        if asked.path == "/search":
            served = self.answers.get(asked.params.get("q", ""), self.default)
            async with self._arrived:
                self._arrived.notify_all()
                await self._arrived.wait_for(lambda: len(self.searches()) >= self.hold_until)
        elif asked.path == "/healthz":
            served = self.health
        else:
            served = Served(404, "text/html; charset=utf-8", b"<h1>Not Found</h1>")
        if served.hang:
            # Never answered; the caller closing its end shows up as the end of input.
            with contextlib.suppress(ConnectionError):
                await reader.read()
            self.abandoned += 1
            await asyncio.Event().wait()
        if served.delay:
            await asyncio.sleep(served.delay)
        lines = [
            f"HTTP/1.1 {served.status} Status",
            f"Content-Type: {served.content_type}",
            f"Content-Length: {len(served.body)}",
        ]
        if served.server_timing is not None:
            lines.append(f"Server-Timing: {served.server_timing}")
        lines += [f"{name}: {value}" for name, value in served.headers]
        body = served.body[: len(served.body) // 2] if served.cut else served.body
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()
        if served.cut:
            writer.transport.abort()
            raise ConnectionResetError
        return True


def _parse(head: bytes) -> Asked:
    _method, target, headers = parse_head(head)
    parts = urlsplit(target)
    params = {
        key: values[-1] for key, values in parse_qs(parts.query, keep_blank_values=True).items()
    }
    return Asked(path=parts.path, params=params, headers=headers)


@contextlib.asynccontextmanager
async def running_searxng() -> AsyncIterator[SearxngStandIn]:
    """Start a :class:`SearxngStandIn` and stop it afterwards."""
    stand_in = SearxngStandIn()
    await stand_in.start()
    try:
        yield stand_in
    finally:
        await stand_in.stop()


@contextlib.contextmanager
def refusing_url() -> Iterator[str]:
    """A base URL on 127.0.0.1 whose port refuses connections (bound, never listening)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()
