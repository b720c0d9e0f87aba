"""The safe download against a real HTTPS origin on loopback (rules 1-5 and 7)."""

from __future__ import annotations

import asyncio
import gzip
import ssl
import zlib
from collections.abc import AsyncIterator
from ipaddress import IPv4Address
from pathlib import Path

import anyio
import httpcore
import pytest
import trustme

from fetcher.errors import HopError
from fetcher.net.download import (
    USER_AGENT,
    Downloader,
    Limits,
    _map_transport_errors,
    allowed_host_set,
)
from fetcher.net.guard import CheckedAddress, resolve_and_check
from fetcher.net.resolver import StaticResolver
from fetcher.net.transport import PinnedBackend
from fetcher.net.urls import Address
from fetcher.outcome import Downloaded, Failed, HopRecord, IPAddress, Outcome
from fetcher.reasons import Reason
from testkit.origin import Origin, Reply, html, redirect
from tests.support.fixtures import DownloaderFactory, policy_for

LOOPBACK = IPv4Address("127.0.0.1")


def ok(outcome: Outcome) -> Downloaded:
    assert isinstance(outcome, Downloaded), outcome
    return outcome


def failed(outcome: Outcome, reason: Reason) -> Failed:
    assert isinstance(outcome, Failed), outcome
    assert outcome.reason is reason, outcome
    return outcome


ALLOWED = ("origin.test",)


async def test_page_is_downloaded_with_its_metadata(
    origin: Origin, downloader: Downloader, hops: list[HopRecord]
) -> None:
    origin.routes["/"] = html("<title>Hi</title><p>hello</p>")
    page = ok(await downloader.download(origin.url("/#frag"), allowed_hosts=ALLOWED))
    assert page.body == b"<title>Hi</title><p>hello</p>"
    assert page.status == 200
    assert page.content_type == "text/html"
    assert page.charset == "utf-8"
    assert page.final_url == origin.url("/")
    assert page.resolved_ip == LOOPBACK
    assert page.redirects == 0
    assert [h.outcome for h in hops] == ["ok"]
    assert hops[0].bytes == len(page.body)


async def test_host_not_in_allowed_hosts_is_refused_before_lookup(
    origin: Origin, downloader: Downloader, resolver: StaticResolver
) -> None:
    outcome = await downloader.download(origin.url(), allowed_hosts=("other.test",))
    failed(outcome, Reason.NOT_IN_ANSWER)
    assert resolver.calls == []
    assert origin.requests == []


async def test_allowed_hosts_are_compared_after_normalisation(
    origin: Origin, downloader: Downloader
) -> None:
    origin.routes["/"] = html("x")
    ok(await downloader.download(origin.url(host="ORIGIN.test."), allowed_hosts=("Origin.Test",)))


async def test_resolver_is_called_once_per_hop(
    origin: Origin, downloader: Downloader, resolver: StaticResolver
) -> None:
    origin.routes["/a"] = redirect("/b")
    origin.routes["/b"] = html("done")
    ok(await downloader.download(origin.url("/a"), allowed_hosts=ALLOWED))
    assert resolver.calls == ["origin.test", "origin.test"]


class RebindingResolver:
    """First answer 127.0.0.1 (allowed by the test policy), then 127.0.0.2 (not)."""

    def __init__(self) -> None:
        self.calls = 0

    async def resolve(self, host: str) -> list[IPAddress]:
        self.calls += 1
        return [LOOPBACK] if self.calls == 1 else [IPv4Address("127.0.0.2")]


async def test_second_resolver_answer_cannot_change_the_connection(
    origin: Origin, client_ssl_context: ssl.SSLContext
) -> None:
    origin.routes["/"] = html("pinned")
    rebinding = RebindingResolver()
    async with Downloader(
        policy=policy_for(origin), resolver=rebinding, ssl_context=client_ssl_context
    ) as downloader:
        page = ok(await downloader.download(origin.url(), allowed_hosts=ALLOWED))
    assert page.resolved_ip == LOOPBACK
    assert rebinding.calls == 1
    assert len(origin.requests) == 1


async def test_any_non_public_answer_refuses_the_address(
    origin: Origin, make_downloader: DownloaderFactory
) -> None:
    resolver = StaticResolver({"origin.test": ["127.0.0.1", "10.0.0.1"]})
    async with make_downloader(resolver=resolver) as downloader:
        outcome = await downloader.download(origin.url(), allowed_hosts=ALLOWED)
    failed(outcome, Reason.NOT_PUBLIC)
    assert origin.requests == []


async def test_name_that_does_not_resolve_is_dns(origin: Origin, downloader: Downloader) -> None:
    outcome = await downloader.download(
        f"https://nowhere.test:{origin.port}/", allowed_hosts=("nowhere.test",)
    )
    failed(outcome, Reason.DNS)


async def test_tls_uses_the_name_for_sni_and_host_header(
    origin: Origin, downloader: Downloader
) -> None:
    origin.routes["/"] = html("x")
    ok(
        await downloader.download(
            origin.url(host="www.origin.test"), allowed_hosts=["www.origin.test"]
        )
    )
    request = origin.requests[0]
    assert request.sni == "www.origin.test"
    assert request.headers["host"] == f"www.origin.test:{origin.port}"


async def test_certificate_for_another_name_is_refused(
    origin: Origin, make_downloader: DownloaderFactory
) -> None:
    resolver = StaticResolver({"wrong.test": ["127.0.0.1"]})
    async with make_downloader(resolver=resolver) as downloader:
        outcome = await downloader.download(
            f"https://wrong.test:{origin.port}/", allowed_hosts=["wrong.test"]
        )
    failed(outcome, Reason.TLS)


async def test_certificate_from_an_untrusted_ca_is_refused(
    origin: Origin, resolver: StaticResolver
) -> None:
    stranger = ssl.create_default_context()
    trustme.CA().configure_trust(stranger)
    async with Downloader(
        policy=policy_for(origin), resolver=resolver, ssl_context=stranger
    ) as downloader:
        outcome = await downloader.download(origin.url(), allowed_hosts=ALLOWED)
    failed(outcome, Reason.TLS)


async def test_closed_port_is_connect(origin: Origin, downloader: Downloader) -> None:
    port = origin.port
    await origin.stop()
    outcome = await downloader.download(f"https://origin.test:{port}/", allowed_hosts=ALLOWED)
    failed(outcome, Reason.CONNECT)


async def test_production_policy_refuses_loopback_origin(
    origin: Origin, resolver: StaticResolver, client_ssl_context: ssl.SSLContext
) -> None:
    origin.routes["/"] = html("secret")
    async with Downloader(resolver=resolver, ssl_context=client_ssl_context) as downloader:
        outcome = await downloader.download(origin.url(), allowed_hosts=ALLOWED)
        failed(outcome, Reason.PORT)
        outcome = await downloader.download("https://origin.test/", allowed_hosts=ALLOWED)
        failed(outcome, Reason.NOT_PUBLIC)
    assert origin.requests == []


@pytest.mark.parametrize("count", [1, 2, 3], ids=lambda n: f"{n}-redirects")
async def test_up_to_three_redirects_are_followed(
    origin: Origin, downloader: Downloader, count: int
) -> None:
    for index in range(count):
        origin.routes[f"/r{index}"] = redirect(f"/r{index + 1}")
    origin.routes[f"/r{count}"] = html("end")
    page = ok(await downloader.download(origin.url("/r0"), allowed_hosts=ALLOWED))
    assert page.redirects == count
    assert page.final_url == origin.url(f"/r{count}")


async def test_fourth_redirect_is_refused(
    origin: Origin, downloader: Downloader, hops: list[HopRecord]
) -> None:
    for index in range(4):
        origin.routes[f"/r{index}"] = redirect(f"/r{index + 1}")
    origin.routes["/r4"] = html("never")
    outcome = failed(
        await downloader.download(origin.url("/r0"), allowed_hosts=ALLOWED), Reason.REDIRECTS
    )
    assert outcome.redirects == 3
    assert [r.target for r in origin.requests] == ["/r0", "/r1", "/r2", "/r3"]
    assert [h.outcome for h in hops] == ["redirect"] * 3 + ["failed"]


async def test_redirect_may_leave_the_site(origin: Origin, downloader: Downloader) -> None:
    origin.routes["/go"] = redirect(origin.url("/there", host="other.test"))
    origin.routes["/there"] = html("elsewhere")
    page = ok(await downloader.download(origin.url("/go"), allowed_hosts=ALLOWED))
    assert page.final_url == origin.url("/there", host="other.test")
    assert origin.requests[1].sni == "other.test"


@pytest.mark.parametrize(
    ("location", "reason"),
    [
        ("https://10.0.0.1/", Reason.NOT_PUBLIC),
        ("https://origin.test:8443/", Reason.PORT),
        ("https://10.0.0.1:{port}/", Reason.NOT_PUBLIC),
        ("https://[::1]:{port}/", Reason.NOT_PUBLIC),
        ("https://0x7f.2:{port}/", Reason.NOT_PUBLIC),
        ("ftp://origin.test/", Reason.SCHEME),
        ("https://user:pw@origin.test:{port}/", Reason.USERINFO),
        ("https://origin.test\\@evil.test/", Reason.MALFORMED),
    ],
    ids=[
        "private-443",
        "other-port",
        "private",
        "ipv6-loopback",
        "numeric-loopback-2",
        "ftp",
        "userinfo",
        "backslash",
    ],
)
async def test_redirect_to_a_refused_address_is_refused(
    origin: Origin, downloader: Downloader, location: str, reason: Reason
) -> None:
    origin.routes["/go"] = redirect(location.format(port=origin.port))
    outcome = failed(await downloader.download(origin.url("/go"), allowed_hosts=ALLOWED), reason)
    assert outcome.redirects == 1
    assert len(origin.requests) == 1


LOCATION_FORMS = [
    ("//127.0.0.2:{port}/", Reason.NOT_PUBLIC),
    ("//[::ffff:127.0.0.2]:{port}/", Reason.NOT_PUBLIC),
    ("https://2130706434:{port}/", Reason.NOT_PUBLIC),
    ("https://１２７．０．０．２:{port}/", Reason.NOT_PUBLIC),
    ("\\\\127.0.0.2\\", Reason.MALFORMED),
    ("/\\127.0.0.2/", Reason.MALFORMED),
    ("https:127.0.0.2", Reason.MALFORMED),
    ("/next\tpath", Reason.MALFORMED),
    ("javascript:alert(1)", Reason.SCHEME),
    ("file:///etc/passwd", Reason.SCHEME),
    ("data:text/html,hi", Reason.SCHEME),
    ("//user@origin.test:{port}/", Reason.USERINFO),
]


@pytest.mark.parametrize(("location", "reason"), LOCATION_FORMS, ids=[f for f, _ in LOCATION_FORMS])
async def test_every_location_form_is_checked_again_and_logged(
    origin: Origin, downloader: Downloader, hops: list[HopRecord], location: str, reason: Reason
) -> None:
    # Sent as raw UTF-8, as servers do (the origin writes header lines as latin-1).
    origin.routes["/go"] = redirect(location.format(port=origin.port).encode().decode("latin-1"))
    outcome = failed(await downloader.download(origin.url("/go"), allowed_hosts=ALLOWED), reason)
    assert outcome.resolved_ip is None
    assert len(origin.requests) == 1
    assert [(h.outcome, h.reason) for h in hops] == [("redirect", None), ("refused", reason)]


async def test_redirect_to_http_is_upgraded(origin: Origin, downloader: Downloader) -> None:
    origin.routes["/go"] = redirect(f"http://origin.test:{origin.port}/plain")
    origin.routes["/plain"] = html("upgraded")
    page = ok(await downloader.download(origin.url("/go"), allowed_hosts=ALLOWED))
    assert page.final_url == origin.url("/plain")


async def test_set_cookie_on_a_redirect_is_not_sent_back(
    origin: Origin, downloader: Downloader
) -> None:
    origin.routes["/login"] = redirect("/home", headers=(("Set-Cookie", "session=abc; Path=/"),))
    origin.routes["/home"] = html("home", headers=(("Set-Cookie", "more=1"),))
    ok(await downloader.download(origin.url("/login"), allowed_hosts=ALLOWED))
    ok(await downloader.download(origin.url("/home"), allowed_hosts=ALLOWED))
    assert len(origin.requests) == 3
    for request in origin.requests:
        assert "cookie" not in request.headers


async def test_error_status_is_http_status(origin: Origin, downloader: Downloader) -> None:
    origin.routes["/gone"] = html("gone", status=410)
    outcome = failed(
        await downloader.download(origin.url("/gone"), allowed_hosts=ALLOWED), Reason.HTTP_STATUS
    )
    assert outcome.status == 410


@pytest.mark.parametrize(
    ("content_type", "allowed"),
    [
        ("text/html", True),
        ("TEXT/HTML; charset=iso-8859-1", True),
        ("text/plain", True),
        ("text/markdown; charset=utf-8", True),
        ("application/pdf", True),
        ("Application/PDF; name=paper.pdf", True),
        ("application/json", False),
        ("application/x-pdf", False),
        ("text/htmlx", False),
        ("image/svg+xml", False),
        ("", False),
    ],
)
async def test_only_text_types_and_pdf_are_read(
    origin: Origin, downloader: Downloader, content_type: str, allowed: bool
) -> None:
    headers = (("Content-Type", content_type),) if content_type else ()
    origin.routes["/"] = Reply(headers=headers, body=b"data")
    outcome = await downloader.download(origin.url(), allowed_hosts=ALLOWED)
    if allowed:
        ok(outcome)
    else:
        failed(outcome, Reason.CONTENT_TYPE)


@pytest.mark.parametrize(
    ("size", "allowed"), [(64 * 1024, True), (64 * 1024 + 1, False)], ids=["at-limit", "over"]
)
async def test_body_limit_both_sides(
    origin: Origin, downloader: Downloader, size: int, allowed: bool
) -> None:
    origin.routes["/"] = html("a" * size)
    outcome = await downloader.download(origin.url(), allowed_hosts=ALLOWED)
    if allowed:
        assert len(ok(outcome).body) == size
    else:
        failed(outcome, Reason.TOO_LARGE)


async def test_body_limit_holds_without_content_length(
    origin: Origin, downloader: Downloader
) -> None:
    async def endless() -> AsyncIterator[bytes]:
        for _ in range(100):
            yield b"x" * 16384

    origin.routes["/"] = Reply(headers=(("Content-Type", "text/plain"),), body=endless)
    failed(await downloader.download(origin.url(), allowed_hosts=ALLOWED), Reason.TOO_LARGE)


async def test_gzip_bomb_stops_at_the_limit(
    origin: Origin, downloader: Downloader, hops: list[HopRecord]
) -> None:
    bomb = gzip.compress(b"\0" * (50 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 100 * 1024
    origin.routes["/"] = Reply(
        headers=(("Content-Type", "text/html"), ("Content-Encoding", "gzip")), body=bomb
    )
    failed(await downloader.download(origin.url(), allowed_hosts=ALLOWED), Reason.TOO_LARGE)
    assert hops[-1].bytes <= downloader.limits.max_bytes + 1


@pytest.mark.parametrize("raw", [False, True], ids=["zlib", "raw-deflate"])
async def test_deflate_and_gzip_bodies_are_decoded(
    origin: Origin, downloader: Downloader, raw: bool
) -> None:
    text = b"<p>compressed</p>" * 50
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
    deflated = compressor.compress(text) + compressor.flush()
    origin.routes["/d"] = Reply(
        headers=(("Content-Type", "text/html"), ("Content-Encoding", "deflate")), body=deflated
    )
    origin.routes["/g"] = Reply(
        headers=(("Content-Type", "text/html"), ("Content-Encoding", "gzip")),
        body=gzip.compress(text),
    )
    assert ok(await downloader.download(origin.url("/d"), allowed_hosts=ALLOWED)).body == text
    assert ok(await downloader.download(origin.url("/g"), allowed_hosts=ALLOWED)).body == text


async def test_unknown_content_encoding_is_refused(origin: Origin, downloader: Downloader) -> None:
    origin.routes["/"] = Reply(
        headers=(("Content-Type", "text/html"), ("Content-Encoding", "br")), body=b"\x0b\x02"
    )
    failed(await downloader.download(origin.url(), allowed_hosts=ALLOWED), Reason.CONTENT_TYPE)


async def test_slow_server_times_out(origin: Origin, make_downloader: DownloaderFactory) -> None:
    origin.routes["/"] = Reply(body=b"late", delay=5.0)
    async with make_downloader(limits=Limits(page_timeout=0.3)) as downloader:
        outcome = await downloader.download(origin.url(), allowed_hosts=ALLOWED)
    failed(outcome, Reason.TIMEOUT)


async def test_time_limit_covers_all_redirects(
    origin: Origin, make_downloader: DownloaderFactory
) -> None:
    # Each hop alone is within the limit; together they are not.
    origin.routes["/a"] = Reply(status=302, headers=(("Location", "/b"),), delay=0.2)
    origin.routes["/b"] = Reply(status=302, headers=(("Location", "/c"),), delay=0.2)
    origin.routes["/c"] = Reply(body=b"late", delay=0.2)
    async with make_downloader(limits=Limits(page_timeout=0.5)) as downloader:
        outcome = await downloader.download(origin.url("/a"), allowed_hosts=ALLOWED)
    failed(outcome, Reason.TIMEOUT)


async def test_body_that_trickles_past_the_limit_times_out(
    origin: Origin, make_downloader: DownloaderFactory
) -> None:
    async def trickle() -> AsyncIterator[bytes]:
        for _ in range(50):
            yield b"x"
            await asyncio.sleep(0.05)

    origin.routes["/"] = Reply(headers=(("Content-Type", "text/plain"),), body=trickle)
    async with make_downloader(limits=Limits(page_timeout=0.4)) as downloader:
        outcome = await downloader.download(origin.url(), allowed_hosts=ALLOWED)
    failed(outcome, Reason.TIMEOUT)


async def test_keep_alive_connection_is_reused_for_the_same_pinned_address(
    origin: Origin, downloader: Downloader
) -> None:
    origin.routes["/"] = html("again")
    for _ in range(3):
        ok(await downloader.download(origin.url(), allowed_hosts=ALLOWED))
    assert [r.connection for r in origin.requests] == [1, 1, 1]


async def test_other_name_on_the_same_address_gets_its_own_connection(
    origin: Origin, downloader: Downloader
) -> None:
    origin.routes["/"] = html("x")
    ok(await downloader.download(origin.url(), allowed_hosts=ALLOWED))
    ok(await downloader.download(origin.url(host="other.test"), allowed_hosts=["other.test"]))
    assert [(r.sni, r.connection) for r in origin.requests] == [
        ("origin.test", 1),
        ("other.test", 2),
    ]


async def test_request_carries_the_fixed_user_agent(origin: Origin, downloader: Downloader) -> None:
    origin.routes["/"] = html("x")
    ok(await downloader.download(origin.url(), allowed_hosts=ALLOWED))
    assert origin.requests[0].headers["user-agent"] == USER_AGENT


async def test_utf8_location_is_followed_as_the_server_meant_it(
    origin: Origin, downloader: Downloader
) -> None:
    origin.routes["/go"] = Reply(status=302, headers=(("Location", "/caf\u00c3\u00a9"),))
    origin.routes["/caf%C3%A9"] = html("café")
    page = ok(await downloader.download(origin.url("/go"), allowed_hosts=ALLOWED))
    assert page.final_url == origin.url("/caf%C3%A9")


async def test_bytes_after_the_compressed_stream_are_not_read(
    origin: Origin, downloader: Downloader
) -> None:
    async def gzip_then_junk() -> AsyncIterator[bytes]:
        yield gzip.compress(b"<p>hello</p>")
        for _ in range(10_000):
            yield b"\0" * 16384
            await asyncio.sleep(0)

    origin.routes["/"] = Reply(
        headers=(("Content-Type", "text/html"), ("Content-Encoding", "gzip")), body=gzip_then_junk
    )
    page = ok(await downloader.download(origin.url(), allowed_hosts=ALLOWED))
    assert page.body == b"<p>hello</p>"


async def test_trust_store_ignores_ssl_cert_file(
    origin: Origin,
    resolver: StaticResolver,
    ca: trustme.CA,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    origin.routes["/"] = html("x")
    async with Downloader(policy=policy_for(origin), resolver=resolver) as downloader:
        outcome = await downloader.download(origin.url(), allowed_hosts=ALLOWED)
    failed(outcome, Reason.TLS)


@pytest.mark.parametrize(
    "location", ["https://[x/", "//[::1", "https://[::1"], ids=["bad-v6", "relative-v6", "open"]
)
async def test_redirect_that_cannot_be_joined_is_malformed(
    origin: Origin, downloader: Downloader, location: str
) -> None:
    origin.routes["/go"] = redirect(location)
    failed(await downloader.download(origin.url("/go"), allowed_hosts=ALLOWED), Reason.MALFORMED)


async def test_space_in_a_redirect_path_is_encoded_like_a_browser_does(
    origin: Origin, downloader: Downloader
) -> None:
    origin.routes["/go"] = redirect("/a b?q=c d")
    origin.routes["/a%20b"] = html("spaced")
    page = ok(await downloader.download(origin.url("/go"), allowed_hosts=ALLOWED))
    assert page.final_url == origin.url("/a%20b?q=c%20d")


async def test_connection_closed_by_the_server_after_a_reply_is_replaced(
    origin: Origin, downloader: Downloader
) -> None:
    origin.routes["/"] = Reply(body=b"<p>bye</p>", close_after=True)
    for _ in range(3):
        ok(await downloader.download(origin.url(), allowed_hosts=ALLOWED))
    assert len(origin.requests) == 3


def _raise(raised: object) -> None:
    if isinstance(raised, tuple):
        outer, cause = raised
        raise outer from cause
    assert isinstance(raised, BaseException)
    raise raised


@pytest.mark.parametrize(
    ("raised", "reason"),
    [
        pytest.param(ssl.SSLError(1, "bad record mac"), Reason.TLS, id="after-handshake"),
        pytest.param(ConnectionResetError("reset"), Reason.CONNECT, id="reset"),
        pytest.param(
            (httpcore.ConnectError("handshake"), ssl.SSLCertVerificationError(1, "expired")),
            Reason.TLS,
            id="certificate-by-type",
        ),
        pytest.param(
            (httpcore.ConnectError("broken"), anyio.BrokenResourceError()),
            Reason.CONNECT,
            id="broken-stream",
        ),
        pytest.param(
            (httpcore.ConnectError("no certificate store here"), OSError("unreachable")),
            Reason.CONNECT,
            id="the-word-certificate-is-not-tls",
        ),
        pytest.param(
            (httpcore.ReadError("eof"), ssl.SSLEOFError(8, "EOF in violation of protocol")),
            Reason.TLS,
            id="tls-eof-while-reading",
        ),
    ],
)
def test_transport_errors_are_mapped_by_type(raised: object, reason: Reason) -> None:
    with pytest.raises(HopError) as caught, _map_transport_errors():
        _raise(raised)
    assert caught.value.reason is reason


def test_only_the_guard_makes_a_checked_address() -> None:
    with pytest.raises(TypeError, match=r"fetcher\.guard"):
        CheckedAddress("origin.test", LOOPBACK, 443)


async def test_pinned_backend_refuses_another_name_or_port(origin: Origin) -> None:
    address = Address(host="origin.test", port=origin.port, target="/")
    (checked,) = await resolve_and_check(
        address, policy=policy_for(origin), resolver=StaticResolver({"origin.test": [LOOPBACK]})
    )
    backend = PinnedBackend(checked)
    with pytest.raises(httpcore.ConnectError):
        await backend.connect_tcp("other.test", origin.port)
    with pytest.raises(httpcore.ConnectError):
        await backend.connect_tcp("origin.test", origin.port + 1)
    assert backend.connections_opened == 0
    stream = await backend.connect_tcp("origin.test", origin.port)
    await stream.aclose()
    assert backend.connections_opened == 1


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param(
            (("Content-Type", "application/octet-stream"), ("Content-Type", "text/html")),
            id="two-content-types",
        ),
        pytest.param(
            (
                ("Content-Type", "text/html"),
                ("Content-Encoding", "gzip"),
                ("Content-Encoding", "gzip"),
            ),
            id="gzip-twice",
        ),
    ],
)
async def test_ambiguous_repeated_headers_are_refused(
    origin: Origin, downloader: Downloader, headers: tuple[tuple[str, str], ...]
) -> None:
    origin.routes["/"] = Reply(headers=headers, body=gzip.compress(gzip.compress(b"<p>x</p>")))
    failed(await downloader.download(origin.url(), allowed_hosts=ALLOWED), Reason.CONTENT_TYPE)


async def test_repeated_identical_content_type_is_read(
    origin: Origin, downloader: Downloader
) -> None:
    origin.routes["/"] = Reply(
        headers=(("Content-Type", "text/html"), ("Content-Type", "text/html")), body=b"<p>x</p>"
    )
    ok(await downloader.download(origin.url(), allowed_hosts=ALLOWED))


async def test_two_different_locations_are_refused(origin: Origin, downloader: Downloader) -> None:
    origin.routes["/go"] = Reply(status=302, headers=(("Location", "/a"), ("Location", "/b")))
    failed(await downloader.download(origin.url("/go"), allowed_hosts=ALLOWED), Reason.MALFORMED)


async def test_server_that_hangs_up_gets_the_request_once(
    origin: Origin, downloader: Downloader
) -> None:
    origin.routes["/"] = Reply(hang_up=True)
    failed(await downloader.download(origin.url(), allowed_hosts=ALLOWED), Reason.CONNECT)
    assert len(origin.requests) == 1


async def test_not_public_detail_names_the_host_but_not_its_addresses(
    origin: Origin, make_downloader: DownloaderFactory, hops: list[HopRecord]
) -> None:
    origin.routes["/go"] = redirect(f"https://db.corp.test:{origin.port}/")
    resolver = StaticResolver({"origin.test": ["127.0.0.1"], "db.corp.test": ["10.2.3.4"]})
    async with make_downloader(resolver=resolver, observer=hops.append) as downloader:
        direct = failed(
            await downloader.download(
                f"https://db.corp.test:{origin.port}/", allowed_hosts=["db.corp.test"]
            ),
            Reason.NOT_PUBLIC,
        )
        redirected = failed(
            await downloader.download(origin.url("/go"), allowed_hosts=ALLOWED), Reason.NOT_PUBLIC
        )
    for outcome in (direct, redirected):
        assert "db.corp.test" in outcome.detail
        assert "10.2.3.4" not in outcome.detail
        assert "private" not in outcome.detail
    # The operator's log still has the answer that was refused.
    assert [str(hop.refused_ip) for hop in hops if hop.reason] == ["10.2.3.4", "10.2.3.4"]


@pytest.mark.parametrize(
    ("written", "normalised"),
    [
        ("2606:4700:4700::1111", "2606:4700:4700::1111"),
        ("[2606:4700:4700::1111]", "2606:4700:4700::1111"),
        (" Example.COM. ", "example.com"),
        ("münchen.de", "xn--mnchen-3ya.de"),
        ("0x7f.1", "127.0.0.1"),
    ],
)
def test_allowed_hosts_are_normalised_like_addresses(written: str, normalised: str) -> None:
    assert allowed_host_set([written]) == {normalised}


def test_allowed_hosts_that_are_not_hosts_are_dropped() -> None:
    assert allowed_host_set(["", "a b", "exa%41mple.com", "[::1"]) == frozenset()


class BrokenResolver(StaticResolver):
    """A resolver with a bug (a seam we own): it raises what no lookup should."""

    async def resolve(self, host: str) -> list[IPAddress]:
        raise RuntimeError("a bug in the resolver")


async def test_a_bug_during_a_hop_is_logged_once_and_raised(
    origin: Origin, make_downloader: DownloaderFactory, hops: list[HopRecord]
) -> None:
    async with make_downloader(resolver=BrokenResolver({}), observer=hops.append) as downloader:
        with pytest.raises(RuntimeError, match="a bug in the resolver"):
            await downloader.download(origin.url("/"), allowed_hosts=ALLOWED)
    assert [(hop.url, hop.reason, hop.outcome) for hop in hops] == [
        (origin.url("/"), Reason.INTERNAL, "refused")
    ]
