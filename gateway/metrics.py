"""The gateway's Prometheus metrics (SPEC 9; names per the project's metrics notes).

Every label value comes from a closed set: no model text, address or user text. Tool
names are those of registered tools; anything else the model invents is ``unknown``.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

#: Outcomes of a chat request.
OUTCOMES = ("ok", "client_closed", "engine_error", "timeout", "rejected")


class GatewayMetrics:
    """The metric families, registered in one registry (a fresh one per test)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.chat_requests = Counter(
            "tigress_gateway_chat_requests_total",
            "Chat requests by mode (web or proxy) and outcome.",
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
            "Tool calls by tool and outcome (duplicate and malformed calls included).",
            ["tool", "outcome"],
            registry=registry,
        )
        self.first_token = Histogram(
            "tigress_gateway_time_to_first_token_seconds",
            "Time from the request to the first content sent to the client.",
            ["mode"],
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32),
            registry=registry,
        )
        self.streamed_tokens = Counter(
            "tigress_gateway_streamed_tokens_total",
            "Content chunks streamed to clients (one engine token each, as engines send them).",
            ["mode"],
            registry=registry,
        )
        self.engine_errors = Counter(
            "tigress_gateway_engine_errors_total",
            "Engine failures by kind.",
            ["kind"],
            registry=registry,
        )
        self.inflight = Gauge(
            "tigress_gateway_inflight_chats", "Chat requests being served now.", registry=registry
        )

    def tool_label(self, name: str, known: list[str]) -> str:
        """The ``tool`` label: the name of a registered tool, else ``unknown``."""
        return name if name in known else "unknown"
