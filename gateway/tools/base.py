"""The tool seam: what the loop needs from a tool, and what a tool gets from the loop.

A tool is anything with a name, an OpenAI ``tools`` entry and a ``run`` that is an async
generator. While it works it yields tool events (`gateway.tools.events`: a fetch yields one
`~gateway.tools.events.Read` per page as the fetcher streams them), which reach the client
at once; its last item is one `ToolResult` (the text for the model and an outcome label).
The loop stops reading at the first `ToolResult`, so nothing after it runs. The loop
decides whether a call may run at all (known tool, arguments an object with the required
keys, not a repeat), bounds it in time (the ``tool`` timeout) and cancels it when the
client goes away; the tool decides what its arguments mean and spends its budget (the
`BudgetKind` it declares) through its `ToolContext`. Keep-alive comments keep flowing to
the client while a tool is quiet.

A minimal tool::

    class Echo:
        name = "echo"
        schema = {"type": "function", "function": {"name": "echo", "parameters": {...}}}
        subject = "query"
        folded = frozenset()
        budget = None  # or a BudgetKind: what a call spends (gateway.tools.ledger)

        async def run(self, arguments, context):
            yield Searched(queries=(arguments["query"],), results=0)
            yield ToolResult(f"You said {arguments['query']}")

A tool may raise: the loop turns an exception into a tool message naming only its type
(its text may hold page or user text) and the outcome ``error``. The chat loop
(`gateway.loop.turn`) and the MCP endpoint (`gateway.mcp.tools`) both run calls this way; the
results they give for a tool that failed, went quiet or ended without a result come from
`failed`, `timed_out` and `no_result` here, so both interfaces say the same.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import AsyncGenerator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gateway import prompts
from gateway.tools.events import ThorEvent
from gateway.tools.ledger import BudgetCounter, BudgetKind, Ledger

log = logging.getLogger(__name__)


class ToolOutcome(enum.StrEnum):
    """How a call ended: the ``outcome`` label of the tool-calls metric."""

    OK = "ok"
    ERROR = "error"  # the tool or what it talks to failed
    REFUSED = "refused"  # a rule or a spent budget refused it
    TIMEOUT = "timeout"  # the loop stopped it at the tool timeout


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What one answer shares with its tool calls.

    Attributes:
        ledger: The answer's source numbers (add every search result and page read).
        budgets: The answer's budgets, one per kind (take before spending).
        user_hosts: The hosts of the addresses written in the user's messages
            (`gateway.tools.fetch.addresses.hosts_in_text`, worked out once per answer): the fetch
            tool allows them (rule 1).
        scope: What the ledger and budgets belong to, in the tools' words: an answer of
            the chat loop, or an MCP session.
        request_id: The chat's id (`gateway.http.request_id`), sent with every read so the
            fetcher's log lines of the read carry it; over MCP, the id of the POST that
            carried the call ("" when there is none: the fetcher makes one).
    """

    ledger: Ledger
    budgets: BudgetCounter
    user_hosts: tuple[str, ...] = ()
    scope: prompts.Scope = prompts.Scope.ANSWER
    request_id: str = ""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The last item a tool yields.

    Attributes:
        text: The tool message for the model (the loop adds the budget trailer).
        outcome: The metric label.
    """

    text: str
    outcome: ToolOutcome = ToolOutcome.OK


#: What a tool's ``run`` yields: events while it works, then one result.
ToolItem = ThorEvent | ToolResult


class Tool(Protocol):
    """A tool the model may call."""

    @property
    def name(self) -> str:
        """The function name the model calls."""
        ...

    @property
    def schema(self) -> Mapping[str, Any]:
        """The OpenAI ``tools`` entry (``{"type": "function", "function": {...}}``)."""
        ...

    @property
    def subject(self) -> str | None:
        """The argument that says what a call works on, named in the ``working`` event
        (``query``, ``url``), or None."""
        ...

    @property
    def folded(self) -> frozenset[str]:
        """Arguments whose case and runs of whitespace do not make a call new (SPEC 3.4
        folds a search's query: ``" Rust  Jobs"`` repeats ``"rust jobs"``)."""
        ...

    @property
    def budget(self) -> BudgetKind | None:
        """The budget a call spends (its kind, and the ``[budgets]`` setting its limit
        comes from), or None. The answer's `BudgetCounter` holds it; when it `ends_tools`,
        the tool rounds end once it is spent."""
        ...

    def run(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> AsyncGenerator[ToolItem, None]:
        """Run one call: yield events as they happen, then one `ToolResult`."""
        ...


def failed(name: str, error: BaseException, *, interface: str) -> ToolResult:
    """The result of a call whose tool raised, logged by type only (its text may hold page
    or user text).

    Args:
        name: The tool's name.
        error: What it raised.
        interface: ``chat`` or ``mcp``, for the log line.
    """
    log.warning("tool %s failed (%s): %s", name, interface, type(error).__name__)
    return ToolResult(
        prompts.TOOL_FAILED.format(name=name, problem=type(error).__name__), ToolOutcome.ERROR
    )


def timed_out(name: str) -> ToolResult:
    """The result of a call stopped at the ``tool`` timeout."""
    return ToolResult(prompts.TOOL_TIMEOUT.format(name=name), ToolOutcome.TIMEOUT)


def no_result(name: str) -> ToolResult:
    """The result of a call whose tool ended without yielding a `ToolResult`."""
    return ToolResult(prompts.TOOL_FAILED.format(name=name, problem="no result"), ToolOutcome.ERROR)


@dataclass(frozen=True, slots=True)
class CallShape:
    """What vetting a call needs of its tool, all from the tool itself: the loop, its
    rounds and its repeat check name no tool.

    Attributes:
        required: Argument names the tool's schema lists as required.
        subject: The argument named in the ``working`` event (`Tool.subject`).
        folded: Arguments folded for the repeat check (`Tool.folded`).
    """

    required: tuple[str, ...] = ()
    subject: str | None = None
    folded: frozenset[str] = frozenset()


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

    def schemas(self) -> list[Mapping[str, Any]]:
        """The ``tools`` list sent to the engine."""
        return [tool.schema for tool in self._tools.values()]

    def budgets(self) -> tuple[BudgetKind, ...]:
        """The budget kinds the offered tools spend, in offer order, each once."""
        kinds = (tool.budget for tool in self._tools.values())
        return tuple(dict.fromkeys(kind for kind in kinds if kind is not None))

    def shapes(self) -> dict[str, CallShape]:
        """Each offered tool's `CallShape`, in offer order."""
        return {name: _shape(tool) for name, tool in self._tools.items()}


def _shape(tool: Tool) -> CallShape:
    params = _mapping(_mapping(tool.schema.get("function")).get("parameters"))
    required = params.get("required", [])
    names = tuple(r for r in required if isinstance(r, str)) if isinstance(required, list) else ()
    return CallShape(names, tool.subject, frozenset(tool.folded))


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
