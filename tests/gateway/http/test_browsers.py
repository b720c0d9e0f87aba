"""Browsers are clients too (SPEC 2; issue 22, findings 2, 7 and 8): the Host, Origin and
POST media type rules, as tables (`gateway.http.browsers`) and over HTTP against the real
gateway, with the exact requests a hostile page's browser sends."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import httpx
import pytest
from prometheus_client import CollectorRegistry

from gateway.http.auth import addressed_to_loopback
from gateway.http.browsers import (
    Head,
    Refusal,
    TrustedProxies,
    client_of,
    effective_host,
    host_problem,
    is_own_origin,
    judge,
    media_type_ok,
)
from gateway.http.origin import OriginPolicy
from testkit.engine import FakeEngine, text_reply
from tests.gateway.conftest import AUTH, KEY, GatewayFactory, make_settings

BODY = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}]}
EVIL = "https://evil.example"
LOOPBACK = TrustedProxies.of(["127.0.0.1"])


# --- The rules, one table each ------------------------------------------------------------


@pytest.mark.parametrize(
    ("hosts", "problem"),
    [
        ((), None),
        (("localhost:8000",), None),
        (("[::1]:8000",), None),
        (("localhost:8000", "localhost:8000"), Refusal.BAD_HOST),
        (("localhost:8000", "evil.example"), Refusal.BAD_HOST),
        (("localhost:80,evil.example",), Refusal.BAD_HOST),
        ((",",), Refusal.BAD_HOST),
    ],
    ids=["none", "one", "ipv6", "twice-the-same", "two", "comma", "only-a-comma"],
)
def test_one_host_header_without_a_comma(hosts: tuple[str, ...], problem: Refusal | None) -> None:
    assert host_problem(Head("GET", hosts=hosts)) is problem


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        (None, True),
        ("localhost", True),
        ("localhost:8000", True),
        ("app.localhost:8000", True),
        ("127.0.0.1:8000", True),
        ("[::1]:8000", True),
        ("localhost:80,evil.example", False),
        ("127.0.0.1,evil.example", False),
        ("evil.example", False),
        ("localhost.evil.example", False),
        ("", False),
    ],
)
def test_a_keyless_gateway_answers_loopback_names_and_addresses_only(
    host: str | None, loopback: bool
) -> None:
    assert addressed_to_loopback(host) is loopback


@pytest.mark.parametrize(
    ("origin", "host", "own"),
    [
        ("http://127.0.0.1:8000", "127.0.0.1:8000", True),
        ("http://127.0.0.1:8001", "127.0.0.1:8000", False),
        ("http://127.0.0.1:7999", "127.0.0.1:8000", False),
        ("http://localhost:8000", "LOCALHOST:8000", True),
        ("http://localhost.:8000", "localhost:8000", True),
        ("https://chat.example", "chat.example", True),  # TLS at a proxy: the default port
        ("http://chat.example", "chat.example", True),
        ("http://chat.example:80", "chat.example", True),
        ("https://chat.example:8443", "chat.example", False),
        ("https://chat.example", "chat.example:443", True),
        ("http://chat.example", "chat.example:443", False),
        ("http://chat.example.evil", "chat.example", False),
        ("http://sub.chat.example", "chat.example", False),
        ("http://[::1]:8000", "[::1]:8000", True),
        ("http://[::1]:8000", "[::1]:8001", False),
        ("null", "chat.example", False),
        ("http://user@chat.example", "chat.example", False),
        ("http://chat.example/path", "chat.example", False),
        ("http://localhost:8000", None, False),
        ("http://localhost:8000", "localhost:8000x", False),
        ("http://localhost:8000", "localhost:", False),
        ("http://localhost:8000", "[::1", False),
    ],
)
def test_the_gateways_own_origin_is_the_host_and_port_the_browser_used(
    origin: str, host: str | None, own: bool
) -> None:
    assert is_own_origin(origin, host) is own


@pytest.mark.parametrize(
    ("method", "types", "ok"),
    [
        ("POST", ("application/json",), True),
        ("POST", ("application/json; charset=utf-8",), True),
        ("POST", ("Application/JSON",), True),
        ("POST", ("text/plain;charset=UTF-8",), False),  # a no-cors fetch's
        ("POST", ("application/x-www-form-urlencoded",), False),  # a form's
        ("POST", ("multipart/form-data; boundary=x",), False),
        ("POST", ("text/plain; application/json",), False),
        ("POST", ("application/jsonx",), False),
        ("POST", ("application/json-seq",), False),
        ("POST", ("application/vnd.api+json",), False),
        ("POST", (), False),
        ("POST", ("application/json", "application/json"), False),
        ("GET", (), True),
        ("DELETE", ("text/plain",), True),
    ],
)
def test_a_post_carries_application_json(method: str, types: tuple[str, ...], ok: bool) -> None:
    assert media_type_ok(Head(method, content_types=types)) is ok


@pytest.mark.parametrize(
    ("peer", "forwarded_for", "client"),
    [
        ("127.0.0.1", ("203.0.113.5",), "203.0.113.5"),
        ("127.0.0.1", ("198.51.100.1, 203.0.113.5",), "203.0.113.5"),  # the proxy's own entry
        ("127.0.0.1", ("198.51.100.1", "203.0.113.5"), "203.0.113.5"),
        ("127.0.0.1", ("2001:DB8::1",), "2001:db8::1"),
        ("127.0.0.1", ("not-an-address",), "127.0.0.1"),
        ("127.0.0.1", (), "127.0.0.1"),
        ("::ffff:127.0.0.1", ("203.0.113.5",), "203.0.113.5"),
        ("127.0.0.2", ("203.0.113.5",), "127.0.0.2"),  # not a trusted proxy: not believed
        ("192.0.2.7", ("203.0.113.5",), "192.0.2.7"),
        (None, ("203.0.113.5",), None),
    ],
    ids=[
        "forwarded",
        "last-entry",
        "last-header",
        "ipv6",
        "not-an-address",
        "nothing-forwarded",
        "ipv4-mapped-peer",
        "next-address",
        "untrusted-peer",
        "unix-socket",
    ],
)
def test_the_client_is_the_forwarded_address_only_from_a_trusted_proxy(
    peer: str | None, forwarded_for: tuple[str, ...], client: str | None
) -> None:
    head = Head("GET", peer=peer, forwarded_for=forwarded_for)
    assert client_of(head, LOOPBACK) == client
    assert client_of(head, TrustedProxies()) == peer


@pytest.mark.parametrize(
    ("peer", "trusted"),
    [("10.0.0.0", True), ("10.255.255.255", True), ("9.255.255.255", False), ("11.0.0.0", False)],
)
def test_trusted_proxies_are_networks(peer: str, trusted: bool) -> None:
    assert TrustedProxies.of(["10.0.0.0/8"]).trusts(peer) is trusted


def test_the_forwarded_host_counts_only_from_a_trusted_proxy() -> None:
    head = Head("GET", hosts=("127.0.0.1:8000",), forwarded_hosts=("chat.example",))
    assert effective_host(replace(head, peer="127.0.0.1"), LOOPBACK) == "chat.example"
    assert effective_host(replace(head, peer="192.0.2.7"), LOOPBACK) == "127.0.0.1:8000"
    assert effective_host(replace(head, peer="127.0.0.1"), TrustedProxies()) == "127.0.0.1:8000"


@pytest.mark.parametrize(
    ("head", "keyless", "refusal"),
    [
        (Head("POST", ("localhost:8000",), None, ("application/json",)), True, None),
        (Head("GET", ("evil.example:8000",)), True, Refusal.FOREIGN_HOST),
        (Head("GET", ("evil.example:8000",)), False, None),
        (Head("GET", ("a:1", "b:2")), False, Refusal.BAD_HOST),
        (Head("GET", ("localhost:80,evil.example",)), True, Refusal.BAD_HOST),
        (Head("GET", ("localhost:8000",), EVIL), True, Refusal.FOREIGN_ORIGIN),
        (Head("GET", ("gw.example",), "https://gw.example"), False, None),
        (Head("GET", ("gw.example",), "https://allowed.example"), False, None),
        (Head("POST", ("localhost:8000",), None, ("text/plain",)), True, Refusal.MEDIA_TYPE),
        (
            Head("POST", ("127.0.0.1:8000",), EVIL, ("text/plain;charset=UTF-8",)),
            True,
            Refusal.FOREIGN_ORIGIN,
        ),
        (
            Head("GET", ("127.0.0.1:8000",), peer="127.0.0.1", forwarded_hosts=("gw.example",)),
            True,
            Refusal.FOREIGN_HOST,
        ),
    ],
    ids=[
        "keyless-json",
        "keyless-name",
        "keyed-name",
        "two-hosts",
        "comma",
        "foreign-origin",
        "own-origin",
        "allowed-origin",
        "text-plain",
        "no-cors-fetch",
        "keyless-forwarded-name",
    ],
)
def test_the_first_rule_broken_decides(head: Head, keyless: bool, refusal: Refusal | None) -> None:
    allowed = OriginPolicy.of(["https://allowed.example"])
    assert judge(head, keyless=keyless, allowed=allowed, proxies=LOOPBACK) is refusal


# --- Over HTTP: the requests a hostile page makes the browser send --------------------------


def refused(registry: CollectorRegistry, reason: str) -> float:
    value = registry.get_sample_value("tigress_gateway_refused_requests_total", {"reason": reason})
    return value or 0.0


def host_of(url: str) -> str:
    return url.removeprefix("http://")


async def test_a_no_cors_fetch_from_another_site_reaches_nothing(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    # What fetch(url, {method: "POST", mode: "no-cors", body}) sends from a page on
    # evil.example to a keyless gateway on loopback: no preflight, text/plain.
    engine.script(text_reply("never"))
    registry = CollectorRegistry()
    settings = make_settings(engine, api_keys=())
    no_cors = {
        "Content-Type": "text/plain;charset=UTF-8",
        "Origin": EVIL,
        "Sec-Fetch-Mode": "no-cors",
        "Sec-Fetch-Site": "cross-site",
        "Accept": "*/*",
    }
    async with gateway_at(settings=settings, registry=registry) as url:
        cross_site = await http.post(
            f"{url}/v1/chat/completions", content=json.dumps(BODY), headers=no_cors
        )
        # The same without Origin (an extension, an old browser): its type alone refuses it.
        no_origin = {k: v for k, v in no_cors.items() if k != "Origin"}
        typed = await http.post(
            f"{url}/v1/chat/completions", content=json.dumps(BODY), headers=no_origin
        )
    assert cross_site.status_code == 403
    assert cross_site.json()["error"]["code"] == "foreign_origin"
    assert typed.status_code == 415
    assert typed.json()["error"]["code"] == "unsupported_media_type"
    assert engine.chats == []
    assert refused(registry, "foreign_origin") == 1
    assert refused(registry, "media_type") == 1
    value = registry.get_sample_value(
        "tigress_gateway_chat_requests_total", {"mode": "none", "outcome": "rejected"}
    )
    assert value == 2


@pytest.mark.parametrize("origin", [EVIL, "null", None], ids=["cross-site", "null", "none"])
@pytest.mark.parametrize(
    "content_type",
    ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain"],
    ids=["urlencoded", "multipart", "text"],
)
async def test_a_form_post_reaches_nothing(
    engine: FakeEngine,
    gateway_at: GatewayFactory,
    http: httpx.AsyncClient,
    origin: str | None,
    content_type: str,
) -> None:
    # <form method=post enctype=... action=http://127.0.0.1:8000/v1/chat/completions>,
    # with a field named so that the body looks like JSON.
    engine.script(text_reply("never"))
    headers = {"Content-Type": content_type} | ({"Origin": origin} if origin else {})
    body = '{"model": "test-model", "messages": [], "x": "=1"}'
    async with gateway_at(settings=make_settings(engine, api_keys=())) as url:
        answer = await http.post(f"{url}/v1/chat/completions", content=body, headers=headers)
        mcp = await http.post(f"{url}/mcp", content=body, headers=headers)
    assert answer.status_code == (415 if origin is None else 403)
    assert mcp.status_code in (403, 415)
    assert mcp.json()["error"]["code"] == -32600  # JSON-RPC's shape on /mcp
    assert engine.chats == []


async def test_the_gateways_own_page_and_allowed_origins_are_answered(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    engine.script(text_reply("own"), text_reply("allowed"))
    settings = make_settings(engine, allowed_origins=("https://chat.example.org",))
    async with gateway_at(settings=settings) as url:
        own = await http.post(
            f"{url}/v1/chat/completions", json=BODY, headers={**AUTH, "Origin": url}
        )
        allowed = await http.post(
            f"{url}/v1/chat/completions",
            json=BODY,
            headers={**AUTH, "Origin": "https://chat.example.org"},
        )
        other_port = url.rsplit(":", 1)[0] + ":1"
        foreign = await http.get(f"{url}/healthz", headers={"Origin": other_port})
        plain = await http.get(f"{url}/healthz")
    assert own.status_code == 200
    assert allowed.status_code == 200
    assert foreign.status_code == 403
    assert plain.status_code == 200


async def test_behind_a_trusted_proxy_the_forwarded_host_is_the_gateways_origin(
    engine: FakeEngine, gateway_at: GatewayFactory, http: httpx.AsyncClient
) -> None:
    # nginx with proxy_set_header X-Forwarded-Host $host: the browser's origin is the
    # proxy's name, the gateway's Host is the proxy's upstream address.
    engine.script(text_reply("ok"))
    proxied = {**AUTH, "Origin": "https://chat.example.org", "X-Forwarded-Host": "chat.example.org"}
    trusted = make_settings(engine, trusted_proxies=("127.0.0.1",))
    async with gateway_at(settings=trusted) as url:
        through_proxy = await http.post(f"{url}/v1/chat/completions", json=BODY, headers=proxied)
    async with gateway_at() as url:
        not_trusted = await http.post(f"{url}/v1/chat/completions", json=BODY, headers=proxied)
    assert through_proxy.status_code == 200
    assert not_trusted.status_code == 403


ROUTES = ["/healthz", "/metrics", "/", "/static/app.js", "/v1/models", "/nope", "/mcp"]


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize(
    ("host", "status"),
    [("evil.example:8000", 403), ("localhost.evil.example", 403), ("localhost:8000", None)],
    ids=["rebound-name", "look-alike", "localhost"],
)
async def test_a_keyless_gateway_answers_every_route_only_for_a_loopback_host(
    engine: FakeEngine,
    gateway_at: GatewayFactory,
    http: httpx.AsyncClient,
    path: str,
    host: str,
    status: int | None,
) -> None:
    # DNS rebinding: /healthz names the engine, SearXNG and the fetcher's socket.
    async with gateway_at(settings=make_settings(engine, api_keys=())) as url:
        answer = await http.get(f"{url}{path}", headers={"Host": host})
    if status is None:
        assert answer.status_code != 403
    else:
        assert answer.status_code == status
        assert "127.0.0.1" not in answer.text


async def exchange(url: str, head: bytes) -> bytes:
    """Send a raw request head; everything the gateway answers until it closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))
    writer.write(head)
    try:
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


@pytest.mark.parametrize("keys", [(), (KEY,)], ids=["keyless", "keyed"])
@pytest.mark.parametrize(
    "hosts",
    [
        b"Host: localhost:8000\r\nHost: evil.example\r\n",
        b"Host: evil.example\r\nHost: localhost:8000\r\n",
        b"Host: localhost:80,evil.example\r\n",
    ],
    ids=["two-first-local", "two-first-foreign", "comma"],
)
async def test_two_hosts_or_a_comma_are_400(
    engine: FakeEngine, gateway_at: GatewayFactory, keys: tuple[str, ...], hosts: bytes
) -> None:
    registry = CollectorRegistry()
    async with gateway_at(settings=make_settings(engine, api_keys=keys), registry=registry) as url:
        answer = await exchange(
            url, b"GET /healthz HTTP/1.1\r\n" + hosts + b"Connection: close\r\n\r\n"
        )
    assert answer.startswith(b"HTTP/1.1 400")
    assert b'"invalid_host"' in answer
    assert refused(registry, "bad_host") == 1


async def test_one_loopback_host_is_answered_over_a_raw_socket(
    engine: FakeEngine, gateway_at: GatewayFactory
) -> None:
    async with gateway_at(settings=make_settings(engine, api_keys=())) as url:
        answer = await exchange(
            url, b"GET /healthz HTTP/1.1\r\nHost: localhost:8000\r\nConnection: close\r\n\r\n"
        )
    assert answer.startswith(b"HTTP/1.1 200")
