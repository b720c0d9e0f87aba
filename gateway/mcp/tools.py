"""The research tools as MCP tools: listing them, and running one call in its session.

`McpTools` builds the SDK's low-level `mcp.server.lowlevel.Server` around the gateway's
`gateway.tools.base.ToolBox`: the same `Tool` objects the chat loop offers, run with the
session's `gateway.tools.base.ToolContext` (`gateway.mcp.sessions`). Over MCP:

- ``tools/list`` gives each tool's name, description and JSON schema as the chat loop
  offers them, with one exception: a tool's entry may be replaced for MCP (the fetch
  tool's descriptions say that only this session's search results can be opened, since
  no user messages reach the gateway). The tools' own texts say "session" where the chat
  loop's say "answer" (`gateway.prompts.Scope`, from the session's ToolContext).
- ``tools/call`` is vetted like a call of the chat loop (`gateway.loop.calls.vet_call`:
  required arguments, a repeat of a call already run in the session is not run again;
  a call a rule or a budget refused did not run, so it is no repeat later),
  holds one of the key's concurrent chats and one of the gateway's chat slots while it
  runs, is bounded by the ``tool`` timeout, and answers with the tool's text and the
  budget trailer (SPEC 5). A call that failed (the tool, its timeout, its arguments, the
  limits) has ``isError`` set; a refusal by a rule or a budget, and a repeat, are plain
  answers (`ANSWERED`); either way the text says why, as it does for the chat loop.
- Each tool event (``searched``, ``read``) goes to the client while the call runs: as a
  ``notifications/progress`` when the call asked for progress (a progress token), and as
  a ``notifications/message`` log entry at level ``info`` whose data is the event's
  ``thor_event`` object (SPEC 4), unless the client set a higher level.
- A call stops when the client cancels it, ends the session, or goes away before its
  answer (`gateway.mcp.http` cancels it then); closing the tool's generator cancels the
  fetcher's read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections.abc import Mapping
from contextlib import aclosing
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types import INVALID_PARAMS, INVALID_REQUEST
from starlette.requests import Request

from gateway import prompts
from gateway.errors import GatewayError
from gateway.http.access import KeyLimits
from gateway.http.request_id import request_id_of
from gateway.loop.calls import CallVerdict, RawCall, settle_seen, vet_call
from gateway.mcp.sessions import McpSession, McpSessions
from gateway.metrics import GatewayMetrics
from gateway.stream.drain import Drain
from gateway.tools.base import Tool, ToolBox, ToolOutcome, ToolResult, failed, no_result, timed_out
from gateway.tools.events import ThorEvent

if TYPE_CHECKING:
    # gateway.http.services holds the MCP endpoint, which holds this.
    from gateway.http.services import ChatSlots

log = logging.getLogger(__name__)

#: The server's name in ``initialize`` (``serverInfo.name``).
SERVER_NAME = "tigress"
#: Header carrying the session id (Streamable HTTP).
SESSION_HEADER = "mcp-session-id"
#: Severity order of MCP log levels (RFC 5424), least severe first.
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
#: The level tool events are logged at.
EVENT_LOG_LEVEL: types.LoggingLevel = "info"
#: The ``logger`` name of tool-event log entries.
EVENT_LOGGER = "tigress.events"
#: Outcomes whose text is an answer for the model, not a failure: a rule or a budget said
#: no, or the call repeats one already run. Their results are not ``isError`` (clients
#: such as Open WebUI turn an error result into an exception, and the model would read an
#: exception's text instead of the words written for it).
ANSWERED = frozenset({ToolOutcome.OK.value, ToolOutcome.REFUSED.value, CallVerdict.DUPLICATE.value})
#: Outcome labels of calls that ended without a tool result of their own.
LIMITED = "limited"
CANCELLED = "cancelled"
SHUTDOWN = "shutdown"


def session_header(ctx: ServerRequestContext[Any, Any]) -> tuple[str, int] | None:
    """The session id and key position of the HTTP request that carried ``ctx``."""
    request = ctx.request
    if not isinstance(request, Request):
        return None
    session_id = request.headers.get(SESSION_HEADER)
    key = request.scope.get("state", {}).get("key")
    if session_id is None or not isinstance(key, int):
        return None
    return session_id, key


class McpTools:
    """The MCP server of one gateway: tool listing and tool calls."""

    def __init__(
        self,
        tools: ToolBox,
        sessions: McpSessions,
        *,
        schemas: Mapping[str, Mapping[str, Any]],
        tool_timeout: float,
        metrics: GatewayMetrics,
        slots: ChatSlots,
        key_limits: KeyLimits,
        drain: Drain,
        version: str = "",
    ) -> None:
        """Args:
        tools: The tools offered (the chat loop's own objects).
        sessions: The open sessions (ledger, budgets, calls seen).
        schemas: Tools entries (``{"type": "function", "function": {...}}``) listed over
            MCP instead of the tool's own, by tool name.
        tool_timeout: Seconds one call may run (the chat loop's ``tool`` timeout).
        metrics: The gateway's metric families.
        slots: The gateway-wide chat slots (a running call holds one).
        key_limits: The per-key limits (a running call holds one of the key's chats).
        drain: The shutdown state (no call starts while draining).
        version: The gateway's version, for ``serverInfo``.
        """
        self._tools = tools
        self._sessions = sessions
        self._schemas = dict(schemas)
        self._timeout = tool_timeout
        self._metrics = metrics
        self._slots = slots
        self._key_limits = key_limits
        self._drain = drain
        listing = [self._describe(tool) for tool in self._tools_in_order()]
        self._listing = types.ListToolsResult(tools=listing)
        self.server: Server[Any] = Server(
            SERVER_NAME,
            version=version,
            instructions=prompts.MCP_INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        # Logging is current in the revision served here (2025-11-25; the SDK marks it
        # deprecated for 2026-07-28): registered directly so the capability is declared.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self.server.add_request_handler(
                "logging/setLevel", types.SetLevelRequestParams, self._set_level
            )

    def _tools_in_order(self) -> list[Tool]:
        return [tool for name in self._tools.names if (tool := self._tools.get(name)) is not None]

    def _describe(self, tool: Tool) -> types.Tool:
        function = self._schemas.get(tool.name, tool.schema).get("function", {})
        return types.Tool(
            name=tool.name,
            description=function.get("description"),
            input_schema=dict(function.get("parameters") or {"type": "object"}),
            # Both research tools only read; what they read is the open web.
            annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True),
        )

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return self._listing

    def _session(self, ctx: ServerRequestContext[Any, Any]) -> McpSession:
        found = session_header(ctx)
        session = None if found is None else self._sessions.find(*found)
        if session is None:
            # gateway.mcp.http checks the session before the SDK sees the request.
            raise MCPError(code=INVALID_REQUEST, message="No open Tigress session.")
        return session

    async def _set_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        self._session(ctx).log_level = params.level
        return types.EmptyResult()

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        session = self._session(ctx)
        tool = self._tools.get(params.name)
        if tool is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        vetted = vet_call(
            RawCall("", params.name, dict(params.arguments or {})),
            tools=self._tools.shapes(),
            seen=session.seen,
            scope=session.context.scope,
        )
        if vetted.verdict is not CallVerdict.RUN:
            return self._answer(session, tool.name, vetted.message, vetted.verdict.value)
        if self._drain.draining:
            session.seen.discard(vetted.key)
            return self._answer(session, tool.name, prompts.MCP_SHUTTING_DOWN, SHUTDOWN)
        try:
            with self._slots.take(), self._key_limits.chat(session.key):
                result = await self._run_cancellable(ctx, session, tool, vetted.arguments)
        except GatewayError as exc:
            # Over its limits: not run, and not a repeat if tried again later.
            session.seen.discard(vetted.key)
            return self._answer(session, tool.name, exc.message, LIMITED)
        if result is None:
            # The client is gone or cancelled the call: nobody reads an answer.
            self._metrics.tool_calls.labels("mcp", tool.name, CANCELLED).inc()
            return types.CallToolResult(
                content=[types.TextContent(text=f"{tool.name} was cancelled.")], is_error=True
            )
        settle_seen(session.seen, vetted.key, result.outcome.value)
        return self._answer(session, tool.name, result.text, result.outcome.value)

    def _answer(
        self, session: McpSession, name: str, text: str, outcome: str
    ) -> types.CallToolResult:
        """The tool message as the chat loop's model reads it: the text, then the trailer."""
        self._metrics.tool_calls.labels("mcp", name, outcome).inc()
        full = f"{text.rstrip()}\n{session.context.budgets.trailer()}"
        return types.CallToolResult(
            content=[types.TextContent(text=full)], is_error=outcome not in ANSWERED
        )

    async def _run_cancellable(
        self,
        ctx: ServerRequestContext[Any, Any],
        session: McpSession,
        tool: Tool,
        arguments: Mapping[str, Any],
    ) -> ToolResult | None:
        """Run the call, registered under its request id so that `gateway.mcp.http` can
        stop it when its HTTP request ends unanswered; None when it was stopped."""
        request_id = ctx.request_id
        scope = anyio.CancelScope()
        if request_id is not None:
            session.calls[request_id] = scope
        self._metrics.mcp_tool_calls_running.inc()
        try:
            with scope:
                return await self._run(ctx, session, tool, arguments)
            return None
        except asyncio.CancelledError:
            # Cancelled by the client (notifications/cancelled) or with its session.
            self._metrics.tool_calls.labels("mcp", tool.name, CANCELLED).inc()
            raise
        finally:
            self._metrics.mcp_tool_calls_running.dec()
            if request_id is not None:
                session.calls.pop(request_id, None)

    async def _run(
        self,
        ctx: ServerRequestContext[Any, Any],
        session: McpSession,
        tool: Tool,
        arguments: Mapping[str, Any],
    ) -> ToolResult:
        """One call, as the chat loop runs it: events out as they come, then the result."""
        sent = 0
        # The session's ledger and budgets, with the id of the POST that carries this call,
        # which the fetcher's log lines of its reads then carry too (SPEC 9).
        context = replace(session.context, request_id=_post_id(ctx))
        try:
            with anyio.fail_after(self._timeout):
                async with aclosing(tool.run(arguments, context)) as items:
                    async for item in items:
                        if isinstance(item, ToolResult):
                            return item
                        sent += 1
                        await self._notify(ctx, session, item, sent)
            return no_result(tool.name)
        except TimeoutError:
            return timed_out(tool.name)
        except Exception as exc:
            return failed(tool.name, exc, interface="mcp")

    async def _notify(
        self,
        ctx: ServerRequestContext[Any, Any],
        session: McpSession,
        event: ThorEvent,
        count: int,
    ) -> None:
        """Send one tool event: progress (when asked for) and a log entry (when wanted)."""
        # A client that went away cannot be told; the call goes on until it is stopped.
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await ctx.session.report_progress(count, message=event.progress())
            if LOG_LEVELS.index(EVENT_LOG_LEVEL) >= _level_index(session.log_level):
                await ctx.session.send_notification(
                    types.LoggingMessageNotification(
                        params=types.LoggingMessageNotificationParams(
                            level=EVENT_LOG_LEVEL, logger=EVENT_LOGGER, data=event.payload()
                        )
                    ),
                    related_request_id=ctx.request_id,
                )


def _post_id(ctx: ServerRequestContext[Any, Any]) -> str:
    """The request id (`gateway.http.request_id`) of the HTTP request a call came in."""
    request = ctx.request
    return request_id_of(request.scope) if isinstance(request, Request) else ""


def _level_index(level: str) -> int:
    return LOG_LEVELS.index(level) if level in LOG_LEVELS else LOG_LEVELS.index("info")
