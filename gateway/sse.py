"""Server-Sent Events, both ways, and the chunks the gateway writes (SPEC 4). Pure.

Reading: `SSEDecoder` turns an engine's lines into events, tolerating what engines do:
comment lines, ``data:`` with or without the space, llama-server's old ``error:`` field,
and a stream that ends without a blank line or ``[DONE]``.

Writing: `ChunkWriter` makes the ``chat.completion.chunk`` objects of one client turn
(one id, one ``created``), tool events as empty-delta chunks with ``thor_event``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

DONE = b"data: [DONE]\n\n"


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
        elif name == "error":
            self._error.append(value)
        elif name == "event":
            self._event = value
        return None

    def close(self) -> SSEEvent | None:
        """End of stream: dispatch what a missing blank line left behind."""
        return self._dispatch()

    def _dispatch(self) -> SSEEvent | None:
        data, error, event = self._data, self._error, self._event
        self._data, self._error, self._event = [], [], ""
        if error:
            return SSEEvent("\n".join(error), error=True)
        if data:
            return SSEEvent("\n".join(data), error=event == "error")
        return None


def encode(obj: dict[str, Any]) -> bytes:
    """One ``data:`` event holding ``obj`` as compact JSON."""
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def comment(text: str = "keep-alive") -> bytes:
    """An SSE comment line: the keep-alive clients ignore."""
    return f": {text}\n\n".encode()


def new_completion_id() -> str:
    """An id for one client turn."""
    return f"chatcmpl-{uuid.uuid4().hex}"


class ChunkWriter:
    """Builds the chunks of one client turn."""

    def __init__(self, model: str, *, created: int | None = None) -> None:
        self.id = new_completion_id()
        self.model = model
        self.created = int(time.time()) if created is None else created

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def role(self) -> dict[str, Any]:
        """The first chunk: the assistant role and empty content."""
        return self._chunk({"role": "assistant", "content": ""})

    def content(self, text: str) -> dict[str, Any]:
        """A content delta."""
        return self._chunk({"content": text})

    def reasoning(self, text: str) -> dict[str, Any]:
        """A ``reasoning_content`` delta, as the engine sent it."""
        return self._chunk({"reasoning_content": text})

    def event(self, payload: dict[str, Any]) -> dict[str, Any]:
        """A tool event: empty delta plus the ``thor_event`` field."""
        chunk = self._chunk({})
        chunk["thor_event"] = payload
        return chunk

    def finish(self, reason: str = "stop") -> dict[str, Any]:
        """The last chunk of the turn."""
        return self._chunk({}, reason)

    def usage(self, usage: dict[str, Any]) -> dict[str, Any]:
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
        usage: dict[str, Any] | None,
        events: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """The whole answer for ``stream: false``, events in the ``thor_events`` field."""
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reasoning:
            message["reasoning_content"] = reasoning
        body: dict[str, Any] = {
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


def error_event(body: dict[str, Any]) -> bytes:
    """The final error event of a stream that already began, then ``[DONE]``."""
    return encode(body) + DONE
