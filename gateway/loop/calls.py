"""Tool calls, as pure code: fragments joined into calls, and the verdict on each call.

- `ToolCallAssembler` joins streamed ``delta.tool_calls`` fragments into whole calls.
- `call_key` is the identity that makes two calls "the same" (SPEC 3.4).
- `vet_call` decides whether a call may run (`CallVerdict`), with the model-facing
  message when it may not.
- `working` names the calls that run, for the ``working`` event.
"""

from __future__ import annotations

import enum
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway import prompts
from gateway.api import quirks
from gateway.api.chunks import CallFragment
from gateway.tools.base import CallShape
from gateway.tools.events import RunningCall, Working


@dataclass
class _Fragments:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
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
    call, one without continues the last), that repeat the name on every fragment, and
    that give several calls the same ``index`` (a fragment with another id starts a new
    call after the one it would have joined): rows of `gateway.api.quirks`.
    """

    def __init__(self) -> None:
        #: Calls by (engine index, how many calls came before under that index).
        self._calls: dict[tuple[int, int], _Fragments] = {}
        self._current: dict[int, tuple[int, int]] = {}
        self._last: tuple[int, int] | None = None

    def add(self, fragment: CallFragment) -> None:
        """Take one element of ``delta.tool_calls``."""
        index = fragment.index
        if index is None:
            starts = quirks.starts_call_without_index(fragment.call_id, fragment.name)
            if starts or self._last is None:
                index = max((i for i, _ in self._calls), default=-1) + 1
                key = self._current[index] = (index, 0)
            else:
                key = self._last
        else:
            key = self._current.setdefault(index, (index, 0))
            known = self._calls.get(key)
            if known is not None and quirks.new_call_under_index(known.call_id, fragment.call_id):
                key = self._current[index] = (index, key[1] + 1)
        self._last = key
        parts = self._calls.setdefault(key, _Fragments())
        if fragment.call_id and not parts.call_id:
            parts.call_id = fragment.call_id
        parts.name = quirks.joined_name(parts.name, fragment.name)
        if fragment.arguments:
            parts.arguments.append(fragment.arguments)

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


class CallVerdict(enum.StrEnum):
    """What the loop does with one call (the value is the tool-calls metric's outcome)."""

    RUN = "run"
    DUPLICATE = "duplicate"  # same tool and normalised arguments as a call already run
    UNKNOWN_TOOL = "unknown_tool"
    BAD_ARGUMENTS = "bad_arguments"  # not a JSON object
    MISSING_ARGUMENTS = "missing_arguments"


@dataclass(frozen=True, slots=True)
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
        subject: The tool's subject argument as (name, value), cut to `SUBJECT_CHARS`,
            for the ``working`` event; None when the tool has none or the call lacks it.
    """

    call_id: str
    name: str
    arguments: dict[str, Any]
    arguments_text: str
    verdict: CallVerdict
    message: str = ""
    key: str = ""
    subject: tuple[str, str] | None = None


def _fold(value: Any, *, fold: bool, names: frozenset[str]) -> Any:
    if isinstance(value, str):
        text = value.strip()
        return " ".join(text.casefold().split()) if fold else text
    if isinstance(value, list):
        return [_fold(v, fold=fold, names=names) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _fold(v, fold=fold or k in names, names=names) for k, v in value.items()}
    return value


def call_key(name: str, arguments: Mapping[str, Any], folded: frozenset[str] = frozenset()) -> str:
    """The identity of a call for dedup (SPEC 3.4).

    JSON keys sorted, strings trimmed, and in the tool's ``folded`` arguments (a search's
    ``query`` and ``queries``) case and whitespace folded, so ``{"query": " Rust  Jobs"}``
    repeats ``{"query": "rust jobs"}``.
    """
    normal = _fold(dict(arguments), fold=False, names=folded)
    return name + "\x00" + json.dumps(normal, sort_keys=True, ensure_ascii=False)


def vet_call(
    raw: RawCall,
    *,
    tools: Mapping[str, CallShape],
    seen: set[str],
    scope: prompts.Scope = prompts.Scope.ANSWER,
) -> VettedCall:
    """Decide whether one call runs.

    Args:
        raw: The call as written.
        tools: The tools offered in this answer, by name, with what vetting needs of each.
        seen: Keys of calls already run in this answer; the key of a call that will run
            is added, so a repeat inside the same round is caught too.
        scope: What ``seen`` belongs to (an answer, or an MCP session), for the message.

    Returns:
        The vetted call, with the model-facing message when it does not run.
    """
    call_id = raw.call_id or new_call_id()
    if isinstance(raw.arguments, str):
        try:
            decoded = json.loads(raw.arguments) if raw.arguments.strip() else {}
        except (json.JSONDecodeError, RecursionError) as exc:
            problem = f"invalid JSON: {exc.msg}" if isinstance(exc, ValueError) else "too deep"
            return VettedCall(
                call_id,
                raw.name,
                {},
                "{}",
                CallVerdict.BAD_ARGUMENTS,
                prompts.BAD_ARGUMENTS.format(name=raw.name, problem=problem),
            )
        decoded = quirks.unwrap_arguments(decoded)
    else:
        decoded = dict(raw.arguments)
    text = quirks.history_arguments(decoded)
    shape = tools.get(raw.name)
    if shape is None:
        return VettedCall(
            call_id,
            raw.name,
            {},
            text,
            CallVerdict.UNKNOWN_TOOL,
            prompts.UNKNOWN_TOOL.format(name=raw.name or "(empty)", names=", ".join(tools)),
        )
    if not isinstance(decoded, dict):
        return VettedCall(
            call_id,
            raw.name,
            {},
            text,
            CallVerdict.BAD_ARGUMENTS,
            prompts.BAD_ARGUMENTS.format(name=raw.name, problem="not an object"),
        )
    missing = [r for r in shape.required if r not in decoded]
    if missing:
        return VettedCall(
            call_id,
            raw.name,
            decoded,
            text,
            CallVerdict.MISSING_ARGUMENTS,
            prompts.MISSING_ARGUMENTS.format(name=raw.name, missing=", ".join(missing)),
        )
    key = call_key(raw.name, decoded, shape.folded)
    if key in seen:
        return VettedCall(
            call_id,
            raw.name,
            decoded,
            text,
            CallVerdict.DUPLICATE,
            prompts.duplicate_call(scope),
            key,
        )
    seen.add(key)
    return VettedCall(
        call_id, raw.name, decoded, text, CallVerdict.RUN, "", key, _subject(shape, decoded)
    )


def _subject(shape: CallShape, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
    value = arguments.get(shape.subject) if shape.subject is not None else None
    if shape.subject is None or not isinstance(value, str):
        return None
    return shape.subject, " ".join(value.split())[:SUBJECT_CHARS]


def settle_seen(seen: set[str], key: str, outcome: str) -> None:
    """Count a call that ran as run; forget one that a rule or a budget refused.

    A refused call did nothing (no search, no page read): the same call may succeed
    later in the answer or session, once a search has found its address or pages were
    given back, so a repeat of it is no repeat.

    Args:
        seen: The answer's (or session's) keys of calls already run, as `vet_call` left
            them (``key`` in it).
        key: The call's dedup key.
        outcome: Its tool-call outcome (``gateway.tools.base.ToolOutcome`` values).
    """
    if outcome == "refused":
        seen.discard(key)


#: Characters of a subject kept in the event (a query is at most 400, an address 4096).
SUBJECT_CHARS = 200


def working(calls: Sequence[VettedCall]) -> Working:
    """The ``working`` event for the calls of a round that run.

    Each running call is named by its tool and its subject (`gateway.tools.base.Tool.subject`)
    on one line, cut to `SUBJECT_CHARS`: the model wrote them, so a client shows them as text.
    """
    running = [call for call in calls if call.verdict is CallVerdict.RUN]
    return Working(tuple(RunningCall(call.name, call.subject) for call in running))
