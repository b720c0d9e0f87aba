"""Reading SearXNG's answers: every recorded answer, both result shapes, dates, HTML, failures."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from gateway.tools.search.answer import (
    Coverage,
    EngineTrouble,
    FailureCause,
    SearchAnswer,
    SearchFailure,
    answered_engines,
    plain_text,
    published_date,
    read_answer,
)
from testkit.searxng import index, recorded, search_files

ORIGIN = "http://127.0.0.1:8888"


def read(file: str, *, limit: int = 6, timing: bool = True) -> SearchAnswer | SearchFailure:
    served = recorded(file)
    return read_answer(
        served.status,
        served.content_type,
        served.body,
        served.server_timing if timing else None,
        limit=limit,
        origin=ORIGIN,
    )


def answer(file: str, **options: object) -> SearchAnswer:
    result = read(file, **options)  # type: ignore[arg-type]
    assert isinstance(result, SearchAnswer), result
    return result


def recorded_answer_files() -> list[str]:
    return [f for f in search_files() if index()[f]["status"] == 200]


@pytest.mark.parametrize("file", recorded_answer_files())
def test_every_recorded_answer_is_read_with_its_results_and_engines(file: str) -> None:
    entry = index()[file]
    document = json.loads(recorded(file).body)
    result = answer(file, limit=100)
    assert [hit.url for hit in result.hits] == [r["url"] for r in document["results"]]
    expected = entry.get("unresponsive_engines") or document["unresponsive_engines"]
    assert [[t.name, t.reason] for t in result.unresponsive] == expected
    assert all(hit.title and "<" not in hit.snippet for hit in result.hits)


def test_both_result_shapes_are_read_with_defaults() -> None:
    result = answer("search_normal.json")
    legacy, typed = result.hits[1], result.hits[2]
    assert (legacy.url, legacy.title, legacy.published) == (
        "https://example.com/blog/citric-vs-vinegar",
        "Citric acid vs vinegar",
        None,
    )
    assert (typed.url, typed.title) == (
        "https://energy.example.org/boiling",
        "Energy use of boiling water",
    )
    assert typed.published == datetime(2025, 10, 26, tzinfo=UTC)


def test_html_in_a_snippet_is_stripped() -> None:
    result = answer("search_normal.json")
    assert result.hits[1].snippet == "A comparison of two household descalers."


def test_at_most_the_configured_number_of_results_is_kept_in_searxngs_order() -> None:
    result = answer("search_normal.json", limit=2)
    assert [hit.title for hit in result.hits] == [
        "Kettle descaling guide",
        "Citric acid vs vinegar",
    ]


def test_published_dates_naive_and_with_offset() -> None:
    result = answer("search_time_range_week.json")
    dates = [hit.published for hit in result.hits]
    assert dates == [
        datetime(2026, 11, 30, 13, 38, 45, tzinfo=UTC),
        None,
        datetime(2026, 11, 24, 18, 38, 45, tzinfo=UTC),
        datetime(2026, 11, 28, 18, 38, 45, tzinfo=UTC),  # naive: read as UTC
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("3 days ago", None),
        (17, None),
        ("2026-11-28T18:38:45", datetime(2026, 11, 28, 18, 38, 45, tzinfo=UTC)),
        ("2026-11-24T18:38:45+00:00", datetime(2026, 11, 24, 18, 38, 45, tzinfo=UTC)),
        (
            "2026-11-24T23:30:00.123456+05:30",
            datetime(2026, 11, 24, 23, 30, 0, 123456, tzinfo=timezone(timedelta(hours=5.5))),
        ),
        ("2026-11-24 18:38:45+0000", datetime(2026, 11, 24, 18, 38, 45, tzinfo=UTC)),
        ("2026-11-24", datetime(2026, 11, 24, tzinfo=UTC)),
    ],
    ids=["null", "empty", "words", "number", "naive", "offset", "micro-offset", "pubdate", "date"],
)
def test_published_date_in_every_form_searxng_sends(
    value: object, expected: datetime | None
) -> None:
    assert published_date(value) == expected


def test_an_offset_date_keeps_the_publishers_calendar_day() -> None:
    late = published_date("2026-11-24T23:30:00+05:30")
    assert late is not None
    assert late.date().isoformat() == "2026-11-24"


@pytest.mark.parametrize(
    ("html", "text"),
    [
        ("A <b>bold</b> claim", "A bold claim"),
        ("Fish &amp; chips &lt;3 &#8212; &eacute;t&eacute;", "Fish & chips <3 — été"),
        ("line one\nline two\r\n[9] forged", "line one line two [9] forged"),
        ("<script>alert(1)</script>kept<style>p{}</style>", "kept"),
        ("a<br>b<p>c</p>", "a b c"),
        ("x < y and y > z", "x < y and y > z"),
        ("tab\there\x00nul", "tab herenul"),
    ],
    ids=["tags", "entities", "newlines", "script-style", "breaks", "bare-angles", "controls"],
)
def test_plain_text_strips_html_and_keeps_one_line(html: str, text: str) -> None:
    assert plain_text(html, 400) == text


def test_plain_text_is_cut_at_a_word() -> None:
    cut = plain_text("word " * 200, 50)
    assert len(cut) <= 50
    assert cut.endswith("word…")


def test_results_that_cannot_be_cited_are_left_out() -> None:
    body = json.dumps(
        {
            "results": [
                {"url": "magnet:?xt=urn:btih:abc", "title": "torrent"},
                {"url": "javascript:alert(1)", "title": "script"},
                {"url": "https://ok.example/\nforged", "title": "newline"},
                {"title": "no address"},
                "not an object",
                {"url": "https://ok.example/a"},
            ],
            "unresponsive_engines": [["x", "timeout"], ["x", "timeout"], "junk", [1, 2]],
        }
    ).encode()
    result = read_answer(200, "application/json", body, None, limit=6, origin=ORIGIN)
    assert isinstance(result, SearchAnswer)
    assert [(h.url, h.title, h.snippet) for h in result.hits] == [("https://ok.example/a", "", "")]
    assert result.unresponsive == (EngineTrouble("x", "timeout"),)


def test_lone_surrogates_in_an_answer_become_replacement_characters() -> None:
    # JSON may escape a lone surrogate; UTF-8 cannot carry one, so a result holding one
    # would break the MCP answer it appears in and the next engine request (llama-server
    # refuses such JSON). Text keeps its place with U+FFFD; an address holding one is
    # left out (it cannot be cited or read).
    body = (
        b'{"results": ['
        b'{"url": "https://ok.example/\\ud800", "title": "bad address"},'
        b'{"url": "https://ok.example/a", "title": "T\\ud800itle", "content": "s\\udfffnip"}'
        b'], "unresponsive_engines": [["e\\udbff", "r\\udc00"]],'
        b' "answers": [{"answer": "42\\ud83d"}]}'
    )
    assert "\ud800" in json.loads(body)["results"][1]["title"]
    result = read_answer(200, "application/json", body, None, limit=6, origin=ORIGIN)
    assert isinstance(result, SearchAnswer)
    assert [(h.url, h.title, h.snippet) for h in result.hits] == [
        ("https://ok.example/a", "T\ufffditle", "s\ufffdnip")
    ]
    assert result.unresponsive == (EngineTrouble("e\ufffd", "r\ufffd"),)
    assert result.instant_answers == ("42\ufffd",)


def test_localised_reasons_are_kept_as_written() -> None:
    result = answer("search_reasons_localized_de.json")
    assert [t.reason for t in result.unresponsive] == [
        "Ausgesetzt: zu viele Anfragen",
        "HTTP-Verbindungsfehler",
        "Zeitüberschreitung",
    ]


def test_instant_answers_are_kept_as_plain_text() -> None:
    result = answer("search_with_answer.json")
    assert result.instant_answers == (
        "sha256 hash digest: 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824",
    )


@pytest.mark.parametrize(
    ("file", "coverage"),
    [
        ("search_normal.json", Coverage.RESULTS),
        ("search_no_results.json", Coverage.NO_HITS),
        ("search_all_engines_fail.json", Coverage.ALL_FAILED),
        ("search_time_range_only_unsupported_engine.json", Coverage.NONE_ASKED),
    ],
)
def test_the_kinds_of_nothing_are_told_apart_by_server_timing(
    file: str, coverage: Coverage
) -> None:
    assert answer(file).coverage is coverage


@pytest.mark.parametrize(
    "file",
    [
        "search_no_results.json",
        "search_all_engines_fail.json",
        "search_time_range_only_unsupported_engine.json",
    ],
)
def test_without_server_timing_an_empty_answer_is_unknown(file: str) -> None:
    assert answer(file, timing=False).coverage is Coverage.UNKNOWN


@pytest.mark.parametrize(
    ("header", "engines"),
    [
        (None, None),
        ("", None),
        ("app;dur=3", None),  # not SearXNG's (no overall total)
        ("total;dur=2003.503, render;dur=0", frozenset()),
        (
            "total;dur=2015.771, render;dur=0, total_0_fakejson;dur=162.927, "
            "total_1_fakebrave;dur=164.335, load_0_fakejson;dur=145.192",
            frozenset({"fakejson", "fakebrave"}),
        ),
    ],
    ids=["absent", "empty", "foreign", "none-answered", "two-answered"],
)
def test_answered_engines_come_from_server_timing(
    header: str | None, engines: frozenset[str] | None
) -> None:
    assert answered_engines(header) == engines


def failure_of(file: str) -> SearchFailure:
    result = read(file)
    assert isinstance(result, SearchFailure), result
    return result


@pytest.mark.parametrize(
    ("file", "searxng_says"),
    [
        ("error_invalid_time_range.json", "Invalid value fortnight for parameter time_range"),
        ("error_invalid_pageno.json", "Invalid value 0 for parameter pageno"),
        ("error_invalid_language.json", "Invalid value english for parameter language"),
        ("error_no_query.json", "No query"),
        ("error_empty_query.json", "No query"),
    ],
)
def test_a_400_names_searxngs_reason(file: str, searxng_says: str) -> None:
    failure = failure_of(file)
    assert (failure.cause, failure.status) == (FailureCause.BAD_REQUEST, 400)
    assert f"HTTP 400: {searxng_says}" in failure.message


@pytest.mark.parametrize("file", ["json_disabled_403.html", "json_disabled_403_no_query.html"])
def test_json_not_enabled_tells_the_operator_to_add_it_to_search_formats(file: str) -> None:
    failure = failure_of(file)
    assert failure.cause is FailureCause.JSON_DISABLED
    assert "search.formats" in failure.message
    assert "settings.yml" in failure.message


@pytest.mark.parametrize(
    "file", ["limiter_429_bot_user_agent.txt", "limiter_429_json_request_5.txt"]
)
def test_the_limiter_tells_the_operator_to_turn_it_off_or_pass_the_gateway(file: str) -> None:
    failure = failure_of(file)
    assert failure.cause is FailureCause.RATE_LIMITED
    assert "server.limiter" in failure.message
    assert "pass_ip" in failure.message


@pytest.mark.parametrize(
    ("status", "content_type", "body", "cause", "words"),
    [
        (
            500,
            "application/json",
            b'{"error": "search error"}',
            FailureCause.SERVER_ERROR,
            "HTTP 500: search error",
        ),
        (502, "text/html", b"<h1>Bad Gateway</h1>", FailureCause.SERVER_ERROR, "HTTP 502"),
        (302, "text/html", b"", FailureCause.HTTP_STATUS, "HTTP 302"),
        (404, "text/html", b"<h1>Not Found</h1>", FailureCause.HTTP_STATUS, "base URL"),
        (200, "text/html; charset=utf-8", b"<html>", FailureCause.CONTENT_TYPE, "text/html"),
        (200, "", b"{}", FailureCause.CONTENT_TYPE, "none"),
        (200, "application/json", b"<html>oops", FailureCause.NOT_JSON, "not JSON"),
        (200, "application/json", b"\xff\xfe", FailureCause.NOT_JSON, "not JSON"),
        (200, "application/json", b"[1, 2]", FailureCause.NOT_JSON, "no results list"),
        (200, "application/json", b'{"results": {}}', FailureCause.NOT_JSON, "no results list"),
    ],
    ids=[
        "500-json",
        "502-html",
        "302",
        "404",
        "html-200",
        "no-type",
        "not-json",
        "bad-bytes",
        "list",
        "results-dict",
    ],
)
def test_every_other_failure_is_a_value_naming_its_cause(
    status: int, content_type: str, body: bytes, cause: FailureCause, words: str
) -> None:
    result = read_answer(status, content_type, body, None, limit=6, origin=ORIGIN)
    assert isinstance(result, SearchFailure)
    assert result.cause is cause
    assert words in result.message
    assert ORIGIN in result.message
    assert "The operator should" in result.message


def test_a_json_answer_with_charset_or_a_json_subtype_is_accepted() -> None:
    for content_type in ("application/json; charset=utf-8", "application/vnd.searxng+json"):
        result = read_answer(200, content_type, b'{"results": []}', None, limit=6, origin=ORIGIN)
        assert isinstance(result, SearchAnswer)


def test_an_old_instance_with_number_of_results_is_read() -> None:
    body = json.dumps({"number_of_results": 0, "results": [{"url": "https://a.example/"}]}).encode()
    result = read_answer(200, "application/json", body, None, limit=6, origin=ORIGIN)
    assert isinstance(result, SearchAnswer)
    assert len(result.hits) == 1
