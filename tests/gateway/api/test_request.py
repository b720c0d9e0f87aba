"""Request checks: malformed bodies, the Web switch, the pass-through body, messages, media."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.api.messages import parse_message, user_text
from gateway.api.request import parse_chat_request
from gateway.errors import BodyTooLargeError, EngineStatusError, RequestError

# --- Request checks ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"[1]",
        b'{"messages": [{"role": "user", "content": "hi"}]}',
        b'{"model": "m", "messages": []}',
        b'{"model": "m", "messages": ["hi"]}',
        b'{"model": "m", "messages": [{"role": "user"}], "stream": "yes"}',
        b'{"model": "m", "messages": [{"role": "user"}], "thor_web_search": 1}',
        b'{"model": "m", "messages": [{"role": "user"}], "tools": {}}',
    ],
    ids=[
        "bad-json",
        "not-object",
        "no-model",
        "no-messages",
        "message-not-object",
        "stream-type",
        "switch-type",
        "tools-type",
    ],
)
def test_malformed_requests_are_400(raw: bytes) -> None:
    with pytest.raises(RequestError) as caught:
        parse_chat_request(raw)
    assert caught.value.status == 400
    assert not isinstance(caught.value, BodyTooLargeError)


@pytest.mark.parametrize(
    "own",
    [
        {"tools": [{"type": "function"}]},
        # The deprecated form of tools is the client's own tools too.
        {"functions": [{"name": "mine", "parameters": {}}]},
        {"tools": [{"type": "function"}], "functions": []},
    ],
    ids=["tools", "functions", "both"],
)
def test_web_switch_with_own_tools_is_refused_clearly(own: dict[str, Any]) -> None:
    raw = json.dumps(
        {"model": "m", "messages": [{"role": "user"}], "thor_web_search": True, **own}
    ).encode()
    with pytest.raises(RequestError, match="cannot be combined"):
        parse_chat_request(raw)


@pytest.mark.parametrize(
    "own",
    [{}, {"tools": []}, {"functions": []}, {"tools": None, "functions": None}],
    ids=["none", "empty-tools", "empty-functions", "nulls"],
)
def test_web_switch_without_own_tools_is_taken(own: dict[str, Any]) -> None:
    raw = json.dumps(
        {"model": "m", "messages": [{"role": "user"}], "thor_web_search": True, **own}
    ).encode()
    assert parse_chat_request(raw).web


def test_pass_through_body_drops_only_the_switch() -> None:
    raw = b'{"model": "m", "messages": [{"role": "user"}], "thor_web_search": false, "top_k": 3}'
    chat = parse_chat_request(raw)
    assert json.loads(chat.engine_body()) == {
        "model": "m",
        "messages": [{"role": "user"}],
        "top_k": 3,
    }


def test_pass_through_body_without_the_switch_is_forwarded_as_received() -> None:
    raw = b'{"model": "m",   "messages": [{"role": "user"}], "x": 1.0}'
    assert parse_chat_request(raw).engine_body() == raw


def test_usage_is_asked_only_with_stream_options() -> None:
    raw = (
        b'{"model": "m", "messages": [{"role": "user"}], "stream": true,'
        b' "stream_options": {"include_usage": true}}'
    )
    assert parse_chat_request(raw).include_usage
    assert not parse_chat_request(
        b'{"model": "m", "messages": [{"role": "user"}], "stream": true}'
    ).include_usage


def test_user_text_reads_strings_and_text_parts() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "see https://a.example/"},
        {"role": "user", "content": [{"type": "text", "text": "and b"}, {"type": "image_url"}]},
    ]
    parsed = [parse_message(m, i) for i, m in enumerate(messages)]
    assert user_text(parsed) == "see https://a.example/\nand b"


def test_engine_error_body_keeps_the_engines_words() -> None:
    error = EngineStatusError(
        400, {"error": {"message": "too long", "type": "x", "code": 400}}, "too long", engine="e"
    )
    assert error.body()["error"]["message"] == "too long"
    assert error.kind == "http_4xx"


@pytest.mark.parametrize(
    ("part", "refused"),
    [
        ({"type": "image_url", "image_url": {"url": "https://example.org/a.png"}}, True),
        ({"type": "image_url", "image_url": {"url": "http://10.0.0.1/a.png"}}, True),
        ({"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}, True),
        ({"type": "image_url", "image_url": {"url": "/etc/passwd"}}, True),
        ({"type": "video_url", "video_url": {"url": "https://v.example/v.mp4"}}, True),
        ({"type": "audio_url", "audio_url": "https://a.example/a.wav"}, True),
        ({"type": "file", "file": {"file_url": "https://f.example/f.pdf"}}, True),
        ({"type": "image_url", "image_url": {"url": " DATA:image/png;base64,AA=="}}, False),
        ({"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}, False),
        ({"type": "input_audio", "input_audio": {"data": "AA==", "format": "wav"}}, False),
        ({"type": "text", "text": "see https://example.org/"}, False),
    ],
    ids=[
        "https",
        "http",
        "file",
        "path",
        "video",
        "audio-string",
        "file-url",
        "data-upper",
        "data",
        "inline-audio",
        "text-with-address",
    ],
)
def test_media_addresses_are_refused_unless_inline(part: dict[str, Any], refused: bool) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": [part]}]}
    raw = json.dumps(body).encode()
    if refused:
        with pytest.raises(RequestError, match="only data: URLs"):
            parse_chat_request(raw)
    else:
        parse_chat_request(raw)
    # The operator's setting lets every one of them through.
    parse_chat_request(raw, allow_media_urls=True)
