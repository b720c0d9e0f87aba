"""The tool loop's round rules (SPEC 3), as pure code: no I/O, no clock, no engine.

`gateway.loop.turn` does the talking; this module decides how an answer starts (`start`),
which round comes next and with what ``tool_choice`` (`next_round`) and other fields
(`round_fields`), what a finished round leads to (`after_round`), when the gateway makes
the first search itself (``LoopState.search_due``, SPEC 3.2), and what was learnt about the
engine's handling of ``tool_choice: "required"``. Which engine errors refuse it, and how
long a preamble may run, are engine quirks (`gateway.api.quirks`). `LoopState` is
immutable: every rule returns the next state, so the loop never changes it by hand.

The gateway's own first search: every Web-on answer searches at least once, whatever the
engine does with ``"required"``. When round 1 ends without a call (the engine ignored
``"required"``, or refused it with a 400) or writes `gateway.api.quirks.PREAMBLE_LIMIT`
characters without one, its held text is dropped, the gateway runs ``web_search`` itself
with the user's question, and round 2 follows under ``"auto"``. An engine seen to ignore
or refuse ``"required"`` has its later answers start with that search and round 1 under
``"auto"``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gateway.api import quirks

#: At most this many rounds with tools offered (SPEC 3.5).
MAX_TOOL_ROUNDS = 8
#: Then at most this many rounds without tools (SPEC 3.6).
MAX_ANSWER_ROUNDS = 2
#: Rounds that offer tools ask for at least this many tokens: a ``max_tokens`` meant for
#: the answer would otherwise cut a call in the middle of its arguments.
TOOL_ROUND_MIN_TOKENS = 512


class RequiredSupport(enum.Enum):
    """What an engine does with ``tool_choice: "required"`` (remembered per engine)."""

    UNKNOWN = "unknown"
    HONOURED = "honoured"
    REFUSED = "refused"  # answered 400
    IGNORED = "ignored"  # accepted it, then answered without calling a tool


class Phase(enum.Enum):
    """Where the loop is."""

    TOOLS = "tools"
    ANSWER = "answer"
    DONE = "done"


@dataclass(frozen=True, slots=True)
class LoopState:
    """The loop's counters for one answer."""

    phase: Phase = Phase.TOOLS
    tool_rounds: int = 0
    answer_rounds: int = 0
    #: The gateway's own first search runs before the next round (SPEC 3.2).
    search_due: bool = False
    #: The engine answered 400 to ``"required"``; learnt once the next round is accepted,
    #: so a 400 for another reason (a prompt too long) does not mark the engine.
    refusal_pending: bool = False
    #: The answer rounds have been announced (sources list and answer-now sent).
    answer_announced: bool = False
    #: The loop ended without an answer; the clear message must be sent.
    no_answer: bool = False


@dataclass(frozen=True, slots=True)
class RoundPlan:
    """How to ask the engine next.

    Attributes:
        offer_tools: Send ``tools`` (tool rounds) or not (answer rounds).
        tool_choice: The ``tool_choice`` to send with tools.
        hold_text: Hold visible text until a call appears: a ``"required"`` round, whose
            text is thrown away if no call comes (the engine ignored ``"required"``, or
            honoured it only halfway): the gateway then searches itself, and the text
            written without the search is never shown.
        announce_answer: Send the sources list and the answer-now line first (one turn).
    """

    offer_tools: bool
    tool_choice: str | None
    hold_text: bool
    announce_answer: bool


#: Engines whose answers start with the gateway's own search (``"required"`` is no use).
_SEARCH_FIRST = frozenset({RequiredSupport.IGNORED, RequiredSupport.REFUSED})


def start(support: RequiredSupport) -> LoopState:
    """The state an answer starts in: with the gateway's own search first when the engine
    is known to ignore or refuse ``"required"`` (SPEC 3.2: no round is wasted on it)."""
    return LoopState(search_due=support in _SEARCH_FIRST)


def next_round(state: LoopState, support: RequiredSupport) -> RoundPlan:
    """The plan of the next round (state.phase must not be DONE, the gateway's search
    must not be due)."""
    if state.phase is Phase.ANSWER:
        return RoundPlan(False, None, False, not state.answer_announced)
    required = state.tool_rounds == 0 and support not in _SEARCH_FIRST
    # Text is held in every "required" round, not only while the engine is unknown: an
    # engine that honoured "required" once may still end a later round without a call
    # (a preamble cut by the length limit), and its shown text would then be followed by
    # the answer written after the gateway's search.
    return RoundPlan(True, "required" if required else "auto", required, False)


def round_fields(fields: Mapping[str, Any], plan: RoundPlan) -> dict[str, Any]:
    """The client's own request fields as one round sends them.

    In rounds that offer tools, ``max_tokens`` and ``max_completion_tokens`` are raised
    to `TOOL_ROUND_MIN_TOKENS` (a limit meant for the answer must not cut a call), and
    ``parallel_tool_calls`` is ``true`` unless the client set it (SPEC 3.3 runs several
    calls of one round at once; llama-server's default is off: `gateway.api.quirks`).
    Rounds without tools send no ``parallel_tool_calls`` (OpenAI refuses it without
    ``tools``).
    """
    out = dict(fields)
    if not plan.offer_tools:
        out.pop("parallel_tool_calls", None)
        return out
    for name in ("max_tokens", "max_completion_tokens"):
        value = out.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            out[name] = max(value, TOOL_ROUND_MIN_TOKENS)
    return quirks.with_parallel_calls(out)


@dataclass(frozen=True, slots=True)
class RoundOutcome:
    """What one round produced, as the rules need it.

    Attributes:
        calls: Calls written (structured or text), whatever their verdict.
        malformed: Text blocks that could not be read as calls.
        has_text: Visible, non-blank text was written.
        tools_spent: A budget whose end ends the tool rounds is used up (SPEC 3.5: the
            search budget; `gateway.tools.ledger.BudgetCounter.tools_spent`).
    """

    calls: int
    malformed: int
    has_text: bool
    tools_spent: bool = False


class Step(enum.Enum):
    """What the loop does after a round."""

    RUN_CALLS = "run_calls"  # run the calls, then ask again per state.phase
    SEARCH_FIRST = "search_first"  # drop the held round; the gateway searches, then "auto"
    FINISH = "finish"  # the answer is complete (or the clear message is due)
    ASK_AGAIN = "ask_again"  # nothing to run; ask again per state.phase


@dataclass(frozen=True, slots=True)
class Advance:
    """The result of a rule: the next state, the step, what was learnt about the engine.

    Attributes:
        state: The next state.
        step: What the loop does now.
        learnt: What the engine does with ``"required"``, when this round showed it
            (the only place the loop's memory of engines is written from).
    """

    state: LoopState
    step: Step
    learnt: RequiredSupport | None = None


def after_round(state: LoopState, plan: RoundPlan, outcome: RoundOutcome) -> Advance:
    """The state and step after a round the engine accepted."""
    wrote_calls = outcome.calls > 0 or outcome.malformed > 0
    learnt: RequiredSupport | None = None
    if state.refusal_pending:
        learnt = RequiredSupport.REFUSED
        state = replace(state, refusal_pending=False)
    if plan.announce_answer:
        state = replace(state, answer_announced=True)
    if plan.offer_tools:
        if plan.tool_choice == "required":
            learnt = RequiredSupport.HONOURED if wrote_calls else RequiredSupport.IGNORED
            if not wrote_calls:
                # Round 1 is over (it counts); the gateway searches before round 2.
                state = replace(state, tool_rounds=state.tool_rounds + 1, search_due=True)
                return Advance(state, Step.SEARCH_FIRST, learnt)
        if not wrote_calls:
            if outcome.has_text:
                return Advance(replace(state, phase=Phase.DONE), Step.FINISH, learnt)
            return Advance(replace(state, phase=Phase.ANSWER), Step.ASK_AGAIN, learnt)
        rounds = state.tool_rounds + 1
        phase = Phase.TOOLS
        if rounds >= MAX_TOOL_ROUNDS or outcome.tools_spent:
            phase = Phase.ANSWER
        return Advance(replace(state, tool_rounds=rounds, phase=phase), Step.RUN_CALLS, learnt)

    state = replace(state, answer_announced=True, answer_rounds=state.answer_rounds + 1)
    last = state.answer_rounds >= MAX_ANSWER_ROUNDS
    if not wrote_calls:
        if outcome.has_text:
            return Advance(replace(state, phase=Phase.DONE), Step.FINISH, learnt)
        if last:
            return Advance(replace(state, phase=Phase.DONE, no_answer=True), Step.FINISH, learnt)
        return Advance(state, Step.ASK_AGAIN, learnt)
    if last:
        # No round is left to use a result, so the call is not run.
        done = replace(state, phase=Phase.DONE, no_answer=not outcome.has_text)
        return Advance(done, Step.FINISH, learnt)
    return Advance(state, Step.RUN_CALLS, learnt)


def after_calls(state: LoopState, *, tools_spent: bool) -> LoopState:
    """The tool rounds end as soon as a budget that ends them is spent (SPEC 3.5: the
    search budget)."""
    if state.phase is Phase.TOOLS and tools_spent:
        return replace(state, phase=Phase.ANSWER)
    return state


def asks_answer_again(state: LoopState) -> bool:
    """After calls run in an answer round, the model is asked once more for the answer
    (with the answer-now line: the sources list was already sent)."""
    return state.phase is Phase.ANSWER and state.answer_announced


def refused_required(state: LoopState) -> LoopState:
    """The engine answered 400 to ``"required"``: round 1 is over without a call, so the
    gateway searches before round 2 (``"auto"``); the refusal is learnt only if that
    round is accepted."""
    return replace(state, tool_rounds=state.tool_rounds + 1, search_due=True, refusal_pending=True)


def searched_first(state: LoopState, *, tools_spent: bool) -> LoopState:
    """The gateway's own search ran (or could not: no question, no search tool)."""
    return after_calls(replace(state, search_due=False), tools_spent=tools_spent)
