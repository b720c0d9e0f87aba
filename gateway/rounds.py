"""The tool loop's rules (SPEC 3), as pure code: no I/O, no clock, no engine.

`gateway.loop` does the talking; this module decides:

- how streamed ``tool_calls`` fragments become calls (`ToolCallAssembler`);
- whether a call may run, and the key that makes two calls "the same" (`call_key`,
  `vet_call`);
- which round comes next and with what ``tool_choice`` (`LoopState`, `next_round`,
  `after_round`), and how an engine's handling of ``"required"`` is remembered
  (`RequiredSupport`).
"""

from __future__ import annotations

import contextlib
import enum
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway import prompts

#: At most this many rounds with tools offered (SPEC 3.5).
MAX_TOOL_ROUNDS = 8
#: Then at most this many rounds without tools (SPEC 3.6).
MAX_ANSWER_ROUNDS = 2

# --- Tool calls -------------------------------------------------------------------------


@dataclass
class _Fragments:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RawCall:
    """A call as the model wrote it: arguments still text, or already an object.

    Attributes:
        call_id: The engine's id; empty when the engine sent none.
        name: The function name.
        arguments: JSON text (structured calls) or a decoded object (text calls).
    """

    call_id: str
    name: str
    arguments: str | Mapping[str, Any]


class ToolCallAssembler:
    """Joins streamed ``delta.tool_calls`` fragments into whole calls, by ``index``.

    Tolerates engines that omit ``index`` (a fragment with an id or name starts a new
    call, one without continues the last) and that repeat the name on every fragment.
    """

    def __init__(self) -> None:
        self._calls: dict[int, _Fragments] = {}
        self._last: int | None = None

    def add(self, fragment: Mapping[str, Any]) -> None:
        """Take one element of ``delta.tool_calls``."""
        function = fragment.get("function")
        function = function if isinstance(function, Mapping) else {}
        name = function.get("name")
        call_id = fragment.get("id")
        index = fragment.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            starts = bool(call_id) or bool(name)
            index = max(self._calls, default=-1) + 1 if starts or self._last is None else self._last
        self._last = index
        parts = self._calls.setdefault(index, _Fragments())
        if isinstance(call_id, str) and call_id and not parts.call_id:
            parts.call_id = call_id
        if isinstance(name, str) and name and name != parts.name:
            parts.name += name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            parts.arguments.append(arguments)
        elif isinstance(arguments, Mapping):
            # Some engines send the whole object instead of JSON text.
            parts.arguments.append(json.dumps(arguments))

    def __bool__(self) -> bool:
        return bool(self._calls)

    def calls(self) -> list[RawCall]:
        """The calls seen so far, in index order."""
        return [
            RawCall(parts.call_id, parts.name, "".join(parts.arguments))
            for _, parts in sorted(self._calls.items())
        ]


def new_call_id() -> str:
    """An id for a call the engine sent without one (or wrote as text)."""
    return f"call_{secrets.token_hex(12)}"


class Verdict(enum.StrEnum):
    """What the loop does with one call."""

    RUN = "run"
    DUPLICATE = "duplicate"  # same tool and normalised arguments as a call already run
    UNKNOWN_TOOL = "unknown_tool"
    BAD_ARGUMENTS = "bad_arguments"  # not a JSON object
    MISSING_ARGUMENTS = "missing_arguments"


@dataclass(frozen=True)
class VettedCall:
    """A call with its id, decoded arguments and the verdict on it.

    Attributes:
        call_id: Never empty: generated when the engine sent none.
        name: Function name as written.
        arguments: Decoded arguments (empty when they could not be decoded).
        arguments_text: The arguments as JSON object text, for the assistant message
            (``{}`` when they were not an object).
        verdict: Whether it runs, and if not, why.
        message: For calls that do not run, the tool message saying why.
        key: Dedup key (empty for calls that cannot run).
    """

    call_id: str
    name: str
    arguments: dict[str, Any]
    arguments_text: str
    verdict: Verdict
    message: str = ""
    key: str = ""


def _fold(value: Any, *, query: bool) -> Any:
    if isinstance(value, str):
        text = value.strip()
        return " ".join(text.casefold().split()) if query else text
    if isinstance(value, list):
        return [_fold(v, query=query) for v in value]
    if isinstance(value, Mapping):
        return {
            str(k): _fold(v, query=query or k in ("query", "queries")) for k, v in value.items()
        }
    return value


def call_key(name: str, arguments: Mapping[str, Any]) -> str:
    """The identity of a call for dedup (SPEC 3.4).

    JSON keys sorted, strings trimmed, and in ``query``/``queries`` case and whitespace
    folded, so ``{"query": " Rust  Jobs"}`` repeats ``{"query": "rust jobs"}``.
    """
    folded = _fold(dict(arguments), query=False)
    return name + "\x00" + json.dumps(folded, sort_keys=True, ensure_ascii=False)


def vet_call(
    raw: RawCall,
    *,
    offered: Sequence[str],
    required: Mapping[str, Sequence[str]],
    seen: set[str],
) -> VettedCall:
    """Decide whether one call runs.

    Args:
        raw: The call as written.
        offered: Names of the tools offered in this answer.
        required: Required argument names per tool.
        seen: Keys of calls already run in this answer; the key of a call that will run
            is added, so a repeat inside the same round is caught too.

    Returns:
        The vetted call, with the model-facing message when it does not run.
    """
    call_id = raw.call_id or new_call_id()
    if isinstance(raw.arguments, str):
        try:
            decoded = json.loads(raw.arguments) if raw.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return VettedCall(
                call_id,
                raw.name,
                {},
                "{}",
                Verdict.BAD_ARGUMENTS,
                prompts.BAD_ARGUMENTS.format(name=raw.name, problem=f"invalid JSON: {exc.msg}"),
            )
        # Some engines double-encode: a JSON string holding the object.
        if isinstance(decoded, str):
            with contextlib.suppress(ValueError):
                decoded = json.loads(decoded)
    else:
        decoded = dict(raw.arguments)
    # The history always carries an object: engines that re-parse past calls with their
    # chat template (llama-server with Qwen3-Coder or GLM templates) answer 500 to
    # anything else, which would end the turn instead of letting the model try again.
    text = json.dumps(decoded, ensure_ascii=False) if isinstance(decoded, dict) else "{}"
    if raw.name not in offered:
        return VettedCall(
            call_id,
            raw.name,
            {},
            text,
            Verdict.UNKNOWN_TOOL,
            prompts.UNKNOWN_TOOL.format(name=raw.name or "(empty)", names=", ".join(offered)),
        )
    if not isinstance(decoded, dict):
        return VettedCall(
            call_id,
            raw.name,
            {},
            text,
            Verdict.BAD_ARGUMENTS,
            prompts.BAD_ARGUMENTS.format(name=raw.name, problem="not an object"),
        )
    missing = [r for r in required.get(raw.name, ()) if r not in decoded]
    if missing:
        return VettedCall(
            call_id,
            raw.name,
            decoded,
            text,
            Verdict.MISSING_ARGUMENTS,
            prompts.MISSING_ARGUMENTS.format(name=raw.name, missing=", ".join(missing)),
        )
    key = call_key(raw.name, decoded)
    if key in seen:
        return VettedCall(
            call_id, raw.name, decoded, text, Verdict.DUPLICATE, prompts.DUPLICATE_CALL, key
        )
    seen.add(key)
    return VettedCall(call_id, raw.name, decoded, text, Verdict.RUN, "", key)


# --- Rounds -------------------------------------------------------------------------------


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


@dataclass
class LoopState:
    """The loop's counters for one answer."""

    phase: Phase = Phase.TOOLS
    tool_rounds: int = 0
    answer_rounds: int = 0
    #: The one retry of round 1 with ``"auto"`` was used (or is being used).
    required_retry: bool = False
    #: The nudge line is in the system message (kept once added, for the prompt cache).
    nudged: bool = False
    #: The answer rounds have been announced (sources list and answer-now sent).
    answer_announced: bool = False
    #: The loop ended without an answer; the clear message must be sent.
    no_answer: bool = False


@dataclass(frozen=True)
class RoundPlan:
    """How to ask the engine next.

    Attributes:
        offer_tools: Send ``tools`` (tool rounds) or not (answer rounds).
        tool_choice: The ``tool_choice`` to send with tools.
        nudge: Add the one-line nudge to the system message.
        hold_text: Hold visible text until a call appears: a ``"required"`` round whose
            text may be thrown away if the engine turns out to ignore ``"required"``.
        announce_answer: Send the sources list and the answer-now turn first.
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


@dataclass(frozen=True)
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


def after_round(
    state: LoopState, plan: RoundPlan, outcome: RoundOutcome
) -> tuple[Step, RequiredSupport | None]:
    """Advance ``state`` after a round; return the step and what was learnt about
    ``"required"`` (``None`` when nothing was)."""
    wrote_calls = outcome.calls > 0 or outcome.malformed > 0
    learnt: RequiredSupport | None = None
    if plan.offer_tools:
        if plan.tool_choice == "required":
            learnt = RequiredSupport.HONOURED if wrote_calls else RequiredSupport.IGNORED
            if not wrote_calls:
                state.required_retry = True
                state.nudged = True
                return Step.RETRY_AUTO, learnt
        if plan.nudge:
            state.nudged = True
        if not wrote_calls:
            if outcome.has_text:
                state.phase = Phase.DONE
                return Step.FINISH, learnt
            state.phase = Phase.ANSWER
            return Step.ASK_AGAIN, learnt
        state.tool_rounds += 1
        if state.tool_rounds >= MAX_TOOL_ROUNDS or outcome.searches_spent:
            state.phase = Phase.ANSWER
        return Step.RUN_CALLS, learnt

    state.answer_announced = True
    state.answer_rounds += 1
    last = state.answer_rounds >= MAX_ANSWER_ROUNDS
    if not wrote_calls:
        if outcome.has_text:
            state.phase = Phase.DONE
            return Step.FINISH, None
        if last:
            state.phase = Phase.DONE
            state.no_answer = True
            return Step.FINISH, None
        return Step.ASK_AGAIN, None
    if last:
        # No round is left to use a result, so the call is not run.
        state.phase = Phase.DONE
        state.no_answer = not outcome.has_text
        return Step.FINISH, None
    return Step.RUN_CALLS, None


def after_calls(state: LoopState, *, searches_spent: bool) -> None:
    """The tool rounds end as soon as the search budget is spent (SPEC 3.5)."""
    if state.phase is Phase.TOOLS and searches_spent:
        state.phase = Phase.ANSWER


def refused_required(state: LoopState) -> None:
    """Record that the engine answered 400 to ``"required"``: retry round 1 with
    ``"auto"`` and the nudge."""
    state.required_retry = True
    state.nudged = True
