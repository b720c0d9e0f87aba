"""What the loopback HTTP/1.1 stand-ins share (``testkit.origin``, ``testkit.searxng``).

:class:`LoopbackServer` listens on 127.0.0.1 (with TLS when given a context), reads
request heads on each connection in turn and hands each to :meth:`LoopbackServer.answer`,
and :meth:`LoopbackServer.stop` ends every connection and handler, a hanging one too, so
a test never leaves a task behind. :func:`parse_head` reads a request head.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

__all__ = ["LoopbackServer", "parse_head"]


def parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    """A request head's method, target and headers (lower-case names, the last one kept)."""
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return method, target, headers


class LoopbackServer:
    """An HTTP/1.1 server on 127.0.0.1; subclasses say how a request is answered."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self.port = 0
        #: Connections accepted so far; each request is told the number of its own.
        self.connections = 0
        self._ssl = ssl_context
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self, port: int = 0) -> None:
        """Listen on 127.0.0.1, on ``port`` or an ephemeral one."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port, ssl=self._ssl)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening, drop every connection and end its handler (hanging ones too)."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._handlers):
            task.cancel()
        for task in list(self._handlers):
            # A handler cancelled before it ran raises CancelledError when awaited.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._server is not None:
            await self._server.wait_closed()

    async def answer(
        self,
        head: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        connection: int,
    ) -> bool:
        """Answer one request whose head was read; False to close the connection."""
        raise NotImplementedError

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        self._writers.add(writer)
        self.connections += 1
        connection = self.connections
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
                    return
                if not await self.answer(head, reader, writer, connection):
                    return
        except (ConnectionError, ssl.SSLError):
            return
        except asyncio.CancelledError:
            # Only stop() cancels handlers; ending normally keeps asyncio from logging
            # the cancelled task as an error.
            return
        finally:
            self._handlers.discard(task)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
