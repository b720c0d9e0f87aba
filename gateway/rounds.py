"""The tool loop's round rules (SPEC 3), as pure code: no I/O, no clock, no engine.

`gateway.loop` does the talking; this module decides which round comes next and with
what ``tool_choice`` (`next_round`), what a finished round leads to (`after_round`), and
what was learnt about the engine's handling of ``tool_choice: "required"``. `LoopState`
is immutable: every rule returns the next state, so the loop never changes it by hand.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

#: At most this many rounds with tools offered (SPEC 3.5).
MAX_TOOL_ROUNDS = 8
#: Then at most this many rounds without tools (SPEC 3.6).
MAX_ANSWER_ROUNDS = 2


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
    #: The one retry of round 1 with ``"auto"`` was used (or is being used).
    required_retry: bool = False
    #: The engine answered 400 to ``"required"``; learnt once the retry is accepted, so
    #: a 400 for another reason (a prompt too long) does not mark the engine.
    refusal_pending: bool = False
    #: The nudge line is in the system message (kept once added, for the prompt cache).
    nudged: bool = False
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
        nudge: Add the one-line nudge to the system message.
        hold_text: Hold visible text until a call appears: a ``"required"`` round whose
            text may be thrown away if the engine turns out to ignore ``"required"``.
        announce_answer: Send the sources list and the answer-now line first (one turn).
    """

    offer_tools: bool
    tool_choice: str | None
    nudge: bool
    hold_text: bool
    announce_answer: bool


def next_round(state: LoopState, support: RequiredSupport) -> RoundPlan:
    """The plan of the next round (state.phase must not be DONE)."""
    if state.phase is Phase.ANSWER:
        return RoundPlan(False, None, state.nudged, False, not state.answer_announced)
    first = state.tool_rounds == 0
    required = (
        first
        and not state.required_retry
        and support in (RequiredSupport.UNKNOWN, RequiredSupport.HONOURED)
    )
    nudge = state.nudged or (first and not required)
    return RoundPlan(
        True,
        "required" if required else "auto",
        nudge,
        required and support is RequiredSupport.UNKNOWN,
        False,
    )


@dataclass(frozen=True, slots=True)
class RoundOutcome:
    """What one round produced, as the rules need it.

    Attributes:
        calls: Calls written (structured or text), whatever their verdict.
        malformed: Text blocks that could not be read as calls.
        has_text: Visible, non-blank text was written.
        searches_spent: The search budget is used up.
    """

    calls: int
    malformed: int
    has_text: bool
    searches_spent: bool = False


class Step(enum.Enum):
    """What the loop does after a round."""

    RUN_CALLS = "run_calls"  # run the calls, then ask again per state.phase
    RETRY_AUTO = "retry_auto"  # throw the held round away, ask again with "auto" + nudge
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
                state = replace(state, required_retry=True, nudged=True)
                return Advance(state, Step.RETRY_AUTO, learnt)
        if plan.nudge:
            state = replace(state, nudged=True)
        if not wrote_calls:
            if outcome.has_text:
                return Advance(replace(state, phase=Phase.DONE), Step.FINISH, learnt)
            return Advance(replace(state, phase=Phase.ANSWER), Step.ASK_AGAIN, learnt)
        rounds = state.tool_rounds + 1
        phase = Phase.TOOLS
        if rounds >= MAX_TOOL_ROUNDS or outcome.searches_spent:
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


def after_calls(state: LoopState, *, searches_spent: bool) -> LoopState:
    """The tool rounds end as soon as the search budget is spent (SPEC 3.5)."""
    if state.phase is Phase.TOOLS and searches_spent:
        return replace(state, phase=Phase.ANSWER)
    return state


def asks_answer_again(state: LoopState) -> bool:
    """After calls run in an answer round, the model is asked once more for the answer
    (with the answer-now line: the sources list was already sent)."""
    return state.phase is Phase.ANSWER and state.answer_announced


def refused_required(state: LoopState) -> LoopState:
    """The engine answered 400 to ``"required"``: retry round 1 with ``"auto"`` and the
    nudge; the refusal is learnt only if the retry is accepted."""
    return replace(state, required_retry=True, nudged=True, refusal_pending=True)
