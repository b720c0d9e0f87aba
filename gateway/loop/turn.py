"""The tool loop under the Web switch (SPEC 3): asks the engine, runs the calls, repeats.

This module does the I/O of the loop; every decision comes from `gateway.loop.rounds` (which
round next), `gateway.loop.calls` (which call runs) and `gateway.loop.conversation` (what the
engine is sent). One `ChatTurn` serves one client request and yields
`gateway.stream.events` values; `gateway.stream.writer` turns them into SSE or one body. Cancelling
the task that iterates `ChatTurn.events` closes the engine stream and cancels every tool
call.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from gateway import prompts
from gateway.api import quirks
from gateway.api.chunks import EngineChunk, UsageCounts
from gateway.api.messages import Message, user_text
from gateway.engine.client import EngineClient
from gateway.errors import AnswerTooLargeError, EngineStatusError
from gateway.loop.calls import (
    CallVerdict,
    RawCall,
    ToolCallAssembler,
    VettedCall,
    settle_seen,
    vet_call,
    working,
)
from gateway.loop.citations import check_citations
from gateway.loop.conversation import Conversation
from gateway.loop.first_search import TOOL as FIRST_SEARCH_TOOL
from gateway.loop.first_search import first_query
from gateway.loop.rounds import (
    Phase,
    RequiredSupport,
    RoundOutcome,
    RoundPlan,
    Step,
    after_calls,
    after_round,
    asks_answer_again,
    next_round,
    refused_required,
    round_fields,
    searched_first,
    start,
)
from gateway.loop.tooltext.filter import FilterOutput, TextToolFilter
from gateway.settings import Budgets, EngineSettings, Limits
from gateway.stream.events import (
    CallEnded,
    Content,
    Reasoning,
    RoundStarted,
    StreamEvent,
    ToolEvent,
    Usage,
)
from gateway.tools.base import (
    CallShape,
    ToolBox,
    ToolContext,
    ToolOutcome,
    ToolResult,
    failed,
    no_result,
    timed_out,
)
from gateway.tools.events import Searched, SearchedBy, Sources, ThorEvent, Working
from gateway.tools.fetch.addresses import hosts_in_text
from gateway.tools.ledger import BudgetCounter, Ledger

log = logging.getLogger(__name__)

#: Request fields the loop sets itself (or that make no sense under it).
_LOOP_FIELDS = frozenset(
    {
        "model",
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


class TextFilter(Protocol):
    """The streaming filter of SPEC 4a (`tooltext.filter.TextToolFilter`), one per round."""

    def feed(self, chunk: str) -> FilterOutput: ...

    def close(self) -> FilterOutput: ...


FilterFactory = Callable[[Sequence[Mapping[str, Any]]], TextFilter]


def default_filter(tools: Sequence[Mapping[str, Any]]) -> TextFilter:
    """The production filter, `gateway.loop.tooltext.filter.TextToolFilter`."""
    return TextToolFilter(tools)


class RequiredMemory:
    """What each engine does with ``tool_choice: "required"``, for the life of the process.

    Written only from `gateway.loop.rounds.Advance.learnt`, in one place of the loop.
    """

    def __init__(self) -> None:
        self._known: dict[str, RequiredSupport] = {}

    def get(self, engine: EngineSettings) -> RequiredSupport:
        """What is known of ``engine``."""
        return self._known.get(engine.url, RequiredSupport.UNKNOWN)

    def learn(self, engine: EngineSettings, support: RequiredSupport) -> None:
        """Remember what a round showed."""
        self._known[engine.url] = support


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


@dataclass(frozen=True)
class LoopOptions:
    """The loop's knobs, from settings (tests inject small ones)."""

    budgets: Budgets = field(default_factory=Budgets)
    tool_timeout: float = 120.0
    #: The model's text one answer may take from the engine, over every round: content,
    #: reasoning and tool-call fragments (``[limits] max_answer_bytes``).
    max_text: int = Limits.max_answer_bytes


class ChatTurn:
    """One answer under the Web switch."""

    def __init__(
        self,
        *,
        client: EngineClient,
        engine: EngineSettings,
        messages: Sequence[Message],
        fields: Mapping[str, Any],
        tools: ToolBox,
        memory: RequiredMemory,
        options: LoopOptions,
        filter_factory: FilterFactory = default_filter,
        request_id: str = "",
    ) -> None:
        self._client = client
        self._engine = engine
        self._fields = {k: v for k, v in fields.items() if k not in _LOOP_FIELDS}
        self._model = fields.get("model")
        self._tools = tools
        self._memory = memory
        self._options = options
        self._filter_factory = filter_factory
        self.ledger = Ledger()
        self.budgets = BudgetCounter.of(options.budgets, tools.budgets())
        # The user's hosts once per answer, not once per read: the text may be long.
        self._context = ToolContext(
            self.ledger,
            self.budgets,
            tuple(hosts_in_text(user_text(messages))),
            request_id=request_id,
        )
        self._conversation = Conversation(messages)
        self._first_query = first_query(messages)
        self._seen: set[str] = set()
        self._wrote_visible = False
        #: Everything shown to the user, for the citation check.
        self._shown: list[str] = []
        #: The last two characters shown so far ("\n\n" before anything is shown).
        self._tail = "\n\n"
        #: Usage summed over rounds, when the engine reported it.
        self._usage: UsageCounts | None = None
        #: The model's text taken from the engine so far, over every round.
        self._taken = 0

    def _body(self, plan: RoundPlan, schemas: list[Any]) -> bytes:
        body: dict[str, Any] = {"model": self._model, **round_fields(self._fields, plan)}
        body["messages"] = self._conversation.messages(prompts.WEB_SYSTEM)
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        if plan.offer_tools:
            body["tools"] = schemas
            body["tool_choice"] = plan.tool_choice
        # ASCII escapes: the client's text may hold a lone surrogate.
        return json.dumps(body).encode()

    def _take(self, chunk: EngineChunk) -> None:
        """Count the model's text in ``chunk`` against what one answer may take.

        # Security
        Rule: an answer under the Web switch takes at most ``[limits] max_answer_bytes``
        of the model's text from the engine (content, reasoning, tool-call fragments,
        over every round), else it ends with `AnswerTooLargeError`.
        Threat: an engine that streams forever: text held back in a "required" round or
        tool-call arguments being joined grow in memory without ever reaching the
        client (where `gateway.stream.pump.Pump` counts what is relayed). Callers may rely on
        the loop holding at most that much of one answer. Proved by
        ``tests/gateway/http/test_fair_share.py``.
        """
        self._taken += len(chunk.content) + len(chunk.reasoning)
        self._taken += sum(len(f.name) + len(f.arguments) for f in chunk.calls)
        if self._taken > self._options.max_text:
            raise AnswerTooLargeError(
                "The answer was cut off: the model wrote more than the "
                f"{self._options.max_text} bytes one answer may take."
            )

    def _visible(self, text: str) -> list[StreamEvent]:
        """Content for the client, with a paragraph break between rounds' texts."""
        if not text:
            return []
        if not self._wrote_visible and text.strip():
            # A new round's text starts a new paragraph.
            gap = "\n\n"[len(self._tail) - len(self._tail.rstrip("\n")) :]
            text = gap + text
        self._wrote_visible = True
        self._tail = (self._tail + text)[-2:]
        self._shown.append(text)
        return [Content(text)]

    def _sources(self) -> ToolEvent:
        return ToolEvent(Sources(tuple(self.ledger.sources())))

    async def events(self) -> AsyncGenerator[StreamEvent, None]:
        """Run the loop; yield what the client should see, in order."""
        state = start(self._memory.get(self._engine))
        schemas: list[Any] = self._tools.schemas()
        shapes = self._tools.shapes()
        while state.phase is not Phase.DONE:
            if state.search_due:
                async for event in self._search_first(shapes):
                    yield event
                state = searched_first(state, tools_spent=self.budgets.tools_spent)
                continue
            plan = next_round(state, self._memory.get(self._engine))
            if plan.announce_answer:
                yield self._sources()
                # One user turn: the sources list, a blank line, the answer-now line.
                self._conversation.add_user(
                    f"{self.ledger.sources_message()}\n\n{prompts.ANSWER_NOW}"
                )
            result = _Round()
            self._wrote_visible = False
            yield RoundStarted()
            try:
                async for event in self._round(self._body(plan, schemas), schemas, plan, result):
                    yield event
            except EngineStatusError as exc:
                kind, code = exc.engine_kind()
                if plan.tool_choice == "required" and quirks.refuses_required(
                    exc.status, kind, code, exc.message
                ):
                    # The engine may refuse "required": the gateway searches itself,
                    # then asks with "auto".
                    log.info(
                        'engine %s refused tool_choice "required" (%d); the gateway '
                        "makes the first search",
                        self._engine.label,
                        exc.status,
                    )
                    state = refused_required(state)
                    continue
                raise
            raw_calls = result.structured + result.text_calls
            outcome = RoundOutcome(
                calls=len(raw_calls),
                malformed=result.malformed,
                has_text=bool(result.visible.strip()),
                tools_spent=self.budgets.tools_spent,
            )
            advance = after_round(state, plan, outcome)
            state = advance.state
            if advance.learnt is not None:
                self._memory.learn(self._engine, advance.learnt)
            if advance.step is Step.RUN_CALLS:
                async for event in self._run_calls(raw_calls, result, shapes):
                    yield event
                state = after_calls(state, tools_spent=self.budgets.tools_spent)
                if result.malformed and state.phase is Phase.TOOLS:
                    # Only when a tool round follows, where the call can be written again;
                    # the answer rounds get their own turn (SPEC 3.6), not a contrary one.
                    self._conversation.add_user(prompts.MALFORMED_TEXT_CALL)
                if asks_answer_again(state):
                    # A call written in an answer round: ask once more for the answer.
                    self._conversation.add_user(prompts.ANSWER_NOW)
            elif advance.step is Step.FINISH and state.no_answer:
                for event in self._visible(prompts.NO_ANSWER):
                    yield event
        if not state.answer_announced and self.ledger.sources():
            # The model answered during the tool rounds: the page still needs the list its
            # citations point into (SPEC 2a), so it comes after the answer.
            yield self._sources()
        known = [s.n for s in self.ledger.sources()]
        yield ToolEvent(check_citations("".join(self._shown), known))
        if self._usage is not None:
            yield Usage(self._usage)

    async def _search_first(self, shapes: dict[str, CallShape]) -> AsyncIterator[StreamEvent]:
        """The gateway's own first search (SPEC 3.2): ``web_search`` with the user's
        question, entered in the conversation exactly as a model's call. Nothing is run
        when there is no question in words or no search tool (a test's tool box)."""
        if self._first_query is None or FIRST_SEARCH_TOOL not in shapes:
            return
        call = RawCall("", FIRST_SEARCH_TOOL, {"query": self._first_query})
        async for event in self._run_calls([call], _Round(), shapes, by="gateway"):
            yield event

    async def _round(
        self, body: bytes, schemas: list[Any], plan: RoundPlan, out: _Round
    ) -> AsyncIterator[StreamEvent]:
        text_filter = self._filter_factory(schemas)
        assembler = ToolCallAssembler()
        # A "required" round's text is held until a call shows the engine honours it;
        # an engine that ignores "required" has its round thrown away (the gateway then
        # searches itself), and so has one that writes quirks.PREAMBLE_LIMIT characters without
        # a call (the engine stream is closed there, which stops the engine writing).
        held: list[StreamEvent] | None = [] if plan.hold_text else None
        held_chars = 0
        tail_before, shown_before = self._tail, len(self._shown)
        # Whitespace before any text is held: engines send "\n\n" next to tool_calls.
        blank = ""
        started = False

        def called() -> bool:
            return bool(assembler) or bool(out.text_calls) or out.malformed > 0

        def visible(text: str) -> list[StreamEvent]:
            nonlocal blank, started
            if not text:
                return []
            if not started and quirks.is_blank_beside_calls(text):
                blank += text
                return []
            started = True
            text, blank = blank + text, ""
            return self._visible(text)

        chunks = self._client.chat_chunks(self._engine, body)
        async with aclosing(chunks):
            async for chunk in chunks:
                self._take(chunk)
                if chunk.usage is not None:
                    self._usage = (self._usage or UsageCounts()) + chunk.usage
                pending: list[StreamEvent] = []
                if chunk.reasoning:
                    pending.append(Reasoning(chunk.reasoning))
                for fragment in chunk.calls:
                    assembler.add(fragment)
                if chunk.content:
                    output = text_filter.feed(chunk.content)
                    out.take(output)
                    pending.extend(visible(output.text))
                if held is not None:
                    held.extend(pending)
                    if not called():
                        held_chars += sum(len(e.text) for e in pending if isinstance(e, Content))
                        if quirks.preamble_spent(held_chars):
                            break
                        continue
                    pending, held = held, None
                for event in pending:
                    yield event
        if held is not None and quirks.preamble_spent(held_chars):
            log.info(
                "engine %s wrote %d characters without a call under tool_choice "
                '"required"; the gateway makes the first search',
                self._engine.label,
                held_chars,
            )
            self._tail = tail_before
            del self._shown[shown_before:]
            return
        output = text_filter.close()
        out.take(output)
        tail = visible(output.text)
        out.structured = assembler.calls()
        if not called() and blank:
            tail.extend(self._visible(blank))
        if held is not None:
            if not called():
                # Thrown away, none of it shown: the gateway searches instead.
                self._tail = tail_before
                del self._shown[shown_before:]
                return
            tail = held + tail
        for event in tail:
            yield event

    async def _run_calls(
        self,
        raw_calls: list[RawCall],
        result: _Round,
        shapes: dict[str, CallShape],
        *,
        by: SearchedBy = "model",
    ) -> AsyncIterator[StreamEvent]:
        vetted = [vet_call(c, tools=shapes, seen=self._seen) for c in raw_calls]
        self._conversation.add_assistant(
            result.visible,
            [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments_text},
                }
                for c in vetted
            ],
        )
        results: list[ToolResult | None] = [None] * len(vetted)
        # Each running call puts its events, then its index when it is over.
        items: asyncio.Queue[ThorEvent | int] = asyncio.Queue()

        async def run(index: int, call: VettedCall) -> None:
            try:
                results[index] = await self._run_one(call, items, by)
            finally:
                items.put_nowait(index)

        now = working(vetted)
        if now.calls:
            # What runs now, before anything runs (a client shows "searching…").
            yield ToolEvent(now)
        tasks = [
            asyncio.create_task(run(i, call))
            for i, call in enumerate(vetted)
            if call.verdict is CallVerdict.RUN
        ]
        try:
            # Events go out as the tools make them; results go back in call order.
            running = len(tasks)
            while running:
                item = await items.get()
                if isinstance(item, int):
                    running -= 1
                else:
                    yield ToolEvent(item)
        finally:
            for task in tasks:
                task.cancel()
            if tasks:
                # Not gather: a second cancel would cut the tools' clean-up short.
                await asyncio.wait(tasks)
        if now.calls:
            yield ToolEvent(Working(()))  # the tools are done; the model is asked again
        for call, done in zip(vetted, results, strict=True):
            label = call.name if call.name in shapes else "unknown"
            if call.verdict is not CallVerdict.RUN:
                text, outcome = call.message, call.verdict.value
            elif done is None:
                text = prompts.TOOL_FAILED.format(name=call.name, problem="no result")
                outcome = ToolOutcome.ERROR.value
            else:
                text, outcome = done.text, done.outcome.value
                settle_seen(self._seen, call.key, outcome)
            yield CallEnded(label, outcome)
            self._conversation.add_tool(call.call_id, f"{text.rstrip()}\n{self.budgets.trailer()}")
        if result.malformed:
            yield CallEnded("unknown", "malformed", result.malformed)

    async def _run_one(
        self, call: VettedCall, events: asyncio.Queue[ThorEvent | int], by: SearchedBy
    ) -> ToolResult:
        tool = self._tools.get(call.name)
        if tool is None:  # vet_call already refused it; kept for the type checker
            return ToolResult(
                prompts.UNKNOWN_TOOL.format(name=call.name, names=""), ToolOutcome.ERROR
            )
        try:
            async with (
                asyncio.timeout(self._options.tool_timeout),
                aclosing(tool.run(call.arguments, self._context)) as items,
            ):
                async for item in items:
                    if isinstance(item, ToolResult):
                        return item
                    if isinstance(item, Searched) and item.by != by:
                        # The tool cannot tell who called it; the loop can (SPEC 4's `by`).
                        events.put_nowait(replace(item, by=by))
                    else:
                        events.put_nowait(item)
            return no_result(call.name)
        except TimeoutError:
            return timed_out(call.name)
        except Exception as exc:
            return failed(call.name, exc, interface="chat")
