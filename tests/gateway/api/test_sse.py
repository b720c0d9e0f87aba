"""SSE on both sides: the engine's events decoded, the client's chunks written, pass-through cut."""

from __future__ import annotations

from gateway.api import sse


def feed_all(lines: list[str]) -> list[sse.SSEEvent]:
    decoder = sse.SSEDecoder()
    events = [e for line in lines if (e := decoder.feed(line)) is not None]
    last = decoder.close()
    return [*events, last] if last is not None else events


def test_sse_comments_are_skipped_and_data_joined() -> None:
    events = feed_all([": ping", 'data: {"a":', "data: 1}", "", "data:[DONE]", ""])
    assert events == [sse.SSEEvent('{"a":\n1}'), sse.SSEEvent("[DONE]")]


def test_llama_server_old_error_field_is_an_error_event() -> None:
    events = feed_all(
        ['error: {"code":400,"message":"too long","type":"invalid_request_error"}', ""]
    )
    assert events == [
        sse.SSEEvent('{"code":400,"message":"too long","type":"invalid_request_error"}', error=True)
    ]


def test_the_decoder_counts_what_it_holds_until_the_event_ends() -> None:
    decoder = sse.SSEDecoder()
    for line in (": ping", "event: message", "data: abc", "data:de", "error: f"):
        assert decoder.feed(line) is None
    assert decoder.held == len("abc\nde\nf\n")
    assert decoder.feed("") is not None
    assert decoder.held == 0


def test_a_last_event_without_blank_line_is_dispatched_at_close() -> None:
    assert feed_all(['data: {"x": 1}']) == [sse.SSEEvent('{"x": 1}')]


def test_chunks_of_one_turn_share_id_and_events_have_empty_delta() -> None:
    writer = sse.ChunkWriter("m", created=7)
    role, event, finish = (
        writer.role(),
        writer.event({"type": "sources", "sources": []}),
        writer.finish(),
    )
    assert role["id"] == event["id"] == finish["id"]
    assert event["choices"][0]["delta"] == {}
    assert event["thor_event"] == {"type": "sources", "sources": []}
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert writer.usage({"total_tokens": 1})["choices"] == []


def test_encoded_events_are_one_data_line() -> None:
    data = sse.encode({"a": "x\ny"})
    assert data.startswith(b"data: ")
    assert data.endswith(b"\n\n")
    assert data.count(b"\n") == 2


def test_proxy_cuts_at_the_last_event_boundary() -> None:
    assert sse.boundary(b"data: 1\n\ndata: 2") == len(b"data: 1\n\n")
    assert sse.boundary(b"data: 1\r\n\r\ndata: 2") == len(b"data: 1\r\n\r\n")
    assert sse.boundary(b"data: 1") == 0
