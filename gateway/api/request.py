"""Reading a chat request body: JSON, the schema checks, the Web switch. Pure.

The body is parsed once, here, into a `ChatRequest`: typed fields for what the gateway
reads, the messages as `gateway.api.messages.Message` values, and the decoded object itself
for the fields it does not read (passed to the engine unchanged).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway import prompts
from gateway.api.messages import Message, parse_message, refuse_media_addresses
from gateway.errors import RequestError

#: The Web switch in the request body.
WEB_SWITCH = "thor_web_search"


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A checked chat request.

    Attributes:
        model: The requested model.
        messages: The conversation, typed.
        stream: ``stream: true``.
        web: The Web switch is on.
        include_usage: The client asked for usage chunks (``stream_options``).
        fields: The decoded body, unknown fields included.
        raw: The body as received.
    """

    model: str
    messages: tuple[Message, ...]
    stream: bool
    web: bool
    include_usage: bool
    fields: Mapping[str, Any]
    raw: bytes = b""

    def engine_body(self) -> bytes:
        """The body for pass-through: as sent, without the gateway's own switch."""
        if WEB_SWITCH not in self.fields and self.raw:
            # Unchanged: forward the bytes as they came (no second encoding of a long
            # conversation).
            return self.raw
        body = {k: v for k, v in self.fields.items() if k != WEB_SWITCH}
        # ASCII escapes: a lone surrogate (a JavaScript client cutting an emoji in two)
        # is valid JSON text but cannot be encoded as UTF-8.
        return json.dumps(body).encode()


def _flag(body: Mapping[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise RequestError(f"'{name}' must be a boolean.")
    return value


def parse_chat_request(raw: bytes, *, allow_media_urls: bool = False) -> ChatRequest:
    """Decode and check a ``/v1/chat/completions`` body.

    Args:
        raw: The body.
        allow_media_urls: The operator's ``media_urls = "allow"`` (see
            `gateway.api.messages.refuse_media_addresses`).

    Raises:
        RequestError: Not JSON (or nested too deep to read), not an object, a field of
            the wrong shape, a media address that is not inline, or both the Web switch
            and the client's own tools (``tools`` or the deprecated ``functions``).
    """
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError("The request body is not valid JSON.") from exc
    except RecursionError as exc:
        raise RequestError("The request body is nested too deeply.") from exc
    if not isinstance(body, dict):
        raise RequestError("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError("'model' is required and must be a string.")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise RequestError("'messages' is required and must be a non-empty array.")
    messages = tuple(parse_message(m, i) for i, m in enumerate(raw_messages))
    if not allow_media_urls:
        refuse_media_addresses(messages)
    stream = _flag(body, "stream")
    web = _flag(body, WEB_SWITCH)
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise RequestError("'tools' must be an array.")
    # ``functions`` is the deprecated form of ``tools``: the client's own tools as well.
    if web and (tools or body.get("functions")):
        raise RequestError(prompts.WEB_WITH_OWN_TOOLS)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise RequestError("'stream_options' must be an object.")
    include_usage = bool(stream and options and options.get("include_usage") is True)
    return ChatRequest(model, messages, stream, web, include_usage, body, raw)
