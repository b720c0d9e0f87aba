"""The tool loop under the Web switch (SPEC 3): asks the engine, runs the calls, repeats.

This module does the I/O of the loop; every decision comes from `gateway.rounds`. One
`ChatTurn` serves one client request and yields `LoopEvent` values (content, reasoning,
tool events); `gateway.chat` turns them into SSE or one JSON body. Cancelling the task
that iterates `ChatTurn.events` closes the engine stream and cancels every tool call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway import prompts
from gateway.engine import EngineClient
from gateway.errors import EngineStatusError
from gateway.ledger import BudgetCounter, Ledger
from gateway.metrics import GatewayMetrics
from gateway.request import user_text
from gateway.rounds import (
    LoopState,
    Phase,
    RawCall,
    RequiredSupport,
    RoundOutcome,
    Step,
    ToolCallAssembler,
    Verdict,
    VettedCall,
    after_calls,
    after_round,
    next_round,
    refused_required,
    vet_call,
)
from gateway.settings import Budgets, EngineSettings
from gateway.tool_events import ThorEvent
from gateway.tools import ToolBox, ToolContext, ToolOutcome, ToolResult
from gateway.tooltext import TextToolFilter

log = logging.getLogger(__name__)

#: Request fields the loop sets itself (or that make no sense under it).
_LOOP_FIELDS = frozenset(
    {
        "messages",
        "stream",
        "stream_options",
        "tools",
        "tool_choice",
        "thor_web_search",
        "n",
        "functions",
        "function_call",
    }
)


# --- The text-tool-call filter's interface (gateway.tooltext) ----------------------------


class FilterCall(Protocol):
    """A call the filter found in the text."""

    @property
    def name(self) -> str: ...

    @property
    def arguments(self) -> dict[str, Any]: ...


class FilterOutput(Protocol):
    """What one ``feed`` or ``close`` releases."""

    @property
    def text(self) -> str: ...

    @property
    def calls(self) -> Sequence[FilterCall]: ...

    @property
    def malformed(self) -> int: ...


class TextFilter(Protocol):
    """The streaming filter of SPEC 4a, one per round."""

    def feed(self, chunk: str) -> FilterOutput: ...

    def close(self) -> FilterOutput: ...


FilterFactory = Callable[[list[dict[str, Any]]], TextFilter]


def default_filter(tools: list[dict[str, Any]]) -> TextFilter:
    """The production filter, `gateway.tooltext.TextToolFilter`."""
    return TextToolFilter(tools)


# --- What the loop yields ------------------------------------------------------------------


@dataclass(frozen=True)
class Content:
    """Visible answer text."""

    text: str


@dataclass(frozen=True)
class Reasoning:
    """``reasoning_content`` from the engine, unchanged."""

    text: str


@dataclass(frozen=True)
class ToolEvent:
    """A ``thor_event`` payload."""

    payload: dict[str, Any]


LoopEvent = Content | Reasoning | ToolEvent


@dataclass
class _Round:
    """What one engine round produced."""

    text: list[str] = field(default_factory=list)
    text_calls: list[RawCall] = field(default_factory=list)
    structured: list[RawCall] = field(default_factory=list)
    malformed: int = 0

    @property
    def visible(self) -> str:
        return "".join(self.text)

    def take(self, output: FilterOutput) -> None:
        if output.text:
            self.text.append(output.text)
        for call in output.calls:
            self.text_calls.append(RawCall("", call.name, dict(call.arguments)))
        self.malformed += output.malformed


@dataclass
class LoopOptions:
    """The loop's knobs, from settings (tests inject small ones)."""

    budgets: Budgets = field(default_factory=Budgets)
    tool_timeout: float = 120.0


class ChatTurn:
    """One answer under the Web switch."""

    def __init__(
        self,
        *,
        client: EngineClient,
        engine: EngineSettings,
        body: dict[str, Any],
        tools: ToolBox,
        memory: dict[str, RequiredSupport],
        options: LoopOptions,
        metrics: GatewayMetrics | None = None,
        filter_factory: FilterFactory = default_filter,
    ) -> None:
        self._client = client
        self._engine = engine
        self._body = body
        self._tools = tools
        self._memory = memory
        self._options = options
        self._metrics = metrics
        self._filter_factory = filter_factory
        self.ledger = Ledger()
        self.budgets = BudgetCounter(options.budgets.searches, options.budgets.pages)
        messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
        self._context = ToolContext(self.ledger, self.budgets, user_text(messages))
        self._client_messages = messages
        self._history: list[dict[str, Any]] = []
        self._seen: set[str] = set()
        self._wrote_visible = False
        #: The last two characters shown so far ("\n\n" before anything is shown).
        self._tail = "\n\n"
        #: Engine rounds asked, for the metrics.
        self.rounds = 0
        #: Usage summed over rounds, when the engine reported it.
        self.usage: dict[str, int] | None = None

    def _messages(self, nudge: bool) -> list[dict[str, Any]]:
        system = prompts.WEB_SYSTEM + (f"\n{prompts.REQUIRED_NUDGE}" if nudge else "")
        client = list(self._client_messages)
        # One system message first: several chat templates refuse a second one.
        first = client[0] if client else None
        if (
            first is not None
            and first.get("role") == "system"
            and isinstance(first.get("content"), str)
        ):
            merged = dict(first)
            merged["content"] = f"{system}\n\n{first['content']}"
            client[0] = merged
        else:
            client.insert(0, {"role": "system", "content": system})
        return client + self._history

    def _add_usage(self, usage: dict[str, Any]) -> None:
        total = self.usage if self.usage is not None else {}
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            value = usage.get(key)
            if isinstance(value, int):
                total[key] = total.get(key, 0) + value
        self.usage = total

    def _visible(self, text: str) -> list[LoopEvent]:
        """Content for the client, with a paragraph break between rounds' texts."""
        if not text:
            return []
        events: list[LoopEvent] = []
        if not self._wrote_visible and text.strip():
            # A new round's text starts a new paragraph.
            gap = "\n\n"[len(self._tail) - len(self._tail.rstrip("\n")) :]
            if gap:
                events.append(Content(gap))
        self._wrote_visible = True
        self._tail = (self._tail + text)[-2:]
        events.append(Content(text))
        return events

    async def events(self) -> AsyncGenerator[LoopEvent, None]:
        """Run the loop; yield what the client should see, in order."""
        state = LoopState()
        schemas: list[Any] = self._tools.schemas()
        offered = self._tools.names
        required = {name: self._tools.required_arguments(name) for name in offered}
        base = {k: v for k, v in self._body.items() if k not in _LOOP_FIELDS}
        refused = False
        while state.phase is not Phase.DONE:
            support = self._memory.get(self._engine.url, RequiredSupport.UNKNOWN)
            plan = next_round(state, support)
            if plan.announce_answer:
                state.answer_announced = True
                sources = [s.as_event() for s in self.ledger.sources()]
                yield ToolEvent({"type": "sources", "sources": sources})
                self._history.append({"role": "user", "content": self.ledger.sources_message()})
                self._history.append({"role": "user", "content": prompts.ANSWER_NOW})
            body = dict(base)
            body["messages"] = self._messages(plan.nudge)
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
            if plan.offer_tools:
                body["tools"] = schemas
                body["tool_choice"] = plan.tool_choice
            result = _Round()
            self.rounds += 1
            self._wrote_visible = False
            try:
                async for event in self._round(body, schemas, plan.hold_text, result):
                    yield event
            except EngineStatusError as exc:
                if plan.tool_choice == "required" and exc.status in (400, 422):
                    # The engine may refuse "required": retry with "auto". It is remembered
                    # only once the retry is accepted, so a 400 for another reason (a
                    # prompt too long) does not mark the engine.
                    refused_required(state)
                    refused = True
                    continue
                raise
            if refused:
                refused = False
                self._memory[self._engine.url] = RequiredSupport.REFUSED
            raw_calls = result.structured + result.text_calls
            outcome = RoundOutcome(
                calls=len(raw_calls),
                malformed=result.malformed,
                has_text=bool(result.visible.strip()),
                searches_spent=self.budgets.searches_spent,
            )
            step, learnt = after_round(state, plan, outcome)
            if learnt is not None:
                self._memory[self._engine.url] = learnt
            if step is Step.RUN_CALLS:
                async for event in self._run_calls(raw_calls, result, offered, required):
                    yield event
                after_calls(state, searches_spent=self.budgets.searches_spent)
                if state.phase is Phase.ANSWER and state.answer_announced:
                    # A call written in an answer round: ask once more for the answer.
                    self._history.append({"role": "user", "content": prompts.ANSWER_NOW})
            elif step is Step.FINISH and state.no_answer:
                for event in self._visible(prompts.NO_ANSWER):
                    yield event
        if not state.answer_announced and self.ledger.sources():
            # The model answered during the tool rounds: the page still needs the list its
            # citations point into (SPEC 2a), so it comes after the answer.
            sources = [s.as_event() for s in self.ledger.sources()]
            yield ToolEvent({"type": "sources", "sources": sources})

    async def _round(
        self,
        body: dict[str, Any],
        schemas: list[Any],
        hold: bool,
        out: _Round,
    ) -> AsyncIterator[LoopEvent]:
        text_filter = self._filter_factory(schemas)
        assembler = ToolCallAssembler()
        # A "required" round's text is held until a call shows the engine honours it;
        # an engine that ignores "required" has its round thrown away and retried.
        held: list[LoopEvent] | None = [] if hold else None
        tail_before = self._tail
        # Whitespace before any text is held: engines send "\n\n" next to tool_calls.
        blank = ""
        started = False

        def called() -> bool:
            return bool(assembler) or bool(out.text_calls) or out.malformed > 0

        def visible(text: str) -> list[LoopEvent]:
            nonlocal blank, started
            if not text:
                return []
            if not started and not text.strip():
                blank += text
                return []
            started = True
            text, blank = blank + text, ""
            return self._visible(text)

        chunks = self._client.chat_chunks(self._engine, body)
        async with aclosing(chunks):
            async for chunk in chunks:
                usage = chunk.get("usage")
                if isinstance(usage, dict):
                    self._add_usage(usage)
                choices = chunk.get("choices")
                if not isinstance(choices, list) or not choices:
                    continue
                choice = choices[0]
                delta = choice.get("delta") if isinstance(choice, dict) else None
                if not isinstance(delta, dict):
                    continue
                pending: list[LoopEvent] = []
                reasoning = delta.get("reasoning_content")
                if isinstance(reasoning, str) and reasoning:
                    pending.append(Reasoning(reasoning))
                fragments = delta.get("tool_calls")
                if isinstance(fragments, list):
                    for fragment in fragments:
                        if isinstance(fragment, dict):
                            assembler.add(fragment)
                content = delta.get("content")
                if isinstance(content, str) and content:
                    output = text_filter.feed(content)
                    out.take(output)
                    pending.extend(visible(output.text))
                if held is not None:
                    held.extend(pending)
                    if called():
                        pending, held = held, None
                    else:
                        pending = []
                for event in pending:
                    yield event
        output = text_filter.close()
        out.take(output)
        tail = visible(output.text)
        out.structured = assembler.calls()
        if not called() and blank:
            tail.extend(self._visible(blank))
        if held is not None:
            if not called():
                self._tail = tail_before
                return
            tail = held + tail
        for event in tail:
            yield event

    async def _run_calls(
        self,
        raw_calls: list[RawCall],
        result: _Round,
        offered: list[str],
        required: dict[str, list[str]],
    ) -> AsyncIterator[LoopEvent]:
        vetted = [
            vet_call(c, offered=offered, required=required, seen=self._seen) for c in raw_calls
        ]
        text = result.visible
        assistant: dict[str, Any] = {"role": "assistant", "content": text if text.strip() else ""}
        if vetted:
            assistant["content"] = text if text.strip() else None
            assistant["tool_calls"] = [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments_text},
                }
                for c in vetted
            ]
        self._history.append(assistant)
        results: list[ToolResult | None] = [None] * len(vetted)
        # Each running call puts its events, then its index when it is over.
        items: asyncio.Queue[ThorEvent | int] = asyncio.Queue()

        async def run(index: int, call: VettedCall) -> None:
            try:
                results[index] = await self._run_one(call, items)
            finally:
                items.put_nowait(index)

        tasks = []
        for i, call in enumerate(vetted):
            if call.verdict is Verdict.RUN:
                tasks.append(asyncio.create_task(run(i, call)))
            else:
                results[i] = ToolResult(call.message, outcome=call.verdict.value)  # type: ignore[arg-type]
        try:
            # Events go out as the tools make them; results go back in call order.
            running = len(tasks)
            while running:
                item = await items.get()
                if isinstance(item, int):
                    running -= 1
                else:
                    yield ToolEvent(item.payload())
        finally:
            for task in tasks:
                task.cancel()
            if tasks:
                # Not gather: a second cancel would cut the tools' clean-up short.
                await asyncio.wait(tasks)
        for call, maybe in zip(vetted, results, strict=True):
            tool_result = maybe or ToolResult(
                prompts.TOOL_FAILED.format(name=call.name, problem="no result"),
                outcome=ToolOutcome.ERROR,
            )
            if self._metrics is not None:
                label = self._metrics.tool_label(call.name, offered)
                self._metrics.tool_calls.labels(label, tool_result.outcome).inc()
            self._history.append(
                {
                    "role": "tool",
                    "tool_call_id": call.call_id,
                    "content": f"{tool_result.text.rstrip()}\n{self.budgets.trailer()}",
                }
            )
        if result.malformed:
            if self._metrics is not None:
                self._metrics.tool_calls.labels("unknown", "malformed").inc(result.malformed)
            self._history.append({"role": "user", "content": prompts.MALFORMED_TEXT_CALL})

    async def _run_one(
        self, call: VettedCall, events: asyncio.Queue[ThorEvent | int]
    ) -> ToolResult:
        tool = self._tools.get(call.name)
        if tool is None:  # vet_call already refused it; kept for the type checker
            return ToolResult(
                prompts.UNKNOWN_TOOL.format(name=call.name, names=""), outcome=ToolOutcome.ERROR
            )
        try:
            async with asyncio.timeout(self._options.tool_timeout):
                async with aclosing(tool.run(call.arguments, self._context)) as items:
                    async for item in items:
                        if isinstance(item, ToolResult):
                            return item
                        events.put_nowait(item)
            return ToolResult(
                prompts.TOOL_FAILED.format(name=call.name, problem="no result"),
                outcome=ToolOutcome.ERROR,
            )
        except TimeoutError:
            return ToolResult(
                prompts.TOOL_TIMEOUT.format(name=call.name), outcome=ToolOutcome.TIMEOUT
            )
        except Exception as exc:
            # The exception's text may hold page or user text: log its type only.
            log.warning("tool %s failed: %s", call.name, type(exc).__name__)
            return ToolResult(
                prompts.TOOL_FAILED.format(name=call.name, problem=type(exc).__name__),
                outcome=ToolOutcome.ERROR,
            )
