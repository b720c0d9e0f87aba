"""Which pages may call /mcp: the Origin table (both sides of every boundary)."""

from __future__ import annotations

import pytest

from gateway.http.origin import OriginPolicy, OriginVerdict, cors_headers, normalise_origin

POLICY = OriginPolicy.of(["http://127.0.0.1:8080", "https://UI.Example.org", "http://[::1]:3000"])


@pytest.mark.parametrize(
    ("origin", "verdict"),
    [
        (None, OriginVerdict.ABSENT),
        ("http://127.0.0.1:8080", OriginVerdict.ALLOWED),
        ("HTTP://127.0.0.1:8080", OriginVerdict.ALLOWED),
        ("http://127.0.0.1:8081", OriginVerdict.REFUSED),
        ("http://127.0.0.1:808", OriginVerdict.REFUSED),
        ("http://127.0.0.1", OriginVerdict.REFUSED),
        ("https://127.0.0.1:8080", OriginVerdict.REFUSED),
        ("http://127.0.0.2:8080", OriginVerdict.REFUSED),
        ("http://localhost:8080", OriginVerdict.REFUSED),
        ("https://ui.example.org", OriginVerdict.ALLOWED),
        ("https://ui.example.org:443", OriginVerdict.ALLOWED),
        ("https://ui.example.org:8443", OriginVerdict.REFUSED),
        ("http://ui.example.org", OriginVerdict.REFUSED),
        ("https://evil.ui.example.org", OriginVerdict.REFUSED),
        ("https://ui.example.org.evil.test", OriginVerdict.REFUSED),
        ("https://ui.example.org/", OriginVerdict.REFUSED),
        ("https://user@ui.example.org", OriginVerdict.REFUSED),
        ("http://[::1]:3000", OriginVerdict.ALLOWED),
        ("http://[::1]:3001", OriginVerdict.REFUSED),
        ("null", OriginVerdict.REFUSED),
        ("", OriginVerdict.REFUSED),
        ("file://", OriginVerdict.REFUSED),
        ("http://127.0.0.1:99999", OriginVerdict.REFUSED),
    ],
    ids=repr,
)
def test_only_an_allowed_origin_passes_and_a_missing_one_is_not_a_browser(
    origin: str | None, verdict: OriginVerdict
) -> None:
    assert POLICY.check(origin) is verdict


def test_no_allowed_origins_refuses_every_browser_page() -> None:
    policy = OriginPolicy.of([])
    assert policy.check("http://127.0.0.1:8000") is OriginVerdict.REFUSED
    assert policy.check(None) is OriginVerdict.ABSENT


@pytest.mark.parametrize(
    ("value", "normalised"),
    [
        ("http://Host.Example:80", "http://host.example"),
        ("https://host.example:443", "https://host.example"),
        ("https://host.example:8443", "https://host.example:8443"),
        ("ws://host.example", None),
        ("host.example", None),
        ("https://host.example?x", None),
        ("https://host.example#x", None),
    ],
)
def test_origins_are_compared_in_one_form(value: str, normalised: str | None) -> None:
    assert normalise_origin(value) == normalised


def test_a_preflight_answer_names_the_transports_methods_and_headers() -> None:
    headers = dict(cors_headers("http://127.0.0.1:8080", preflight=True))
    assert headers[b"access-control-allow-origin"] == b"http://127.0.0.1:8080"
    assert headers[b"access-control-allow-methods"] == b"GET, POST, DELETE"
    for name in (b"authorization", b"mcp-session-id", b"mcp-protocol-version"):
        assert name in headers[b"access-control-allow-headers"]
    answer = dict(cors_headers("http://127.0.0.1:8080", preflight=False))
    assert answer[b"access-control-expose-headers"] == b"mcp-session-id"
