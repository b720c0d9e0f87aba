"""The message list the loop sends to the engine, round after round (SPEC 3). Pure.

The client's messages go first, as they came, except that the Web switch's system line
is merged into the client's first system message (several chat templates refuse a
second one). Then the turns the gateway adds: assistant turns with their calls, tool
results, and user turns of its own (the malformed-call notice, the sources list with the
answer-now line).

Alternation: the gateway never sends two consecutive messages of the same role that it
created itself, and never puts a user turn of its own right after a user message
(chat templates such as Gemma's and some Mistral ones reject either). A user turn added
after a user message is joined to it with a blank line: to the gateway's own turn, or
to a copy of the client's last message (the client's own objects are never changed).
Tool results are the one exception a role may repeat: each call gets its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.api.messages import Message


def _with_text(message: Mapping[str, Any], text: str, *, before: bool) -> dict[str, Any]:
    """A copy of ``message`` with ``text`` joined to its content (a blank line between)."""
    copy = dict(message)
    content = copy.get("content")
    if isinstance(content, list):
        part = {"type": "text", "text": text}
        copy["content"] = [part, *content] if before else [*content, part]
    else:
        old = content if isinstance(content, str) else ""
        if not old:
            copy["content"] = text
        else:
            copy["content"] = f"{text}\n\n{old}" if before else f"{old}\n\n{text}"
    return copy


class Conversation:
    """The client's messages plus the turns of one answer."""

    def __init__(self, client: Sequence[Message]) -> None:
        self._client = [m.raw for m in client]
        self._own: list[dict[str, Any]] = []

    @property
    def own(self) -> list[dict[str, Any]]:
        """The turns the gateway added (a copy)."""
        return list(self._own)

    def add_assistant(self, text: str, calls: Sequence[Mapping[str, Any]]) -> None:
        """The model's turn: its visible text and the calls it made (already vetted).

        With calls, blank text is sent as null, as OpenAI does.
        """
        turn: dict[str, Any] = {"role": "assistant", "content": text if text.strip() else ""}
        if calls:
            turn["content"] = text if text.strip() else None
            turn["tool_calls"] = list(calls)
        self._own.append(turn)

    def add_tool(self, call_id: str, text: str) -> None:
        """One call's result."""
        self._own.append({"role": "tool", "tool_call_id": call_id, "content": text})

    def add_user(self, text: str) -> None:
        """A user turn of the gateway's own, joined to a user turn right before it."""
        if self._own and self._own[-1]["role"] == "user":
            self._own[-1] = _with_text(self._own[-1], text, before=False)
        else:
            self._own.append({"role": "user", "content": text})

    def messages(self, system: str) -> list[Mapping[str, Any]]:
        """The list to send: the system line merged in front, then everything."""
        client = list(self._client)
        first = client[0] if client else None
        if first is not None and first.get("role") == "system":
            client[0] = _with_text(first, system, before=True)
        else:
            client.insert(0, {"role": "system", "content": system})
        own = self._own
        if own and own[0]["role"] == "user" and client[-1].get("role") == "user":
            # The gateway's first turn is a user turn right after the client's question
            # (a tool round that wrote nothing): one user turn, not two.
            text = own[0]["content"]
            client[-1] = _with_text(client[-1], text if isinstance(text, str) else "", before=False)
            own = own[1:]
        return [*client, *own]
