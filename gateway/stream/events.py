"""The one stream of typed events every chat request produces (both modes). Pure values.

Under the Web switch the loop (`gateway.loop.turn`) yields `Content`, `Reasoning`,
`ToolEvent`, `Usage` and the bookkeeping events `RoundStarted` and `CallEnded`; in
pass-through the relay (`gateway.engine.proxy`) yields `Raw` pieces of the engine's own bytes.
A source ends by returning or by raising a `gateway.errors.GatewayError` (the pump turns
either into `End`; a source may also yield `End` itself). `gateway.stream.writer`
is the only reader: it turns the events into SSE or one body, and records every metric
as they pass. The per-token ones (`Content`, `Reasoning`, `Raw`) are not frozen: a frozen
dataclass's ``__init__`` costs more, and nothing changes an event once made.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.api.chunks import UsageCounts
from gateway.errors import GatewayError
from gateway.tools.events import ThorEvent


@dataclass(slots=True)
class Content:
    """Visible answer text (one engine token, or a few)."""

    text: str


@dataclass(slots=True)
class Reasoning:
    """``reasoning_content`` from the engine, unchanged."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """A ``thor_event`` for the client."""

    event: ThorEvent


@dataclass(frozen=True, slots=True)
class Usage:
    """The turn's usage, summed over its rounds (sent last, before the end)."""

    counts: UsageCounts


@dataclass(slots=True)
class Raw:
    """Bytes of the engine's answer, forwarded unchanged: whole SSE events (a stream) or
    a piece of its body (an answer that is not a stream).

    Attributes:
        data: The bytes.
        tokens: How many of the events carry model-written text (`gateway.api.sse.count_tokens`).
        body: A piece of a body that is not a stream (sent as one JSON body).
    """

    data: bytes
    tokens: int = 0
    body: bool = False


@dataclass(frozen=True, slots=True)
class RoundStarted:
    """The loop asked the engine once more (for the rounds metric)."""


@dataclass(frozen=True, slots=True)
class CallEnded:
    """A tool call was answered (for the tool-calls metric).

    Attributes:
        tool: The ``tool`` label: an offered tool's name, else ``unknown``.
        outcome: A `gateway.tools.base.ToolOutcome` or `gateway.loop.calls.CallVerdict` value, or
            ``malformed``.
        count: How many calls this stands for (malformed text blocks come counted).
    """

    tool: str
    outcome: str
    count: int = 1


@dataclass(frozen=True, slots=True)
class End:
    """The stream is over.

    Attributes:
        error: Why it ended early, or None when it is complete.
    """

    error: GatewayError | None = None


StreamEvent = Content | Reasoning | ToolEvent | Usage | Raw | RoundStarted | CallEnded | End
