"""Rule 1's allowed hosts: the host of an address as the fetcher reads it, and the user's addresses.

The fetcher's own parser is imported here (tests may; the gateway may not) to prove the
gateway allows exactly the host the fetcher will check.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fetcher.net.download import allowed_host_set
from fetcher.net.urls import Address, parse
from gateway.tools.fetch.addresses import (
    MAX_ALLOWED_HOSTS,
    addresses_in_text,
    allowed_hosts,
    host_of,
    hosts_in_text,
)

ALL_PORTS = frozenset(range(65536))


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://example.com/", "example.com"),
        ("https://example.com", "example.com"),
        ("HTTPS://Example.COM:443/x", "example.com"),
        ("http://example.com/page", "example.com"),  # the fetcher upgrades http
        ("https://example.com./", "example.com"),
        ("https://example.com:8443/", "example.com"),  # the port is the fetcher's to refuse
        ("https://evil.example#@good.example/", "evil.example"),
        ("https://evil.example?@good.example/", "evil.example"),
        ("https://evil.example/@good.example/", "evil.example"),
        ("https://[2001:db8::1]:443/", "2001:db8::1"),
        ("https://[2001:DB8::1]/", "2001:db8::1"),
        ("https://bücher.example/", "bücher.example"),  # the fetcher applies IDNA itself
        ("https://2130706433/", "2130706433"),  # the fetcher reads numbers as IPv4 itself
        ("https://" + "a" * 253 + "/", "a" * 253),
        ("https://" + "a" * 254 + "/", None),
        ("https://a.example/" + "p" * (8192 - 18), "a.example"),
        ("https://a.example/" + "p" * (8192 - 17), None),
        ("https://good.example@evil.example/", None),
        ("https://user:pass@host.example/", None),
        ("https://a.example\\@b.example/", None),
        ("https://a.example/ b", None),
        ("https://a.exa\u200bmple/", None),
        ("https://exa%6Dple.com/", None),
        ("ftp://example.com/", None),
        ("javascript:alert(1)", None),
        ("https:/example.com/", None),
        ("https:///path", None),
        ("https://", None),
        ("https://[::1", None),
        ("https://[::1]x/", None),
        ("example.com", None),
    ],
)
def test_host_of_reads_the_host_the_fetcher_will_check(url: str, host: str | None) -> None:
    assert host_of(url) == host


def fetcher_host(url: str) -> str | None:
    address = parse(url, ports=ALL_PORTS)
    return address.host if isinstance(address, Address) else None


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example#@good.example/",
        "https://evil.example?@good.example/",
        "HTTP://Example.COM:80/",
        "https://bücher.example/",
        "https://２１３０７０６４３３/",
        "https://0x7f.1/",
        "https://[::ffff:127.0.0.1]/",
        "https://example.com./",
    ],
)
def test_the_fetcher_checks_the_same_host_after_its_normalisation(url: str) -> None:
    host = host_of(url)
    assert host is not None
    assert allowed_host_set({host}) == {fetcher_host(url)}


# Pieces of authorities, tricky ones included: delimiters, brackets, IDNA, numbers.
_PIECES = st.sampled_from([*"aAbz0179.-_:@[]%#?/\\ ", "ü", "。", "x", "::1", "0x", "ffff:"])
_AUTHORITY = st.lists(_PIECES, max_size=16).map("".join)


@given(
    scheme=st.sampled_from(["https", "http", "HTTPS", "ftp", "https:"]),
    authority=_AUTHORITY,
    rest=st.sampled_from(["", "/", "/p?q#f", "#@x.example", "?@x.example", "/@x.example"]),
)
def test_every_address_the_fetcher_accepts_allows_exactly_its_host(
    scheme: str, authority: str, rest: str
) -> None:
    url = f"{scheme}://{authority}{rest}"
    expected = fetcher_host(url)
    if expected is None:
        return
    host = host_of(url)
    assert host is not None, url
    assert allowed_host_set({host}) == {expected}, url


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("see https://example.com.", ["example.com"]),
        ("see https://example.com, then", ["example.com"]),
        ("(https://en.wikipedia.org/wiki/Foo_(bar))", ["en.wikipedia.org"]),
        ("(see https://example.org)", ["example.org"]),
        ("[the docs](https://docs.python.org/3/)", ["docs.python.org"]),
        ("<https://a.example>", ["a.example"]),
        ('"https://quoted.example"', ["quoted.example"]),
        ("`https://code.example/x`", ["code.example"]),
        ("HTTPS://UPPER.EXAMPLE/", ["upper.example"]),
        ("go to www.example.org/page, then", ["www.example.org"]),
        (
            "https://a.example\nhttps://b.example and https://a.example/again",
            ["a.example", "b.example"],
        ),
        ("https://x.example:8443/path", ["x.example"]),
        ("https://[2001:db8::1]", ["2001:db8::1"]),
        ("https://例え.jp。次", ["例え.jp。次"]),
        ("「https://例え.jp」", ["例え.jp"]),
        ("https://user:pw@host.example/", []),
        ("mail bob@www.example.org", []),
        ("main.py and notes.md and example.com", []),
        ("xhttps://evil.example a.https://evil.example", []),
        ("file:///etc/passwd and ftp://files.example", []),
        ("", []),
    ],
    ids=[
        "full-stop",
        "comma",
        "balanced-parens",
        "closing-paren",
        "markdown",
        "angle-brackets",
        "quotes",
        "backticks",
        "upper-case",
        "bare-www",
        "several",
        "port",
        "ipv6",
        "cjk-full-stop",
        "cjk-quotes",
        "userinfo",
        "email",
        "file-names",
        "glued-scheme",
        "other-schemes",
        "empty",
    ],
)
def test_hosts_written_in_the_users_text(text: str, hosts: list[str]) -> None:
    assert hosts_in_text(text) == hosts


def test_addresses_keep_their_written_order_and_bare_www_is_read_as_https() -> None:
    text = "first www.one.example then https://two.example/x"
    assert addresses_in_text(text) == ["https://www.one.example", "https://two.example/x"]


def test_allowed_hosts_are_the_sources_then_the_users_each_once() -> None:
    sources = ["https://a.example/1", "https://A.example/2", "http://b.example/", "magnet:?x"]
    assert allowed_hosts(sources, "compare https://c.example and https://b.example") == (
        "a.example",
        "b.example",
        "c.example",
    )


def test_allowed_hosts_never_pass_the_contracts_bound_and_keep_the_sources() -> None:
    sources = ["https://source.example/"]
    user = " ".join(f"https://h{i}.example/" for i in range(MAX_ALLOWED_HOSTS + 200))
    hosts = allowed_hosts(sources, user)
    assert len(hosts) == MAX_ALLOWED_HOSTS
    assert hosts[0] == "source.example"


def test_the_models_arguments_are_not_a_source_of_hosts() -> None:
    # Only the ledger's addresses and the user's text go in: nothing else can add a host.
    assert allowed_hosts([], "") == ()
