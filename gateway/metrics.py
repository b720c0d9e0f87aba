"""The gateway's Prometheus metrics (SPEC 9; names per the project's metrics notes).

Every label value comes from a closed set: no model text, address or user text. Tool
names are those of registered tools; anything else the model invents is ``unknown``.
Only `gateway.stream.writer` records chat metrics (as events pass), the MCP endpoint
(`gateway.mcp.http`, `gateway.mcp.tools`) its own and its tool calls (``interface="mcp"``),
the connection guard (`gateway.http.serving`) its own, and the web_search tool
(`gateway.tools.research`) the SearXNG failures it meets.
"""

from __future__ import annotations

import enum

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Outcome(enum.StrEnum):
    """How a chat request ended (the ``outcome`` label)."""

    OK = "ok"  # the whole answer was sent
    CLIENT_CLOSED = "client_closed"  # the client went away first
    ENGINE_ERROR = "engine_error"  # the engine failed, refused or broke off (any status)
    TIMEOUT = "timeout"  # the engine went quiet past its timeout
    REJECTED = "rejected"  # the request was wrong (400, 401, 404, 408, 413)
    LIMITED = "limited"  # a key's limits (429) or the gateway's own saturation (503)
    SHUTDOWN = "shutdown"  # refused or cut while the gateway shut down
    INTERNAL_ERROR = "internal_error"  # a bug in the gateway


#: Every outcome label.
OUTCOMES = tuple(o.value for o in Outcome)


class GatewayMetrics:
    """The metric families, registered in one registry (a fresh one per test)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.chat_requests = Counter(
            "tigress_gateway_chat_requests_total",
            "Chat requests by mode (web, proxy, none before it was known) and outcome.",
            ["mode", "outcome"],
            registry=registry,
        )
        self.rounds = Histogram(
            "tigress_gateway_chat_rounds",
            "Engine rounds used per answer under the Web switch.",
            buckets=(1, 2, 3, 4, 6, 8, 12, 16),
            registry=registry,
        )
        self.tool_calls = Counter(
            "tigress_gateway_tool_calls_total",
            "Tool calls by interface (chat, mcp), tool and outcome (duplicate and malformed "
            "calls included).",
            ["interface", "tool", "outcome"],
            registry=registry,
        )
        self.first_token = Histogram(
            "tigress_gateway_time_to_first_token_seconds",
            "Time from the request to the first model-written text sent to the client.",
            ["mode"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32),
            registry=registry,
        )
        self.streamed_tokens = Counter(
            "tigress_gateway_streamed_tokens_total",
            "Pieces of model-written text (content, reasoning, tool-call arguments) sent to "
            "clients: one engine token each, as engines send them.",
            ["mode"],
            registry=registry,
        )
        self.engine_errors = Counter(
            "tigress_gateway_engine_errors_total",
            "Engine failures by kind.",
            ["kind"],
            registry=registry,
        )
        self.searxng_errors = Counter(
            "tigress_gateway_searxng_errors_total",
            "SearXNG searches that got no usable answer, by cause (unreachable, timeout, "
            "broken, bad_request, json_disabled, rate_limited, server_error, http_status, "
            "content_type, not_json).",
            ["cause"],
            registry=registry,
        )
        self.unknown_citations = Counter(
            "tigress_gateway_unknown_citations_total",
            "Citation numbers an answer wrote that the ledger does not have.",
            registry=registry,
        )
        self.client_connections_closed = Counter(
            "tigress_gateway_client_connections_closed_total",
            "Client connections the gateway closed itself, by reason (limit: over "
            "max_connections; header_timeout: no whole request head in time).",
            ["reason"],
            registry=registry,
        )
        self.mcp_sessions = Gauge(
            "tigress_gateway_mcp_sessions", "MCP sessions open now.", registry=registry
        )
        self.mcp_session_events = Counter(
            "tigress_gateway_mcp_session_events_total",
            "MCP sessions opened, closed by their client, expired (idle), ended by the "
            "gateway (shutdown), and refused by reason (key_limit, full).",
            ["event"],
            registry=registry,
        )
        self.mcp_refused = Counter(
            "tigress_gateway_mcp_refused_requests_total",
            "Requests to /mcp refused before the MCP layer, by reason (origin, host, auth, "
            "rate_limited, protocol_version, unknown_session, too_large, shutdown).",
            ["reason"],
            registry=registry,
        )
        self.mcp_tool_calls_running = Gauge(
            "tigress_gateway_mcp_tool_calls_running",
            "MCP tool calls running now.",
            registry=registry,
        )
        self.inflight = Gauge(
            "tigress_gateway_inflight_chats", "Chat requests being served now.", registry=registry
        )

    def tool_label(self, name: str, known: list[str]) -> str:
        """The ``tool`` label: the name of a registered tool, else ``unknown``."""
        return name if name in known else "unknown"
