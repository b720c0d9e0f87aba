"""The request id of each chat (SPEC 9): made when the request arrives, answered in the
``X-Request-Id`` header, written in the chat's access line and sent to the fetcher with
every read (``fetcher.client.REQUEST_ID_METADATA``), whose fetch log lines carry it, so a
chat and its fetches can be joined. Each POST to ``/mcp`` gets one too, and a tool call
it carries sends it with its reads.

`RequestIds` is the outermost middleware of the chat and MCP routes: refusals by the key check
get an id and a header too. The id is 16 hex digits from ``uuid4``; a client's own
``X-Request-Id`` is not taken (the log's ids are the gateway's, never a caller's words).
"""

from __future__ import annotations

import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "x-request-id"
#: Where the id is kept in the ASGI scope's state.
STATE_KEY = "request_id"


def new_request_id() -> str:
    """A fresh id: 16 hex digits (within the fetcher's 1-64 of ``A-Za-z0-9._:-``)."""
    return uuid.uuid4().hex[:16]


def request_id_of(scope: Scope) -> str:
    """The request's id ("" for a request `RequestIds` did not see)."""
    state: dict[str, Any] = scope.get("state") or {}
    value = state.get(STATE_KEY, "")
    return value if isinstance(value, str) else ""


class RequestIds:
    """ASGI middleware: an id for each request to ``paths``, in its state and answer."""

    def __init__(self, app: ASGIApp, *, paths: frozenset[str]) -> None:
        self._app = app
        self._paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in self._paths:
            await self._app(scope, receive, send)
            return
        request_id = new_request_id()
        scope.setdefault("state", {})[STATE_KEY] = request_id
        header = (HEADER.encode(), request_id.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), header]}
            await send(message)

        await self._app(scope, receive, send_with_id)
