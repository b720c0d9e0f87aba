"""MCP clients for the tests: the official SDK's client, and plain HTTP for what it hides.

`connect` is how a Python agent uses Tigress (the README shows the same): the SDK's
`mcp.Client` over `streamable_http_client`, the key in an ``Authorization`` header of the
httpx2 client it is given. `RawSession` speaks the Streamable HTTP transport by hand, for
what the SDK's client never does on purpose (a foreign ``Origin``, another key on an
open session, going away in the middle of an answer without a word).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.e2e.conftest import KEY

#: The revision the gateway serves (the newest with sessions).
PROTOCOL_VERSION = "2025-11-25"


@dataclass
class Notes:
    """What the server told one client besides answers."""

    logs: list[types.LoggingMessageNotificationParams] = field(default_factory=list)
    progress: list[tuple[float, str | None]] = field(default_factory=list)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        """The client's logging callback."""
        self.logs.append(params)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        """A call's progress callback."""
        self.progress.append((progress, message))

    def events(self) -> list[dict[str, Any]]:
        """The tool events logged so far (``thor_event`` objects)."""
        return [dict(n.data) for n in self.logs if n.logger == "tigress.events"]


@asynccontextmanager
async def connect(
    url: str, *, key: str | None = KEY, notes: Notes | None = None
) -> AsyncIterator[Client]:
    """The SDK's client on ``{url}/mcp``, with ``key`` as Bearer (none when None)."""
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(10, read=60)) as http,
        Client(
            streamable_http_client(f"{url}/mcp", http_client=http),
            logging_callback=None if notes is None else notes.log,
        ) as client,
    ):
        yield client


def text_of(result: types.CallToolResult) -> str:
    """The text of a tool result (Tigress answers one text block)."""
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def mcp_errors(error: BaseException) -> list[MCPError]:
    """The MCP errors inside what the SDK's client raised (it raises exception groups)."""
    if isinstance(error, MCPError):
        return [error]
    if isinstance(error, BaseExceptionGroup):
        return [e for inner in error.exceptions for e in mcp_errors(inner)]
    return []


class RawSession:
    """A session spoken by hand over httpx (JSON-RPC over Streamable HTTP)."""

    def __init__(self, http: httpx.AsyncClient, url: str, headers: Mapping[str, str]) -> None:
        self._http = http
        self.endpoint = f"{url}/mcp"
        self.headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            **headers,
        }
        self.session_id: str | None = None
        self._next_id = 0

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A JSON-RPC request object with a fresh id."""
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        return message

    def session_headers(self) -> dict[str, str]:
        """Headers of a request inside the session."""
        extra = {"Mcp-Protocol-Version": PROTOCOL_VERSION}
        if self.session_id is not None:
            extra["Mcp-Session-Id"] = self.session_id
        return {**self.headers, **extra}

    async def post(self, message: Mapping[str, Any], **headers: str) -> httpx.Response:
        """POST one message (inside the session, once there is one)."""
        return await self._http.post(
            self.endpoint, json=dict(message), headers={**self.session_headers(), **headers}
        )

    async def initialize(self) -> httpx.Response:
        """``initialize`` then ``notifications/initialized``; keeps the session id."""
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"},
        }
        response = await self._http.post(
            self.endpoint, json=self.request("initialize", params), headers=self.headers
        )
        if response.status_code == 200:
            self.session_id = response.headers["mcp-session-id"]
            notified = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert notified.status_code == 202, (notified.status_code, notified.text)
        return response

    async def delete(self) -> httpx.Response:
        """End the session."""
        return await self._http.delete(self.endpoint, headers=self.session_headers())


def sse_messages(text: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body."""
    return [
        json.loads(line[len("data:") :])
        for line in text.splitlines()
        if line.startswith("data:") and line[len("data:") :].strip()
    ]
