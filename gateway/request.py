"""Reading a chat request body: JSON, the schema checks, and the Web switch. Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway import prompts
from gateway.errors import RequestError

#: The Web switch in the request body.
WEB_SWITCH = "thor_web_search"


@dataclass(frozen=True)
class ChatRequest:
    """A checked chat request.

    Attributes:
        body: The decoded body, unknown fields included.
        model: The requested model.
        stream: ``stream: true``.
        web: The Web switch is on.
        include_usage: The client asked for usage chunks (``stream_options``).
        raw: The body as received.
    """

    body: dict[str, Any]
    model: str
    stream: bool
    web: bool
    include_usage: bool
    raw: bytes = b""

    def engine_body(self) -> bytes:
        """The body for pass-through: as sent, without the gateway's own switch."""
        if WEB_SWITCH not in self.body and self.raw:
            # Unchanged: forward the bytes as they came (no second encoding of a long
            # conversation).
            return self.raw
        body = {k: v for k, v in self.body.items() if k != WEB_SWITCH}
        return json.dumps(body, ensure_ascii=False).encode()


def parse_chat_request(raw: bytes) -> ChatRequest:
    """Decode and check a ``/v1/chat/completions`` body.

    Raises:
        RequestError: Not JSON, not an object, or a field of the wrong shape; or both
            the Web switch and the client's own tools.
    """
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError("The request body is not valid JSON.") from exc
    if not isinstance(body, dict):
        raise RequestError("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError("'model' is required and must be a string.")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' is required and must be a non-empty array.")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RequestError(f"messages[{i}] must be an object with a string 'role'.")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise RequestError("'stream' must be a boolean.")
    web = body.get(WEB_SWITCH, False)
    if web is None:
        web = False
    if not isinstance(web, bool):
        raise RequestError(f"'{WEB_SWITCH}' must be a boolean.")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise RequestError("'tools' must be an array.")
    if web and tools:
        raise RequestError(prompts.WEB_WITH_OWN_TOOLS)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise RequestError("'stream_options' must be an object.")
    include_usage = bool(stream and options and options.get("include_usage") is True)
    return ChatRequest(body, model, stream, web, include_usage, raw)


def user_text(messages: list[dict[str, Any]]) -> str:
    """The text of the user's messages, joined (strings and text parts)."""
    parts: list[str] = []
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    parts.append(part["text"])
    return "\n".join(parts)
