"""A stand-in third tool, whole in this one module as a new tool would be in its folder:
its schema, its rules, its run, its tool text and its own event.

Nothing of the gateway names it: the loop, the rounds, call vetting, repeats and the
budgets take what they need from the tool itself (`gateway.tools.base.Tool`), and the
stream and MCP take its event through `gateway.tools.events.ThorEvent`'s two methods.
It has a budget of its own (`COUNTS`), limited by the ``[budgets] pages`` setting: once it
is spent the tool rounds end, as they do when the searches are spent.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.tools.base import ToolContext, ToolItem, ToolOutcome, ToolResult
from gateway.tools.ledger import BudgetKind

NAME = "count_words"
SCHEMA: Mapping[str, Any] = {
    "type": "function",
    "function": {
        "name": NAME,
        "description": "Count the words of a text.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text to count"}},
            "required": ["text"],
        },
    },
}

#: The tool's own budget: texts counted, as many as ``[budgets] pages`` allows; spent, it
#: ends the tool rounds.
COUNTS = BudgetKind("counts", "pages", "texts counted {used} of {limit}", ends_tools=True)


@dataclass(frozen=True, slots=True)
class Counted:
    """The tool's own event: how many words one call counted."""

    words: int

    def payload(self) -> dict[str, Any]:
        """The ``thor_event`` object."""
        return {"type": "counted", "words": self.words}

    def progress(self) -> str:
        """The line an MCP client's user sees."""
        return f"counted: {self.words} words"


def count(text: str) -> int:
    """The tool's rule: words are runs of non-space characters."""
    return len(text.split())


class CountWords:
    """The tool on the seam."""

    name = NAME
    schema = SCHEMA
    subject = "text"
    #: Counting is blind to case and spacing, so a call that differs only in them repeats.
    folded = frozenset({"text"})
    budget = COUNTS

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def run(
        self, arguments: Mapping[str, Any], context: ToolContext
    ) -> AsyncGenerator[ToolItem, None]:
        """Count, say so as an event, then answer with the number."""
        text = str(arguments["text"])
        if not context.budgets.take(COUNTS, 1):
            yield ToolResult("No count is left; answer from what you have.", ToolOutcome.REFUSED)
            return
        self.calls.append(text)
        words = count(text)
        yield Counted(words)
        yield ToolResult(f"The text has {words} words.", ToolOutcome.OK)
