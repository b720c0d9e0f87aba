"""Engine chunks parsed once, at the edge, into typed values (SPEC 4). Pure.

`parse_chunk` turns one decoded ``chat.completion.chunk`` object into an `EngineChunk`:
the first choice's content, reasoning and tool-call fragments, and the usage. Fields of
the wrong type are read as absent (engines differ; none of them is trusted to be exact),
so the loop never looks inside a ``dict`` again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.api import quirks


@dataclass(frozen=True, slots=True)
class UsageCounts:
    """Token counts of one round, or summed over a turn."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: UsageCounts) -> UsageCounts:
        return UsageCounts(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )

    def payload(self) -> dict[str, int]:
        """The OpenAI ``usage`` object."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True, slots=True)
class CallFragment:
    """One element of ``delta.tool_calls``.

    Attributes:
        index: The call it belongs to (None when the engine sent none).
        call_id: The call's id, on its first fragment ("" when absent or empty).
        name: The function name, usually on the first fragment only ("" when absent).
        arguments: A piece of the arguments' JSON text ("" when absent).
    """

    index: int | None
    call_id: str = ""
    name: str = ""
    arguments: str = ""


# Not frozen: one is built per token, and a frozen dataclass's __init__ costs more.
@dataclass(slots=True)
class EngineChunk:
    """What the loop needs of one engine chunk.

    Attributes:
        content: ``delta.content`` ("" when absent or null).
        reasoning: ``delta.reasoning_content`` ("" when absent).
        calls: ``delta.tool_calls`` fragments.
        usage: The chunk's ``usage``, when it carries one.
    """

    content: str = ""
    reasoning: str = ""
    calls: tuple[CallFragment, ...] = ()
    usage: UsageCounts | None = None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_usage(value: object) -> UsageCounts | None:
    """An OpenAI ``usage`` object, or None when it is not one."""
    if not isinstance(value, dict):
        return None
    return UsageCounts(
        _int(value.get("prompt_tokens")),
        _int(value.get("completion_tokens")),
        _int(value.get("total_tokens")),
    )


def _fragment(raw: object) -> CallFragment | None:
    if not isinstance(raw, dict):
        return None
    function = raw.get("function")
    function = function if isinstance(function, dict) else {}
    index = raw.get("index")
    call_id, name = raw.get("id"), function.get("name")
    return CallFragment(
        index if isinstance(index, int) and not isinstance(index, bool) else None,
        call_id if isinstance(call_id, str) else "",
        name if isinstance(name, str) else "",
        quirks.arguments_text(function.get("arguments")),
    )


def parse_chunk(obj: Mapping[str, Any]) -> EngineChunk:
    """The typed view of one decoded chunk (only the first choice is read: the loop
    never asks for ``n > 1``). Decoded JSON holds plain dicts, so the checks are for
    ``dict`` (an ABC check per token is measurable)."""
    usage = parse_usage(obj.get("usage"))
    choices = obj.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    delta = choice.get("delta") if isinstance(choice, dict) else None
    if not isinstance(delta, dict):
        return EngineChunk() if usage is None else EngineChunk(usage=usage)
    content = delta.get("content")
    reasoning = delta.get("reasoning_content")
    raw_calls = delta.get("tool_calls")
    calls: tuple[CallFragment, ...] = ()
    if isinstance(raw_calls, list):
        calls = tuple(f for f in map(_fragment, raw_calls) if f is not None)
    return EngineChunk(
        content if isinstance(content, str) else "",
        reasoning if isinstance(reasoning, str) else "",
        calls,
        usage,
    )
