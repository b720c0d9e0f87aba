"""The operator's lists (SPEC 7 step 2), as a specification: both sides of each boundary."""

from __future__ import annotations

import pytest

from fetcher.net.domains import (
    DomainLists,
    covering,
    covers,
    domain_refusal,
    parse_domains,
    written_host_refusal,
)
from fetcher.net.urls import Address, Refused, parse
from fetcher.reasons import Reason


def lists(*, deny: tuple[str, ...] = (), allow: tuple[str, ...] = ()) -> DomainLists:
    parsed_deny = parse_domains(deny)
    parsed_allow = parse_domains(allow)
    assert not isinstance(parsed_deny, Refused)
    assert not isinstance(parsed_allow, Refused)
    return DomainLists(deny=parsed_deny, allow=parsed_allow)


def host_of(url: str) -> str:
    address = parse(url)
    assert isinstance(address, Address), address
    return address.host


# (list entry as the operator wrote it, address, whether the entry covers the address's host)
COVERS = [
    # the domain itself, and names under it, on label boundaries
    ("example.com", "https://example.com/", True),
    ("example.com", "https://www.example.com/", True),
    ("example.com", "https://a.b.c.example.com/x", True),
    ("example.com", "https://evilexample.com/", False),
    ("example.com", "https://example.com.evil.org/", False),
    ("example.com", "https://example.co/", False),
    ("example.com", "https://xample.com/", False),
    ("www.example.com", "https://example.com/", False),
    ("www.example.com", "https://www.example.com/", True),
    ("com", "https://example.com/", True),
    ("com", "https://example.org/", False),
    # case and trailing dots, on either side
    ("Example.COM", "https://www.example.com/", True),
    ("example.com.", "https://www.example.com/", True),
    ("example.com", "https://WWW.Example.Com./", True),
    # IDNA: Unicode and Punycode spellings are one host, on either side
    ("bücher.de", "https://xn--bcher-kva.de/", True),
    ("xn--bcher-kva.de", "https://www.bücher.de/", True),
    ("BÜCHER.de", "https://bücher.de/", True),
    ("bücher.de", "https://bucher.de/", False),
    ("bücher.de", "https://xn--xbcher-kva.de/", False),
    # UTS 46 mapping: full-width dots and letters mean the same name
    ("example.com", "https://ｅｘａｍｐｌｅ。ｃｏｍ/", True),
    # IP literals match only themselves, never as a suffix
    ("192.0.2.1", "https://192.0.2.1/", True),
    ("192.0.2.1", "https://3221225985/", True),
    ("2.1", "https://192.0.2.1/", False),
    ("0.2.1", "https://192.0.2.1/", False),
    ("2001:db8::1", "https://[2001:db8::1]/", True),
    ("[2001:DB8:0::1]", "https://[2001:db8::1]/", True),
    ("2001:db8::1", "https://[2001:db8::2]/", False),
]


@pytest.mark.parametrize(("entry", "url", "expected"), COVERS)
def test_an_entry_covers_its_domain_and_names_under_it_only(
    entry: str, url: str, expected: bool
) -> None:
    (domain,) = lists(deny=(entry,)).deny
    assert covers(domain, host_of(url)) is expected


@pytest.mark.parametrize(("entry", "url", "expected"), COVERS)
def test_deny_refuses_exactly_what_its_entry_covers(entry: str, url: str, expected: bool) -> None:
    refusal = domain_refusal(host_of(url), lists(deny=(entry,)))
    if expected:
        assert refusal is not None
        assert refusal.reason is Reason.DENIED
        assert "deny list" in refusal.detail
    else:
        assert refusal is None


@pytest.mark.parametrize(("entry", "url", "expected"), COVERS)
def test_allow_lets_through_exactly_what_its_entry_covers(
    entry: str, url: str, expected: bool
) -> None:
    refusal = domain_refusal(host_of(url), lists(allow=(entry,)))
    if expected:
        assert refusal is None
    else:
        assert refusal is not None
        assert refusal.reason is Reason.DENIED
        assert "allow list" in refusal.detail


def test_empty_lists_refuse_nothing() -> None:
    empty = DomainLists()
    assert empty.empty
    for _entry, url, _expected in COVERS:
        assert domain_refusal(host_of(url), empty) is None


def test_deny_wins_over_allow() -> None:
    both = lists(deny=("ads.example.com",), allow=("example.com",))
    assert domain_refusal("www.example.com", both) is None
    refused = domain_refusal("x.ads.example.com", both)
    assert refused is not None
    assert "deny list (ads.example.com)" in refused.detail
    assert domain_refusal("example.org", both) is not None


def test_several_allowed_domains_each_cover_their_own() -> None:
    allowed = lists(allow=("example.com", "example.org"))
    assert domain_refusal("docs.example.org", allowed) is None
    assert domain_refusal("example.com", allowed) is None
    assert domain_refusal("example.net", allowed) is not None


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        (["example.com"], ("example.com",)),
        (["Example.com", "example.com.", " EXAMPLE.COM "], ("example.com",)),
        (["", "  ", "example.org"], ("example.org",)),
        (["bücher.de"], ("xn--bcher-kva.de",)),
        (["2001:DB8::1", "[2001:db8::1]"], ("2001:db8::1",)),
        (["0x7f.1"], ("127.0.0.1",)),
        ([], ()),
    ],
)
def test_entries_are_normalised_like_addresses(
    written: list[str], expected: tuple[str, ...]
) -> None:
    assert parse_domains(written) == expected


@pytest.mark.parametrize(
    ("written", "why"),
    [
        ("*.example.com", "covers its subdomains"),
        (".example.com", "covers its subdomains"),
        ("https://example.com", "not an address"),
        ("example.com/path", "not an address"),
        ("example.com:443", "not an address"),
        ("user@example.com", "not an address"),
        ("exa mple.com", "'exa mple.com'"),
        ("-bad-.com", "'-bad-.com'"),
        ("xn--zz.com", "'xn--zz.com'"),
        ("a" * 64 + ".com", "'"),
    ],
)
def test_entries_that_are_not_domains_are_refused_naming_them(written: str, why: str) -> None:
    result = parse_domains(["example.org", written])
    assert isinstance(result, Refused)
    assert result.reason is Reason.MALFORMED
    assert why in result.detail


@pytest.mark.parametrize(("entry", "url", "expected"), COVERS)
def test_written_hosts_are_judged_as_the_fetcher_judges(
    entry: str, url: str, expected: bool
) -> None:
    """The gateway holds hosts as written (``gateway.tools.fetch.addresses.host_of``: lower-cased,
    brackets and trailing dot gone); it must reach the fetcher's decision."""
    written = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)[0] if "[" not in url else ""
    written = written or url.split("[", 1)[1].split("]", 1)[0]
    written = written.lower().removesuffix(".")
    for operator in (lists(deny=(entry,)), lists(allow=(entry,))):
        decided = domain_refusal(host_of(url), operator)
        assert (written_host_refusal(written, operator) is None) is (decided is None)


def test_a_written_host_that_is_not_one_passes_a_deny_list_but_no_allow_list() -> None:
    assert written_host_refusal("exa mple.com", lists(deny=("example.com",))) is None
    refused = written_host_refusal("exa mple.com", lists(allow=("example.com",)))
    assert refused is not None
    assert refused.reason is Reason.DENIED
    assert written_host_refusal("anything", DomainLists()) is None


@pytest.mark.parametrize(("entry", "url", "expected"), COVERS)
def test_the_set_look_up_agrees_with_the_definition(entry: str, url: str, expected: bool) -> None:
    (domain,) = lists(deny=(entry,)).deny
    host = host_of(url)
    assert (covering(host, frozenset({domain})) is not None) is covers(domain, host) is expected


def test_a_decision_costs_the_hosts_labels_not_the_lists_length() -> None:
    """100,000 entries (a block list) and a 253-character host of 124 labels: the
    decision looks up the host's suffixes, never walks the list."""
    many = DomainLists(deny=tuple(f"blocked{n}.example" for n in range(100_000)))
    host = ".".join(["a"] * 123 + ["example"])
    assert len(host) <= 253
    assert domain_refusal(host, many) is None
    assert domain_refusal("x.blocked99999.example", many) is not None
    assert many == DomainLists(deny=many.deny)  # the sets are not part of the value
