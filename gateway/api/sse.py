"""Server-Sent Events, both ways, and the chunks the gateway writes (SPEC 4). Pure.

Reading: `SSEDecoder` turns an engine's lines into events, tolerating what engines do:
comment lines, ``data:`` with or without the space, llama-server's old ``error:`` field
(`gateway.api.quirks`), and a stream that ends without a blank line or ``[DONE]``.

Writing: `ChunkWriter` makes the ``chat.completion.chunk`` objects of one client turn
(one id, one ``created``; typed: `Chunk`, `EventChunk`, `UsageChunk`, `Completion`),
tool events as empty-delta chunks with ``thor_event``, and encodes the frequent ones
(content, reasoning) from pre-built bytes.

Pass-through helpers: `boundary` (where the last whole event ends), `count_tokens`.

Everything written is JSON with ASCII escapes: text with a lone surrogate (an engine or
client cutting an emoji in two) is valid JSON that UTF-8 cannot encode.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, NotRequired, TypedDict

from gateway.api import quirks

DONE = b"data: [DONE]\n\n"

#: A JSON member holding model-written text that is not empty: what a token is.
_TEXT_MEMBER: Final = re.compile(rb'"(?:content|reasoning_content|arguments)"\s*:\s*"[^"]')


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event.

    Attributes:
        data: The joined ``data`` lines.
        error: True for llama-server's old ``error:`` field (or ``event: error``).
    """

    data: str
    error: bool = False


class SSEDecoder:
    """Incremental SSE parser over lines (without their line ends)."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._error: list[str] = []
        self._event = ""
        self._held = 0

    def feed(self, line: str) -> SSEEvent | None:
        """Take one line; return an event when a blank line completes one."""
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._held += len(value) + 1
        elif quirks.is_old_error_field(name):
            self._error.append(value)
            self._held += len(value) + 1
        elif name == "event":
            self._event = value
        return None

    def close(self) -> SSEEvent | None:
        """End of stream: dispatch what a missing blank line left behind."""
        return self._dispatch()

    @property
    def held(self) -> int:
        """Characters of the unfinished event held (its ``data`` and ``error`` lines): an
        engine that never sends the blank line would make it grow without end, so the
        caller bounds it."""
        return self._held

    @property
    def idle(self) -> bool:
        """Nothing of an event is held (the next line starts a new one)."""
        return not (self._data or self._error or self._event)

    def _dispatch(self) -> SSEEvent | None:
        data, error, event = self._data, self._error, self._event
        self._data, self._error, self._event, self._held = [], [], "", 0
        if error:
            return SSEEvent("\n".join(error), error=True)
        if data:
            return SSEEvent("\n".join(data), error=event == "error")
        return None


def encode(obj: Mapping[str, object]) -> bytes:
    """One ``data:`` event holding ``obj`` as compact JSON."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def boundary(buffer: bytes | bytearray, start: int = 0) -> int:
    """Index just past the last complete event in ``buffer`` (0 when none), looking only
    at blank lines that begin at ``start`` or later (what came since the last look)."""
    lf = buffer.rfind(b"\n\n", start)
    crlf = buffer.rfind(b"\r\n\r\n", start)
    return max(lf + 2 if lf >= 0 else 0, crlf + 4 if crlf >= 0 else 0)


def count_tokens(events: bytes) -> int:
    """Model-written text pieces in whole events: non-empty ``content``,
    ``reasoning_content`` or tool-call ``arguments`` strings (one per engine token, as
    engines send them; role, finish, usage and ``[DONE]`` events count nothing)."""
    return len(_TEXT_MEMBER.findall(events))


def comment(text: str = "keep-alive") -> bytes:
    """An SSE comment line: the keep-alive clients ignore."""
    return f": {text}\n\n".encode()


def new_completion_id() -> str:
    """An id for one client turn."""
    return f"chatcmpl-{uuid.uuid4().hex}"


class Delta(TypedDict, total=False):
    """A chunk's ``delta``: what the assistant's message gained (empty for a tool event or
    the end)."""

    role: Literal["assistant"]
    content: str
    reasoning_content: str


class ChunkChoice(TypedDict):
    """The one choice of a ``chat.completion.chunk``."""

    index: int
    delta: Delta
    logprobs: None
    finish_reason: str | None


class Chunk(TypedDict):
    """A ``chat.completion.chunk`` (role, content, reasoning, finish)."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChunkChoice]


class EventChunk(Chunk):
    """A tool event: a chunk with an empty delta and the ``thor_event`` field (SPEC 4)."""

    thor_event: Mapping[str, object]


class UsageChunk(Chunk):
    """The usage chunk: no choices, the OpenAI ``usage`` object."""

    usage: Mapping[str, int]


class CompletionMessage(TypedDict):
    """The assistant's whole message of a ``stream: false`` answer."""

    role: Literal["assistant"]
    content: str
    reasoning_content: NotRequired[str]


class CompletionChoice(TypedDict):
    """The one choice of a ``chat.completion``."""

    index: int
    message: CompletionMessage
    logprobs: None
    finish_reason: Literal["stop"]


class Completion(TypedDict):
    """A ``chat.completion`` with the answer's tool events in ``thor_events``."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    thor_events: list[Mapping[str, object]]
    usage: NotRequired[Mapping[str, int]]


class ChunkWriter:
    """Builds the chunks of one client turn."""

    def __init__(self, model: str, *, created: int | None = None) -> None:
        self.id = new_completion_id()
        self.model = model
        self.created = int(time.time()) if created is None else created
        head = json.dumps(
            {"id": self.id, "object": "chat.completion.chunk", "created": self.created},
            separators=(",", ":"),
        )[:-1]
        model_json = json.dumps(model)
        self._prefix = (
            f'data: {head},"model":{model_json},"choices":[{{"index":0,"delta":{{'.encode()
        )
        self._suffix = b'},"logprobs":null,"finish_reason":null}]}\n\n'

    def content_bytes(self, text: str) -> bytes:
        """The encoded content chunk (same JSON as `content`, built without a dict)."""
        return self._prefix + b'"content":' + json.dumps(text).encode() + self._suffix

    def reasoning_bytes(self, text: str) -> bytes:
        """The encoded ``reasoning_content`` chunk."""
        return self._prefix + b'"reasoning_content":' + json.dumps(text).encode() + self._suffix

    def _chunk(self, delta: Delta, finish: str | None = None) -> Chunk:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def role(self) -> Chunk:
        """The first chunk: the assistant role and empty content."""
        return self._chunk({"role": "assistant", "content": ""})

    def content(self, text: str) -> Chunk:
        """A content delta."""
        return self._chunk({"content": text})

    def reasoning(self, text: str) -> Chunk:
        """A ``reasoning_content`` delta, as the engine sent it."""
        return self._chunk({"reasoning_content": text})

    def event(self, payload: Mapping[str, object]) -> EventChunk:
        """A tool event: empty delta plus the ``thor_event`` field."""
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": None}],
            "thor_event": payload,
        }

    def finish(self, reason: str = "stop") -> Chunk:
        """The last chunk of the turn."""
        return self._chunk({}, reason)

    def usage(self, usage: Mapping[str, int]) -> UsageChunk:
        """The usage chunk (empty ``choices``), only when the client asked for it."""
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage,
        }

    def completion(
        self,
        content: str,
        *,
        reasoning: str,
        usage: Mapping[str, int] | None,
        events: list[Mapping[str, object]],
    ) -> Completion:
        """The whole answer for ``stream: false``, events in the ``thor_events`` field."""
        message: CompletionMessage = {"role": "assistant", "content": content}
        if reasoning:
            message["reasoning_content"] = reasoning
        body: Completion = {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
            ],
            "thor_events": events,
        }
        if usage is not None:
            body["usage"] = usage
        return body


def error_event(body: Mapping[str, object]) -> bytes:
    """The final error event of a stream that already began, then ``[DONE]``."""
    return encode(body) + DONE
