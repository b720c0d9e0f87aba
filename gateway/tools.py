"""The tool seam: what the loop needs from a tool, and what a tool gets from the loop.

A tool is anything with a name, an OpenAI ``tools`` entry and an async ``run``. The loop
decides whether a call may run (known tool, arguments an object with the required keys,
not a repeat); the tool decides what its arguments mean and spends the budgets through
its context. The research tools (web_search, fetch_page_content_recursive) plug in here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.ledger import BudgetCounter, Ledger


@dataclass
class ToolContext:
    """What one answer shares with its tool calls.

    Attributes:
        ledger: The answer's source numbers.
        budgets: The answer's search and page budgets.
        user_text: The text of the user's messages (the fetch tool allows hosts the user
            wrote).
    """

    ledger: Ledger
    budgets: BudgetCounter
    user_text: str = ""


@dataclass
class ToolResult:
    """What a tool call gives back.

    Attributes:
        text: The tool message for the model (the loop adds the budget trailer).
        events: ``thor_event`` payloads for the client, in order.
        outcome: Metric label: ``ok``, ``error``, ``refused`` or ``timeout``.
    """

    text: str
    events: list[dict[str, Any]] = field(default_factory=list)
    outcome: str = "ok"


class Tool(Protocol):
    """A tool the model may call."""

    @property
    def name(self) -> str:
        """The function name the model calls."""
        ...

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry (``{"type": "function", "function": {...}}``)."""
        ...

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        """Run one call; may raise (the loop turns that into a tool message)."""
        ...


class ToolBox:
    """The tools offered under the Web switch, by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"two tools named {tool.name!r}")
            self._tools[tool.name] = tool

    def __bool__(self) -> bool:
        return bool(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool named ``name``, if offered."""
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        """Offered tool names in offer order."""
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """The ``tools`` list sent to the engine."""
        return [tool.schema for tool in self._tools.values()]

    def required_arguments(self, name: str) -> list[str]:
        """Names the tool's schema lists as required."""
        tool = self._tools.get(name)
        if tool is None:
            return []
        params = _mapping(_mapping(tool.schema.get("function")).get("parameters"))
        required = params.get("required", [])
        return [r for r in required if isinstance(r, str)] if isinstance(required, list) else []


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
