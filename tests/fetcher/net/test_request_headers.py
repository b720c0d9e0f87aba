"""Rule 7 on the wire: the exact request bytes carry no cookie, credentials or Referer."""

from __future__ import annotations

import pytest

from fetcher.net.download import USER_AGENT, Downloader
from fetcher.outcome import Downloaded
from testkit.origin import Origin, html, redirect

FORBIDDEN = (b"cookie:", b"authorization:", b"referer:", b"proxy-authorization:")


async def test_request_bytes_have_no_cookie_credentials_or_referer_on_any_hop(
    origin: Origin, downloader: Downloader
) -> None:
    origin.routes["/start"] = redirect(
        "/next",
        headers=(
            ("Set-Cookie", "id=1; Path=/"),
            ("WWW-Authenticate", 'Basic realm="x"'),
        ),
    )
    origin.routes["/next"] = redirect(origin.url("/end", host="other.test"))
    origin.routes["/end"] = html("end", headers=(("Set-Cookie", "late=2"),))
    outcome = await downloader.download(origin.url("/start"), allowed_hosts=["origin.test"])
    assert isinstance(outcome, Downloaded)
    outcome = await downloader.download(origin.url("/start"), allowed_hosts=["origin.test"])
    assert isinstance(outcome, Downloaded)
    assert len(origin.requests) == 6
    for request in origin.requests:
        raw = request.raw.lower()
        for header in FORBIDDEN:
            assert b"\r\n" + header not in raw, request.raw
        assert request.headers["user-agent"] == USER_AGENT


async def test_request_sends_exactly_the_fixed_header_set(
    origin: Origin, downloader: Downloader
) -> None:
    origin.routes["/"] = html("x")
    await downloader.download(origin.url("/?q=1"), allowed_hosts=["origin.test"])
    (request,) = origin.requests
    lines = request.raw.decode("latin-1").split("\r\n")
    assert lines[0] == "GET /?q=1 HTTP/1.1"
    names = sorted(line.split(":", 1)[0].lower() for line in lines[1:] if line)
    assert names == ["accept", "accept-encoding", "host", "user-agent"]


@pytest.mark.parametrize(
    "url",
    ["https://user:secret@origin.test:{port}/", "https://token@origin.test:{port}/"],
    ids=["user-and-password", "token"],
)
async def test_credentials_in_the_address_are_never_sent(
    origin: Origin, downloader: Downloader, url: str
) -> None:
    origin.routes["/"] = html("x")
    outcome = await downloader.download(url.format(port=origin.port), allowed_hosts=["origin.test"])
    assert not outcome.ok
    assert origin.requests == []
