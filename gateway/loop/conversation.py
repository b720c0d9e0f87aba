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

from collections.abc import Sequence

from gateway.api.messages import (
    AssistantTurn,
    Message,
    RawMessage,
    SystemTurn,
    ToolCall,
    ToolTurn,
    UserTurn,
)

#: A turn the gateway adds to the client's messages.
OwnTurn = AssistantTurn | ToolTurn | UserTurn
#: One message of the list sent: the client's (as it came, or a copy with text joined),
#: the gateway's system line, or a turn of its own.
SentMessage = RawMessage | SystemTurn | OwnTurn


def _joined(old: str, text: str, *, before: bool) -> str:
    """``text`` joined to ``old`` with a blank line between (``text`` alone if ``old`` is empty)."""
    if not old:
        return text
    return f"{text}\n\n{old}" if before else f"{old}\n\n{text}"


def _with_text(message: RawMessage, text: str, *, before: bool) -> RawMessage:
    """A copy of the client's ``message`` with ``text`` joined to its content, every other
    field kept: a text part beside its parts, or a blank line between strings."""
    copy = dict(message)
    content = copy.get("content")
    if isinstance(content, list):
        part = {"type": "text", "text": text}
        copy["content"] = [part, *content] if before else [*content, part]
    else:
        copy["content"] = _joined(content if isinstance(content, str) else "", text, before=before)
    return copy


class Conversation:
    """The client's messages plus the turns of one answer."""

    def __init__(self, client: Sequence[Message]) -> None:
        self._client = [m.raw for m in client]
        self._own: list[OwnTurn] = []

    @property
    def own(self) -> list[OwnTurn]:
        """The turns the gateway added (a copy)."""
        return list(self._own)

    def add_assistant(self, text: str, calls: Sequence[ToolCall]) -> None:
        """The model's turn: its visible text and the calls it made (already vetted).

        With calls, blank text is sent as null, as OpenAI does.
        """
        if calls:
            turn: AssistantTurn = {
                "role": "assistant",
                "content": text if text.strip() else None,
                "tool_calls": list(calls),
            }
        else:
            turn = {"role": "assistant", "content": text if text.strip() else ""}
        self._own.append(turn)

    def add_tool(self, call_id: str, text: str) -> None:
        """One call's result."""
        self._own.append({"role": "tool", "tool_call_id": call_id, "content": text})

    def add_user(self, text: str) -> None:
        """A user turn of the gateway's own, joined to a user turn right before it."""
        last = self._own[-1] if self._own else None
        if last is not None and last["role"] == "user":
            joined = _joined(last["content"], text, before=False)
            self._own[-1] = {"role": "user", "content": joined}
        else:
            self._own.append({"role": "user", "content": text})

    def messages(self, system: str) -> list[SentMessage]:
        """The list to send: the system line merged in front, then everything."""
        client: list[SentMessage] = list(self._client)
        first = self._client[0] if self._client else None
        if first is not None and first.get("role") == "system":
            client[0] = _with_text(first, system, before=True)
        else:
            client.insert(0, {"role": "system", "content": system})
        own: list[OwnTurn] = self._own
        last = client[-1]
        if own and own[0]["role"] == "user" and last.get("role") == "user":
            # The gateway's first turn is a user turn right after the client's question
            # (a tool round that wrote nothing): one user turn, not two.
            client[-1] = _with_text(last, own[0]["content"], before=False)
            own = own[1:]
        return [*client, *own]
