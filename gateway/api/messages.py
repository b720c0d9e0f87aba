"""Chat messages parsed once, at the edge, into typed values. Pure.

A `Message` keeps the object as the client sent it (``raw``: forwarded to the engine
unchanged, unknown fields and all) beside what the gateway reads from it: the role, the
text, and the media addresses its content parts carry.

The messages the gateway writes itself have the OpenAI shapes as TypedDicts: `SystemTurn`,
`UserTurn`, `AssistantTurn` (with its `ToolCall` list) and `ToolTurn`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NotRequired, TypedDict

from gateway.errors import RequestError

#: Content part types that carry text.
_TEXT_PARTS = frozenset({"text", "input_text"})

#: A message object as the client sent it (any fields; the engine judges them).
RawMessage = Mapping[str, object]


class SystemTurn(TypedDict):
    """A system message the gateway writes (its Web switch line, when the client sent none)."""

    role: Literal["system"]
    content: str


class UserTurn(TypedDict):
    """A user turn of the gateway's own (the malformed-call notice, sources, answer now)."""

    role: Literal["user"]
    content: str


class FunctionCall(TypedDict):
    """A call's ``function``: the tool's name and its arguments as JSON text."""

    name: str
    arguments: str


class ToolCall(TypedDict):
    """One element of an assistant turn's ``tool_calls``."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class AssistantTurn(TypedDict):
    """The model's turn as the gateway enters it: its text (None beside calls with no
    text, as OpenAI sends it) and the calls it made."""

    role: Literal["assistant"]
    content: str | None
    tool_calls: NotRequired[list[ToolCall]]


class ToolTurn(TypedDict):
    """One call's result."""

    role: Literal["tool"]
    tool_call_id: str
    content: str


@dataclass(frozen=True, slots=True)
class Message:
    """One message of the client's conversation.

    Attributes:
        role: ``system``, ``user``, ``assistant``, ``tool``, ... as sent.
        text: Its text: the string content, or its text parts joined by newlines.
        media: Addresses in its non-text content parts (``image_url.url`` and the like).
        raw: The message as received.
    """

    role: str
    text: str
    media: tuple[str, ...]
    raw: RawMessage


def _media_addresses(part: Mapping[str, object]) -> list[str]:
    """Strings under ``url`` or ``*_url`` keys of a part, at its top level or one down
    (``{"type": "image_url", "image_url": {"url": ...}}``, ``{"type": "video_url",
    "video_url": ...}``, ``{"type": "file", "file": {"file_url": ...}}``)."""
    found: list[str] = []
    for key, value in part.items():
        if isinstance(value, str) and (key == "url" or key.endswith("_url")):
            found.append(value)
        elif isinstance(value, Mapping):
            for inner_key, inner in value.items():
                if isinstance(inner, str) and (inner_key == "url" or inner_key.endswith("_url")):
                    found.append(inner)
    return found


def parse_message(raw: object, index: int) -> Message:
    """Read one element of ``messages``.

    Content of another shape than a string or an array is kept for the engine to judge
    (pass-through stays transparent) and read as no text.

    Raises:
        RequestError: Not an object with a string ``role``.
    """
    if not isinstance(raw, Mapping) or not isinstance(raw.get("role"), str):
        raise RequestError(f"messages[{index}] must be an object with a string 'role'.")
    content = raw.get("content")
    if content is None or isinstance(content, str):
        return Message(raw["role"], content or "", (), raw)
    if not isinstance(content, list):
        return Message(raw["role"], "", (), raw)
    texts: list[str] = []
    media: list[str] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") in _TEXT_PARTS and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            media.extend(_media_addresses(part))
    return Message(raw["role"], "\n".join(texts), tuple(media), raw)


def is_inline_media(address: str) -> bool:
    """Whether a media address carries its data itself (a ``data:`` URL)."""
    return address.lstrip()[:5].lower() == "data:"


def refuse_media_addresses(messages: Sequence[Message]) -> None:
    """Refuse messages whose media parts point somewhere instead of carrying the data.

    # Security
    Rule: a chat message may carry images, audio, video or files only inline
    (``data:`` URLs); an ``http(s)://``, ``file:`` or any other address is refused with
    400 before anything reaches an engine.
    Threat: engines such as vLLM fetch media addresses themselves, from the engine's own
    network position, outside the fetcher and its checks: a client (or a model's tool
    output pasted back by one) could make the engine read internal addresses or local
    files (server-side request forgery; vLLM CVE-2025-6242).
    Callers may rely on: no message with a non-``data:`` media address passes unless the
    operator set ``media_urls = "allow"``, which hands engines that fetching (see the
    README for the risk); the setting cannot loosen anything of the fetcher's.
    Proved by ``test_media_addresses_are_refused_unless_inline`` in
    ``tests/gateway/api/test_request.py`` and ``test_remote_media_is_refused_before_the_engine``
    in ``tests/gateway/http/test_app.py``.

    Raises:
        RequestError: A message carries a media address that is not a ``data:`` URL.
    """
    for index, message in enumerate(messages):
        for address in message.media:
            if not is_inline_media(address):
                raise RequestError(
                    f"messages[{index}] carries a media address; only data: URLs are "
                    "accepted (the engine would fetch the address itself, outside the "
                    "gateway's network rules)."
                )


def user_text(messages: Sequence[Message]) -> str:
    """The text of the user's messages, joined (strings and text parts)."""
    return "\n".join(m.text for m in messages if m.role == "user" and m.text)
