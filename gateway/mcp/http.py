"""The MCP endpoint at ``/mcp``: Streamable HTTP through the official SDK, with Tigress's
sessions, limits and Origin check around it (I/O).

Served revision: the SDK's newest handshake revision (2025-11-25, and the older ones it
negotiates). The research tools need a session: rule 1 allows only hosts of the
session's own search results, and the ledger and budgets last for the session. The
2026-07-28 revision has no sessions (every request stands alone), so a request naming
it is answered ``-32022`` (unsupported protocol version) listing the revisions served,
which is how clients that try it first (the SDK's client in ``auto`` mode) learn to fall
back to ``initialize``.

What happens to one request, in order (the first two are middleware in front of every
route, `McpOriginGuard` and `gateway.http.access.Access`):

1. ``Origin`` present and not allowed: 403 (`gateway.http.origin`); CORS preflights
   from allowed pages are answered here.
2. Bearer key and the key's requests per minute, as for the chat API: 401, 429.
3. `McpEndpoint`: a 2026-07-28 request gets -32022; a request without
   ``Mcp-Session-Id`` may only be ``initialize``, which opens a session if the key and
   the gateway have room (429, 503 otherwise); a request naming a session the key did
   not open, or that ended, gets 404.
4. A request reusing the JSON-RPC id of one still being answered in its session gets
   409 (the SDK would orphan the first). Otherwise the SDK's session manager serves it.
   When a POST carrying a tool call ends before its answer was sent (the client went
   away), the call is cancelled.

Sessions end when the client sends DELETE, when they were idle for ``[mcp]
session_idle`` seconds, and at shutdown; the gateway ends one by sending the SDK the
same DELETE a client would.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway import prompts
from gateway.errors import ShuttingDownError
from gateway.http.access import MCP_PATH
from gateway.http.origin import OriginPolicy, OriginVerdict, cors_headers
from gateway.mcp.sessions import McpSession, McpSessions, Refusal, Ticket
from gateway.mcp.tools import SESSION_HEADER, McpTools
from gateway.metrics import GatewayMetrics
from gateway.stream.access_line import key_name
from gateway.stream.drain import Drain

log = logging.getLogger(__name__)

#: Protocol revisions served (the SDK's handshake revisions, which have sessions).
SERVED_VERSIONS = tuple(HANDSHAKE_PROTOCOL_VERSIONS)
#: JSON-RPC: invalid request (the SDK's code for refusals at the HTTP level).
_INVALID_REQUEST = -32600
_PARSE_ERROR = -32700
#: Seconds a client refused a session is asked to wait.
_RETRY_AFTER = "60"
#: Longest wait between two looks for idle sessions.
_REAP_INTERVAL = 1.0


def rpc_error(
    status: int,
    message: str,
    *,
    code: int = _INVALID_REQUEST,
    request_id: Any = None,
    data: Any = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """A JSON-RPC error answer with an HTTP status (what the SDK's client reads)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = {"jsonrpc": "2.0", "id": request_id, "error": error}
    return JSONResponse(body, status_code=status, headers=headers)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


class McpOriginGuard:
    """ASGI middleware: the ``Origin`` check and CORS of ``/mcp`` (before the key check).

    # Security
    Rule: MCP 2025-11-25 requires validating ``Origin`` on every request; one present
    and not in ``[mcp] allowed_origins`` gets 403 before anything else, key included.
    Threat: a web page driving the research tools of a gateway it can reach (DNS
    rebinding to loopback; cross-site requests on a LAN). Callers may rely on every
    request reaching ``/mcp`` having no ``Origin`` or an allowed one. Proved by
    ``tests/e2e/test_mcp.py::test_a_foreign_origin_is_refused`` and
    ``tests/gateway/mcp/test_origin.py``.
    """

    def __init__(self, app: ASGIApp, *, policy: OriginPolicy, metrics: GatewayMetrics) -> None:
        self._app = app
        self._policy = policy
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != MCP_PATH:
            await self._app(scope, receive, send)
            return
        origin = _header(scope, b"origin")
        verdict = self._policy.check(origin)
        if verdict is OriginVerdict.REFUSED:
            self._metrics.mcp_refused.labels("origin").inc()
            await rpc_error(403, "Forbidden: this Origin may not use the MCP endpoint.")(
                scope, receive, send
            )
            return
        if verdict is OriginVerdict.ABSENT or origin is None:
            await self._app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS" and _header(scope, b"access-control-request-method"):
            headers = cors_headers(origin, preflight=True)
            await send({"type": "http.response.start", "status": 204, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        extra = cors_headers(origin, preflight=False)

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self._app(scope, receive, send_with_cors)


@dataclass(frozen=True)
class _Body:
    """A POST's body, read whole, and what it asks for (a single JSON-RPC message)."""

    raw: bytes
    method: str | None = None
    request_id: str | int | None = None
    valid_json: bool = True


def _read_message(raw: bytes) -> _Body:
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return _Body(raw, valid_json=False)
    if not isinstance(message, dict):
        return _Body(raw)
    method = message.get("method")
    request_id = message.get("id")
    return _Body(
        raw,
        method=method if isinstance(method, str) else None,
        request_id=request_id if isinstance(request_id, str | int) else None,
    )


class _TooLarge(Exception):
    """The body passed the limit."""


class _Gone(Exception):
    """The client went away while sending the body."""


async def _read_body(receive: Receive, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Gone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` giving ``body`` first, then the client's own messages (disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


class McpEndpoint:
    """The ASGI app at ``/mcp`` (one per gateway; run it with `running`)."""

    def __init__(
        self,
        tools: McpTools,
        sessions: McpSessions,
        *,
        metrics: GatewayMetrics,
        drain: Drain,
        max_body_bytes: int,
    ) -> None:
        """Args:
        tools: The MCP server (tool listing and calls).
        sessions: The open sessions.
        metrics: The gateway's metric families.
        drain: The shutdown state (sessions end when its grace period does).
        max_body_bytes: The largest request body taken (the chat API's limit).
        """
        self._sessions = sessions
        self._metrics = metrics
        self._drain = drain
        self._max_body = max_body_bytes
        self._manager = StreamableHTTPSessionManager(
            app=tools.server,
            # Tigress keeps the session table (McpSessions): the SDK's own idle timer and
            # cap stay off so that one place decides when a session ends.
            session_idle_timeout=None,
            max_sessions=None,
            max_request_body_size=max_body_bytes,
        )
        #: Set at the end of the shutdown grace period (from the drain's timer callback).
        self._cut = asyncio.Event()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve sessions for the block (the app's lifespan); end them all afterwards."""
        async with self._manager.run(), anyio.create_task_group() as group:
            self._drain.add(self)
            group.start_soon(self._expire_idle)
            group.start_soon(self._end_at_cut)
            try:
                yield
            finally:
                self._drain.discard(self)
                await self._end_all("shutdown")
                group.cancel_scope.cancel()

    def interrupt(self, error: ShuttingDownError) -> None:
        """The end of the shutdown grace period: end every session (their streams and
        calls with them). Called from the drain's timer, outside any task: it only sets
        an event that `_end_at_cut` waits for."""
        self._cut.set()

    async def _end_at_cut(self) -> None:
        await self._cut.wait()
        await self._end_all("shutdown")

    async def _expire_idle(self) -> None:
        while True:
            for session in self._sessions.expired():
                self._metrics.mcp_session_events.labels("expired").inc()
                log.info("mcp session %s… expired (idle)", session.session_id[:8])
                await self._terminate(session.session_id)
            until = self._sessions.until_next_expiry()
            wait = _REAP_INTERVAL if until is None else min(max(until, 0.01), _REAP_INTERVAL)
            await anyio.sleep(wait)

    async def _end_all(self, event: str) -> None:
        if len(self._sessions):
            log.info("ending %d mcp sessions (%s)", len(self._sessions), event)
        for session in self._sessions.all():
            if self._sessions.close(session.session_id) is not None:
                self._metrics.mcp_session_events.labels(event).inc()
                await self._terminate(session.session_id)

    async def _terminate(self, session_id: str) -> None:
        """End one session in the SDK by sending it the DELETE a client would send."""
        self._metrics.mcp_sessions.set(len(self._sessions))
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "DELETE",
            "scheme": "http",
            "path": MCP_PATH,
            "raw_path": MCP_PATH.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(SESSION_HEADER.encode(), session_id.encode("latin-1"))],
            "client": None,
            "server": None,
            "state": {},
        }
        delivered = False

        async def receive() -> Message:
            nonlocal delivered
            if delivered:
                return {"type": "http.disconnect"}
            delivered = True
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Message) -> None:
            return None

        with anyio.CancelScope(shield=True):
            await self._manager.handle_request(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = scope.get("state", {})
        key = state.get("key", -1)
        client = state.get("client")
        version = _header(scope, b"mcp-protocol-version")
        if version is not None and version not in SERVED_VERSIONS:
            self._metrics.mcp_refused.labels("protocol_version").inc()
            await rpc_error(
                400,
                f"Unsupported protocol version {version}: this server needs a session "
                "(initialize) and serves " + ", ".join(SERVED_VERSIONS) + ".",
                code=UNSUPPORTED_PROTOCOL_VERSION,
                data={"supported": list(SERVED_VERSIONS), "requested": version},
            )(scope, receive, send)
            return
        body: _Body | None = None
        if scope["method"] == "POST":
            try:
                body = _read_message(await _read_body(receive, self._max_body))
            except _TooLarge:
                self._metrics.mcp_refused.labels("too_large").inc()
                message = f"The request body is larger than {self._max_body} bytes."
                await rpc_error(413, message)(scope, receive, send)
                return
            except _Gone:
                return
            receive = _replay(body.raw, receive)
        session_id = _header(scope, SESSION_HEADER.encode())
        if session_id is None:
            await self._open(key, client, body, scope, receive, send)
            return
        session = self._sessions.find(session_id, key)
        if session is None:
            self._metrics.mcp_refused.labels("unknown_session").inc()
            await rpc_error(404, "Session not found: it ended or expired; initialize again.")(
                scope, receive, send
            )
            return
        await self._serve(session, body, scope, receive, send)

    async def _open(
        self,
        key: int,
        client: str | None,
        body: _Body | None,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        """A request without a session: only ``initialize``, which opens one."""
        if body is None or not body.valid_json or body.method != "initialize":
            code = _PARSE_ERROR if body is not None and not body.valid_json else _INVALID_REQUEST
            message = "Bad Request: no Mcp-Session-Id; send initialize first."
            await rpc_error(400, message, code=code)(scope, receive, send)
            return
        if self._drain.draining:
            self._metrics.mcp_refused.labels("shutdown").inc()
            error = ShuttingDownError("The gateway is shutting down.", 5)
            response = JSONResponse(error.rpc_body(), status_code=503, headers=error.headers())
            await response(scope, receive, send)
            return
        ticket = self._sessions.reserve(key, client)
        if isinstance(ticket, Refusal):
            await self._refuse(ticket, body, scope, receive, send)
            return
        if ticket.evicted is not None:
            # The client's oldest idle session made room for this one (no keys).
            self._metrics.mcp_session_events.labels("evicted").inc()
            log.info(
                "mcp session %s… evicted (its client opened another)", ticket.evicted.session_id[:8]
            )
            await self._terminate(ticket.evicted.session_id)
        filed = False

        async def watch(message: Message) -> None:
            nonlocal filed
            if message["type"] == "http.response.start" and message["status"] < 400:
                for name, value in message.get("headers", []):
                    if name.lower() == SESSION_HEADER.encode() and not filed:
                        # Filed before the client can read the id: its next request may
                        # arrive while this response is still being finished.
                        self._file(ticket, value.decode("latin-1"))
                        filed = True
            await send(message)

        try:
            await self._manager.handle_request(scope, receive, watch)
        finally:
            if not filed:
                self._sessions.release(ticket)

    def _file(self, ticket: Ticket, session_id: str) -> None:
        session = self._sessions.open(ticket, session_id)
        self._metrics.mcp_session_events.labels("opened").inc()
        self._metrics.mcp_sessions.set(len(self._sessions))
        log.info("mcp session %s… opened (key %s)", session.session_id[:8], key_name(session.key))

    async def _refuse(
        self, refusal: Refusal, body: _Body, scope: Scope, receive: Receive, send: Send
    ) -> None:
        self._metrics.mcp_session_events.labels(refusal.value).inc()
        if refusal is Refusal.KEY_LIMIT:
            status, message = 429, prompts.MCP_KEY_SESSIONS
        elif refusal is Refusal.CLIENT_LIMIT:
            status, message = 429, prompts.MCP_CLIENT_SESSIONS
        else:
            status, message = 503, prompts.MCP_SESSIONS_FULL
        response = rpc_error(
            status, message, request_id=body.request_id, headers={"Retry-After": _RETRY_AFTER}
        )
        await response(scope, receive, send)

    async def _serve(
        self, session: McpSession, body: _Body | None, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """A request of an open session, through the SDK.

        A request whose JSON-RPC id is the id of one still being answered in the session
        gets a 409 with a JSON-RPC error at once: the SDK keeps one answer stream per id,
        so it would take the first request's stream, leave that POST unanswered, and its
        end would cancel the first call. JSON-RPC ids must be unique among a sender's
        requests in flight (MCP 2025-11-25, base protocol), so only a faulty or hostile
        client meets this.
        """
        # The id of a request (a message with a method); a client's answers carry ids too.
        request_id = body.request_id if body is not None and body.method is not None else None
        if request_id is not None:
            if request_id in session.requests:
                self._metrics.mcp_refused.labels("duplicate_id").inc()
                message = prompts.MCP_DUPLICATE_ID.format(id=json.dumps(request_id))
                await rpc_error(409, message, request_id=request_id)(scope, receive, send)
                return
            session.requests.add(request_id)
        self._sessions.enter(session)
        status = 0

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._manager.handle_request(scope, receive, watch)
        finally:
            self._sessions.leave(session)
            if request_id is not None:
                session.requests.discard(request_id)
                # The exchange is over; a call still running has nobody to answer.
                running = session.calls.pop(request_id, None)
                if running is not None:
                    running.cancel()
            ended = scope["method"] == "DELETE" and 200 <= status < 300
            if ended and self._sessions.close(session.session_id) is not None:
                self._metrics.mcp_session_events.labels("closed").inc()
                self._metrics.mcp_sessions.set(len(self._sessions))
                log.info("mcp session %s… closed by its client", session.session_id[:8])
