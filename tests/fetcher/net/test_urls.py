"""SPEC 7 step 1: the strict address parser (table tests and properties)."""

from __future__ import annotations

import sys
import unicodedata
from ipaddress import IPv4Address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fetcher.net.urls import (
    Address,
    Refused,
    _has_control_or_space,
    parse,
    parse_ipv4_number,
    resolve_reference,
)
from fetcher.reasons import Reason

ACCEPTED = [
    ("https://example.com", "https://example.com/"),
    ("https://example.com/", "https://example.com/"),
    ("HTTPS://Example.COM/Path?Q=1", "https://example.com/Path?Q=1"),
    ("https://example.com:443/a", "https://example.com/a"),
    ("https://example.com:0443/a", "https://example.com/a"),
    ("http://example.com/a", "https://example.com/a"),
    ("http://example.com:80/a", "https://example.com/a"),
    ("http://example.com:443/a", "https://example.com/a"),
    ("https://example.com:/", "https://example.com/"),
    ("http://example.com:/a", "https://example.com/a"),
    ("https://[2001:db8::1]:/", "https://[2001:db8::1]/"),
    ("https://example.com/a#frag", "https://example.com/a"),
    ("https://example.com#frag", "https://example.com/"),
    ("https://example.com?q=1#x", "https://example.com/?q=1"),
    ("https://example.com./", "https://example.com/"),
    ("https://exämple.com/päth?q=ü", "https://xn--exmple-cua.com/p%C3%A4th?q=%C3%BC"),
    ("https://MÜNCHEN.de/", "https://xn--mnchen-3ya.de/"),
    ("https://example。com/", "https://example.com/"),
    ("https://xn--mnchen-3ya.de/", "https://xn--mnchen-3ya.de/"),
    ("https://_dmarc.example.com/", "https://_dmarc.example.com/"),
    ("https://medium.com/@user/post", "https://medium.com/@user/post"),
    ("https://example.com/a%20b", "https://example.com/a%20b"),
    ("https://example.com/?a=b&c=d;e", "https://example.com/?a=b&c=d;e"),
    ("https://[2001:db8::1]/", "https://[2001:db8::1]/"),
    ("https://[::FFFF:127.0.0.1]:443/", "https://[::ffff:7f00:1]/"),
]


@pytest.mark.parametrize(("url", "normalised"), ACCEPTED, ids=[u for u, _ in ACCEPTED])
def test_accepted_addresses_are_normalised(url: str, normalised: str) -> None:
    address = parse(url)
    assert isinstance(address, Address), address
    assert address.url == normalised


NUMERIC = [
    ("https://2130706433/", "127.0.0.1"),
    ("https://0x7f000001/", "127.0.0.1"),
    ("https://0X7F000001/", "127.0.0.1"),
    ("https://0x7f.1/", "127.0.0.1"),
    ("https://017700000001/", "127.0.0.1"),
    ("https://0177.0.0.1/", "127.0.0.1"),
    ("https://0177.0.0.01/", "127.0.0.1"),
    ("https://127.1/", "127.0.0.1"),
    ("https://127.0.1/", "127.0.0.1"),
    ("https://127.0.0.1./", "127.0.0.1"),
    ("https://012.0.0.1/", "10.0.0.1"),
    ("https://0x7f.0x0.0x0.0x1/", "127.0.0.1"),
    ("https://0/", "0.0.0.0"),
    ("https://0x/", "0.0.0.0"),
    ("https://0xffffffff/", "255.255.255.255"),
    ("https://4294967295/", "255.255.255.255"),
    ("https://1.2.65535/", "1.2.255.255"),
    ("https://1.16777215/", "1.255.255.255"),
    ("https://１２７.０.０.１/", "127.0.0.1"),
    ("https://①②⑦.⓪.⓪.①/", "127.0.0.1"),
    ("https://169.254.169.254/", "169.254.169.254"),
    ("https://8.8.8.8/", "8.8.8.8"),
]


@pytest.mark.parametrize(("url", "ip"), NUMERIC, ids=[u for u, _ in NUMERIC])
def test_hosts_written_as_numbers_are_read_like_inet_aton(url: str, ip: str) -> None:
    address = parse(url)
    assert isinstance(address, Address), address
    assert address.ip == IPv4Address(ip)
    assert address.host == ip


REFUSED = [
    ("ftp://example.com/", Reason.SCHEME),
    ("file:///etc/passwd", Reason.SCHEME),
    ("gopher://127.0.0.1:70/", Reason.SCHEME),
    ("javascript:alert(1)", Reason.SCHEME),
    ("data:text/html,hi", Reason.SCHEME),
    ("ws://example.com/", Reason.SCHEME),
    ("https://example.com:80/", Reason.PORT),
    ("https://example.com:8443/", Reason.PORT),
    ("https://example.com:442/", Reason.PORT),
    ("https://example.com:444/", Reason.PORT),
    ("http://example.com:8080/", Reason.PORT),
    ("https://example.com:0/", Reason.PORT),
    ("https://[::1]:22/", Reason.PORT),
    ("https://user@example.com/", Reason.USERINFO),
    ("https://user:pass@example.com/", Reason.USERINFO),
    ("https://:@example.com/", Reason.USERINFO),
    ("https://example.com@127.0.0.1/", Reason.USERINFO),
    ("https://a@b@127.0.0.1/", Reason.MALFORMED),
    ("https://example.com\\@127.0.0.1/", Reason.MALFORMED),
    ("https:\\\\example.com/", Reason.MALFORMED),
    ("https://example.com/\\..\\", Reason.MALFORMED),
    ("https://example.com:+443/", Reason.MALFORMED),
    ("https://example.com:-1/", Reason.MALFORMED),
    ("https://example.com:65536/", Reason.MALFORMED),
    ("https://example.com:99999999/", Reason.MALFORMED),
    ("https://example.com/" + "é" * 2000, Reason.MALFORMED),
    ("https://example.com:443:443/", Reason.MALFORMED),
    ("https://ex%61mple.com/", Reason.MALFORMED),
    ("https://%31%32%37.0.0.1/", Reason.MALFORMED),
    ("https://[fe80::1%25eth0]/", Reason.MALFORMED),
    ("https://[fe80::1%eth0]/", Reason.MALFORMED),
    ("https://127.0.0.1\x00.example.com/", Reason.MALFORMED),
    ("https://example.com\t/", Reason.MALFORMED),
    ("https://exa mple.com/", Reason.MALFORMED),
    ("https://example.com/a b", Reason.MALFORMED),
    (" https://example.com/", Reason.MALFORMED),
    ("https://example.com/\n", Reason.MALFORMED),
    ("https://example.com/\u200b", Reason.MALFORMED),
    ("https://exa\u00admple.com/", Reason.MALFORMED),
    ("https://", Reason.MALFORMED),
    ("https:///path", Reason.MALFORMED),
    ("https://?q", Reason.MALFORMED),
    ("https:example.com", Reason.MALFORMED),
    ("//example.com/", Reason.MALFORMED),
    ("example.com", Reason.MALFORMED),
    ("", Reason.MALFORMED),
    ("https://a..b/", Reason.MALFORMED),
    ("https://.example.com/", Reason.MALFORMED),
    ("https://-example.com/", Reason.MALFORMED),
    ("https://exam!ple.com/", Reason.MALFORMED),
    ("https://" + "a" * 64 + ".com/", Reason.MALFORMED),
    ("https://" + "a." * 127 + "com/", Reason.MALFORMED),
    ("https://1.2.3.4.5/", Reason.MALFORMED),
    ("https://256.0.0.1/", Reason.MALFORMED),
    ("https://1.2.3.256/", Reason.MALFORMED),
    ("https://1.2.65536/", Reason.MALFORMED),
    ("https://4294967296/", Reason.MALFORMED),
    ("https://09.0.0.1/", Reason.MALFORMED),
    ("https://0x1g.0.0.1/", Reason.MALFORMED),
    ("https://example.123/", Reason.MALFORMED),
    ("https://[::1/", Reason.MALFORMED),
    ("https://[::1]x/", Reason.MALFORMED),
    ("https://[127.0.0.1]/", Reason.MALFORMED),
    ("https://[zz::1]/", Reason.MALFORMED),
    ("https://xn--a.com/", Reason.MALFORMED),
    ("https://example.com/" + "a" * 9000, Reason.MALFORMED),
    ("https://" + "1" * 5000 + "/", Reason.MALFORMED),
    ("https://1." + "0" * 40 + "1/", Reason.MALFORMED),
    ("https://example.com/\udcff", Reason.MALFORMED),
    ("https://exa\udcffmple.com/", Reason.MALFORMED),
]


@pytest.mark.parametrize(("url", "reason"), REFUSED, ids=[repr(u)[:60] for u, _ in REFUSED])
def test_refused_addresses_carry_their_reason(url: str, reason: Reason) -> None:
    result = parse(url)
    assert isinstance(result, Refused), result
    assert result.reason is reason


def _control_or_space(ch: str) -> bool:
    # The rule as Unicode states it, one character at a time (Cs: lone surrogates).
    return ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")


@pytest.mark.parametrize("code", range(128), ids=[f"U+{code:04X}" for code in range(128)])
def test_ascii_control_characters_and_spaces_are_found(code: int) -> None:
    ch = chr(code)
    assert _has_control_or_space(f"example.com/a{ch}b") is _control_or_space(ch)


def test_every_unicode_control_character_and_space_is_found() -> None:
    every = [chr(code) for code in range(sys.maxunicode + 1)]
    forbidden = [ch for ch in every if _control_or_space(ch)]
    assert len(forbidden) > 2000  # C0, C1, format characters, surrogates, Unicode spaces
    for ch in forbidden:
        assert _has_control_or_space(f"bücher.example/a{ch}b"), f"U+{ord(ch):04X}"
    assert not _has_control_or_space("".join(ch for ch in every if not _control_or_space(ch)))


def test_explicit_test_ports_are_the_only_extra_ports() -> None:
    assert isinstance(parse("https://example.com:8443/", ports=frozenset({443, 8443})), Address)
    assert isinstance(parse("https://example.com:8444/", ports=frozenset({443, 8443})), Refused)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("0", "0.0.0.0"),
        ("1.2.3.4", "1.2.3.4"),
        ("0x0.0x0.0x0.0x0", "0.0.0.0"),
        ("00000000000000000001.0.0.1", "1.0.0.1"),
        ("1.2.3", "1.2.0.3"),
        ("1.0x10000", "1.1.0.0"),
        ("1.0x1000000", None),
        ("0x100.0.0.1", None),
        ("1..2", None),
        ("", None),
        ("08", None),
        ("1.2.3.4..", None),
    ],
)
def test_inet_aton_parts(host: str, expected: str | None) -> None:
    result = parse_ipv4_number(host)
    assert (str(result) if result else None) == expected


@given(st.text(max_size=200))
def test_parsing_never_raises_on_any_text(text: str) -> None:
    result = parse(text)
    assert isinstance(result, Address | Refused)


url_parts = st.tuples(
    st.sampled_from(["https://", "http://", "HTTPS://", "https:/", "ftp://", ""]),
    st.text(alphabet="ab0x7f.:@[]%\\/?#1 -ü①", max_size=30),
    st.text(max_size=20),
)


@given(url_parts)
def test_parsed_addresses_are_well_formed(parts: tuple[str, str, str]) -> None:
    result = parse("".join(parts))
    if isinstance(result, Address):
        assert result.port == 443
        assert result.target.startswith("/")
        assert "#" not in result.target
        assert result.url.isascii()
        assert "@" not in result.authority
        assert isinstance(parse(result.url), Address)


BASE = "https://example.com/dir/page?x=1"
REFERENCES = [
    ("https://other.test/a", "https://other.test/a"),
    ("http://other.test/a", "https://other.test/a"),
    ("//other.test/a", "https://other.test/a"),
    ("/a/b", "https://example.com/a/b"),
    ("a", "https://example.com/dir/a"),
    ("../a", "https://example.com/a"),
    ("../../../a", "https://example.com/a"),
    ("./a/./b/../c", "https://example.com/dir/a/c"),
    ("..", "https://example.com/"),
    ("?y=2", "https://example.com/dir/page?y=2"),
    ("#frag", "https://example.com/dir/page?x=1"),
    ("", "https://example.com/dir/page?x=1"),
    ("a b?c d", "https://example.com/dir/a%20b?c%20d"),
    ("/a?b#c", "https://example.com/a?b"),
]


@pytest.mark.parametrize(("reference", "expected"), REFERENCES, ids=[r for r, _ in REFERENCES])
def test_references_resolve_against_the_page_as_rfc_3986_says(
    reference: str, expected: str
) -> None:
    base = parse(BASE)
    assert isinstance(base, Address)
    resolved = parse(resolve_reference(base, reference))
    assert isinstance(resolved, Address), resolved
    assert resolved.url == expected
